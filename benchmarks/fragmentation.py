"""The quality benchmark of issue #11: GPU allocation on the FGD paper's experiment, ours beside the paper's.

    python benchmarks/fragmentation.py           # every trace file, seeds 42-51 (what `make bench` runs)
    python benchmarks/fragmentation.py --quick   # the default trace, seeds 42 and 43
    python benchmarks/fragmentation.py --workloads openb_pod_list_default,openb_pod_list_multigpu50 --seeds 42

Each trace file of `../shared/traces/cluster-trace-gpu-v2023` is replayed as the paper did it, seed by
seed (`fgd_replay`: its arrival order, node names and tuning, allocate only, no departures), with three
configurations: KAI's default, the default with `nodeplacement`'s `cpuAvoidsIdleGpus` option
(examples/cpu-steering-config.yaml), and `gpufragmentation` (examples/gpu-fragmentation-config.yaml).
The figure is the paper's: the share of all GPUs allocated when the arrived GPU requests reach a given
percent of the cluster's GPUs, compared at 100% (at 130% for the `gpuspec` files, whose published
curves are distorted below that: their GPU-model constraints make pods fail early), beside the paper's
own per-seed results for Random, DotProd, GpuClustering, GpuPacking, BestFit and FGD (the same seeds;
some trace files have none).

It reports the curve as well: at every arrival level from 80% to 100%, gpufragmentation's mean against
FGD's over the same seeds, per trace file the paper has, and the levels where it is below (the goal of
issue #23: at or above FGD at every level, not only at the comparison point).

It also times one replay as a user runs it: the default trace's arrivals up to 100% (about 8,300 pods)
written as YAML, then `kai-scheduler simulate DIR --config C --cycles 1 --output json` as a process
(wall and CPU time, peak memory), with each configuration. Goal: under 5 s, loading included.

And the plugin's cost (issue #23's row, `fragmentation_cost.py`): the first cycle of the scale
benchmark's backlog at 5,000 nodes with gpufragmentation against KAI's default (not with --quick or
--no-cost).

Writes `benchmarks/results/fragmentation.json` (every curve), the key `fragmentation` of
`benchmarks/results.json` (the table's figures), `docs/fragmentation.md` (the table) and
`docs/fragmentation.png` (allocation against arrived load on the default trace, as the paper draws it,
and the comparison point of every trace file).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_io
import fgd_replay as fgd
import fragmentation_cost
import run
import yaml
from rich.console import Console
from rich.table import Table

from kai_scheduler.framework.config import config_document

RESULTS = bench_io.BENCHMARKS / "results" / "fragmentation.json"
DOC = bench_io.REPO / "docs" / "fragmentation.md"
PLOT = DOC.with_name("fragmentation.png")
OURS = "gpufragmentation"
STEERING = "default+cpuAvoidsIdleGpus"
DEFAULT = "default"
OUR_POLICIES = (DEFAULT, STEERING, OURS)
TIMING_WORKLOAD = "openb_pod_list_default"
TIMING_SEED = 42
GOAL_SECONDS = 5.0
HEADLINE = 100  # percent of arrived load
CURVE_LEVELS = range(80, 101)  # the arrival levels the curve compares with FGD


def comparison_point(workload: str) -> int:
    """Where a trace file is compared: 130% for the gpuspec files (see the module), else 100%."""
    return 130 if "gpuspec" in workload else HEADLINE


# --- replays (in worker processes) --------------------------------------------------------------


def _replay(job: tuple[str, int, str]) -> dict[str, Any]:
    workload, seed, policy = job
    began = time.process_time()
    result = fgd.replay(fgd.arrivals(workload, seed), fgd.policies()[policy])
    return {
        "workload": workload,
        "seed": seed,
        "policy": policy,
        "columns": fgd.columns(result.events, result.total_gpus),
        "failedPods": result.failed,
        "cycleSeconds": result.cycle_seconds,
        "cpuSeconds": time.process_time() - began,
    }


def replay_all(
    workloads: list[str],
    seeds: list[int],
    jobs: int,
    console: Console,
    policies: tuple[str, ...] = OUR_POLICIES,
) -> list[dict[str, Any]]:
    work = [(w, s, p) for w in workloads for s in seeds for p in policies]
    console.print(
        f"{len(work)} replays ({len(workloads)} trace files x {len(seeds)} seeds x "
        f"{len(policies)} configurations)"
    )
    results = []
    began = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for i, result in enumerate(pool.imap_unordered(_replay, work), start=1):
            results.append(result)
            if i % 25 == 0 or i == len(work):
                console.print(f"  {i}/{len(work)} done, {time.perf_counter() - began:.0f} s")
    return sorted(results, key=lambda r: (r["workload"], r["policy"], r["seed"]))


# --- the timed command ----------------------------------------------------------------------------


def time_command(budget: float) -> dict[str, Any]:
    """The `simulate` command on the default trace's arrivals up to 100%, once per configuration."""
    arrivals = fgd.arrivals(TIMING_WORKLOAD, TIMING_SEED).up_to(HEADLINE)
    timings: dict[str, Any] = {"workload": TIMING_WORKLOAD, "seed": TIMING_SEED, "pods": len(arrivals.pods)}
    with tempfile.TemporaryDirectory(prefix="kai-fragmentation-") as work:
        folder = Path(work) / "manifests"
        run.write_yaml(fgd.documents(arrivals), folder)
        for policy, config in fgd.policies().items():
            config_file = Path(work) / f"{policy}.yaml"
            config_file.write_text(yaml.safe_dump(config_document(config), sort_keys=False), encoding="utf-8")
            out = Path(work) / f"{policy}.json"
            command = bench_io.python_command(
                "-m", "kai_scheduler", "simulate", str(folder), "--config", str(config_file),
                "--cycles", "1", "--output", "json",
            )  # fmt: skip
            child = bench_io.run_child(command, bench_io.child_env(bench_io.DEFAULT_TREE), out, budget)
            entry: dict[str, Any] = {
                "seconds": child.seconds,
                "cpuSeconds": child.cpu_seconds,
                "maxRssBytes": child.max_rss_bytes,
                "reached": not child.timed_out,
            }
            if child.returncode not in (0, None):
                raise SystemExit(f"simulate with {policy} failed:\n{child.stderr[-2000:]}")
            if not child.timed_out:
                document = json.loads(out.read_text(encoding="utf-8"))
                decisions = [d for d in document["decisions"] if d["cycle"] == 1]
                entry["cycleSeconds"] = document["cycleSeconds"][0]
                entry["bound"] = sum(1 for d in decisions if d["type"] == "bind")
                events = fgd.allocation_events(arrivals, [_Decision(d) for d in decisions])
                entry["allocationAt100"] = 100.0 * events[-1][1] / (arrivals.total_gpus * 1000)
            timings[policy] = entry
    return timings


class _Decision:
    """A decision of the JSON output, as `allocation_events` reads it."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.type = document["type"]
        self.pod = document["pod"]


# --- summary ------------------------------------------------------------------------------------


def summarise(results: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Per trace file: at its comparison point, the mean over the seeds of every configuration and of the
    paper's policies (only seeds the paper has), and per seed ours against FGD."""
    paper = fgd.paper_rows()
    by_workload: dict[str, Any] = {}
    for workload in sorted({r["workload"] for r in results}):
        point = comparison_point(workload)
        mine = {
            policy: {
                r["seed"]: r["columns"].get(point)
                for r in results
                if r["workload"] == workload and r["policy"] == policy
            }
            for policy in OUR_POLICIES
        }
        row: dict[str, Any] = {"point": point, "seeds": seeds, "means": {}, "perSeed": {}}
        for policy, values in mine.items():
            row["means"][policy] = _mean(values.values())
            row["perSeed"][policy] = values
        for policy in fgd.PAPER_POLICIES:
            values = {
                s: paper[(workload, policy, s)].get(point) for s in seeds if (workload, policy, s) in paper
            }
            if values:
                row["means"][policy] = _mean(values.values())
                if policy == "FGD":  # (the others' seeds are in ../shared/traces, as FGD's)
                    row["perSeed"][policy] = values
        fgd_mean, ours_mean = row["means"].get("FGD"), row["means"].get(OURS)
        row["oursAboveFgd"] = None if fgd_mean is None or ours_mean is None else ours_mean > fgd_mean
        by_workload[workload] = row
    return by_workload


def _mean(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.fmean(present), 2) if present else None


def curves(results: list[dict[str, Any]], workload: str) -> dict[str, dict[int, float]]:
    """Mean allocation at every arrival percent over the seeds, per configuration and paper policy."""
    seeds = sorted({r["seed"] for r in results if r["workload"] == workload})
    out: dict[str, dict[int, float]] = {}
    for policy in OUR_POLICIES:
        rows = [r["columns"] for r in results if r["workload"] == workload and r["policy"] == policy]
        out[policy] = _mean_curve(rows)
    paper = fgd.paper_rows()
    for policy in fgd.PAPER_POLICIES:
        rows = [paper[(workload, policy, s)] for s in seeds if (workload, policy, s) in paper]
        if rows:
            out[policy] = _mean_curve(rows)
    return out


def _mean_curve(rows: list[dict[Any, float]]) -> dict[int, float]:
    points = sorted({int(x) for row in rows for x in row})
    return {
        x: statistics.fmean(values)
        for x in points
        if (values := [row[k] for row in rows for k in (x, str(x)) if k in row])
    }


def fgd_curve(results: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Per trace file the paper has FGD's results for: at every level of CURVE_LEVELS, gpufragmentation's
    mean and FGD's over the seeds both have, their difference, and the levels where ours is below, over
    the means and per seed."""
    paper = fgd.paper_rows()
    out: dict[str, Any] = {}
    for workload in sorted({r["workload"] for r in results}):
        mine = {r["seed"]: r["columns"] for r in results if r["workload"] == workload and r["policy"] == OURS}
        both = [s for s in seeds if s in mine and (workload, "FGD", s) in paper]
        if not both:
            continue
        theirs = {s: paper[(workload, "FGD", s)] for s in both}
        levels: dict[int, dict[str, float]] = {}
        below_by_seed: dict[int, list[int]] = {}
        lowest_by_seed: dict[int, float] = {}
        for level in CURVE_LEVELS:
            ours_mean = _mean(mine[s].get(level) for s in both)
            fgd_mean = _mean(theirs[s].get(level) for s in both)
            if ours_mean is not None and fgd_mean is not None:
                difference = round(ours_mean - fgd_mean, 2)
                levels[level] = {"ours": ours_mean, "fgd": fgd_mean, "difference": difference}
            for s in both:
                ours, fgd_value = mine[s].get(level), theirs[s].get(level)
                if ours is not None and fgd_value is not None and (gap := round(ours - fgd_value, 2)) < 0:
                    below_by_seed.setdefault(s, []).append(level)
                    lowest_by_seed[s] = min(gap, lowest_by_seed.get(s, 0.0))
        below = [level for level, row in levels.items() if row["difference"] < 0]
        out[workload] = {
            "seeds": both,
            "levels": levels,
            "below": below,
            "belowBySeed": below_by_seed,
            "lowestBySeed": lowest_by_seed,
        }
    return out


def _levels_text(levels: list[int]) -> str:
    """80, 81, 82, 90 -> "80-82, 90"."""
    runs: list[list[int]] = []
    for level in levels:
        if runs and level == runs[-1][-1] + 1:
            runs[-1].append(level)
        else:
            runs.append([level])
    return ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) + "%"


CURVE_SHOWN = (80, 85, 90, 95, 100)


def curve_rows(curve: dict[str, Any]) -> list[list[str]]:
    rows = []
    for workload, entry in curve.items():
        levels = entry["levels"]
        lowest = min(levels.values(), key=lambda row: row["difference"])["difference"] if levels else None
        rows.append(
            [workload.removeprefix("openb_pod_list_")]
            + [f"{levels[x]['difference']:+.2f}" if x in levels else "–" for x in CURVE_SHOWN]
            + [f"{lowest:+.2f}" if lowest is not None else "–"]
            + [_levels_text(entry["below"]) if entry["below"] else "nowhere"]
        )
    return rows


def seeds_below(curve: dict[str, Any]) -> str:
    """Where single seeds are below FGD: "multigpu40 seed 43 at 98-100% (-0.15), ..." (or "nowhere")."""
    parts = [
        f"{workload.removeprefix('openb_pod_list_')} seed {seed} at {_levels_text(levels)}"
        + (f" ({lowest:+.2f})" if (lowest := entry.get("lowestBySeed", {}).get(seed)) is not None else "")
        for workload, entry in curve.items()
        for seed, levels in sorted(entry.get("belowBySeed", {}).items(), key=lambda item: int(item[0]))
    ]
    return ", ".join(parts) if parts else "nowhere"


CURVE_HEADERS = ["trace file", *(f"{x}%" for x in CURVE_SHOWN), "lowest, 80-100%", "below FGD at"]


# --- output -------------------------------------------------------------------------------------

COLUMNS = (DEFAULT, STEERING, OURS, *fgd.PAPER_POLICIES)
LABELS = {DEFAULT: "KAI default", STEERING: "default + cpuAvoidsIdleGpus", OURS: "gpufragmentation"}


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def table_rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    for workload, row in summary.items():
        means = row["means"]
        verdict = {True: "yes", False: "NO", None: "no paper data"}[row["oursAboveFgd"]]
        rows.append(
            [workload.removeprefix("openb_pod_list_"), f"{row['point']}%"]
            + [_cell(means.get(policy)) for policy in COLUMNS]
            + [verdict]
        )
    return rows


def render(
    summary: dict[str, Any], curve: dict[str, Any], timings: dict[str, Any] | None, console: Console
) -> None:
    table = Table(title="GPU allocation (%) at the comparison point, mean of the seeds")
    for header in ("trace file", "at", *(LABELS.get(c, c) for c in COLUMNS), "ours > FGD"):
        table.add_column(header, justify="right" if header not in ("trace file",) else "left")
    for row in table_rows(summary):
        table.add_row(*row)
    console.print(table)
    if curve:
        table = Table(title="gpufragmentation - FGD (points of allocation) as the arrivals fill the cluster")
        for header in CURVE_HEADERS:
            table.add_column(header, justify="left" if header in ("trace file", "below FGD at") else "right")
        for row in curve_rows(curve):
            table.add_row(*row)
        console.print(table)
        below = [w for w, entry in curve.items() if entry["below"]]
        console.print(
            "below FGD somewhere in 80-100%: " + (", ".join(below) if below else "no trace file"),
            style="bold red" if below else "bold green",
        )
        console.print("seed by seed: " + seeds_below(curve))
    if timings:
        for policy in OUR_POLICIES:
            entry = timings.get(policy, {})
            if entry.get("reached"):
                console.print(
                    f"simulate, {timings['pods']:,} pods, {LABELS[policy]}: {entry['seconds']:.2f} s wall, "
                    f"{entry['cpuSeconds']:.2f} s CPU, cycle {entry['cycleSeconds']:.2f} s, "
                    f"peak RSS {entry['maxRssBytes'] / 2**20:.0f} MiB"
                )


def markdown(
    summary: dict[str, Any],
    curve: dict[str, Any],
    timings: dict[str, Any] | None,
    seeds: list[int],
    plotted: bool,
) -> str:
    headers = ["trace file", "at", *(LABELS.get(c, c) for c in COLUMNS), "ours > FGD"]
    lines = [
        "# GPU allocation on the FGD paper's experiment",
        "",
        "Generated by `benchmarks/fragmentation.py` (`make bench`); how it is measured is in its docstring",
        "and in benchmarks/README.md. The FGD paper (Weng et al., ATC'23) replays Alibaba's",
        "cluster-trace-gpu-v2023 (1,213 nodes, 6,212 GPUs) with random copies of its pods until their GPU",
        "requests reach 130% of the GPUs, in a seeded order, allocate only, no departures. The figure is the",
        "share of all GPUs allocated when the arrived requests reach a percent of the GPUs: 100% here (130%",
        "for the gpuspec files), the mean over seeds "
        + ", ".join(str(s) for s in seeds)
        + ". The paper's six policies are its own published",
        "per-seed results for the same seeds (– : the paper has none for that file).",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(summary)]
    if curve:
        below = [w.removeprefix("openb_pod_list_") for w, entry in curve.items() if entry["below"]]
        verdict = ", ".join(below) if below else "no trace file"
        lines += [
            "",
            "As the arrivals fill the cluster: gpufragmentation's allocation minus FGD's (points), mean of",
            "the same seeds, at every arrival level from 80% to 100% (a few shown, the lowest of all 21):",
            "",
            "| " + " | ".join(CURVE_HEADERS) + " |",
            "|" + "|".join("---" for _ in CURVE_HEADERS) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in curve_rows(curve)]
        lines += [
            "",
            f"Below FGD somewhere between 80% and 100%: {verdict}. Seed by seed: {seeds_below(curve)}.",
        ]
    if timings:
        lines += [
            "",
            "One replay as a user runs it (`kai-scheduler simulate`, the default trace's "
            f"{timings['pods']:,} arrivals up to 100%, one cycle, loading included; goal under 5 s):",
            "",
        ]
        lines += ["| configuration | wall | CPU | cycle | peak memory |", "|---|---|---|---|---|"]
        for policy in OUR_POLICIES:
            entry = timings.get(policy, {})
            if entry.get("reached"):
                lines.append(
                    f"| {LABELS[policy]} | {entry['seconds']:.2f} s | {entry['cpuSeconds']:.2f} s | "
                    f"{entry['cycleSeconds']:.2f} s | {entry['maxRssBytes'] / 2**20:.0f} MiB |"
                )
    if plotted:
        lines += ["", f"![allocation against arrived load]({PLOT.name})"]
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], summary: dict[str, Any], curve: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return False
    if TIMING_WORKLOAD not in summary:
        return False
    figure, (left, middle, right) = plt.subplots(
        1, 3, figsize=(21, 5.5), gridspec_kw={"width_ratios": [1, 1, 1.4]}
    )
    styles = {
        OURS: ("tab:red", "-", 2.4),
        DEFAULT: ("tab:gray", "-", 1.6),
        STEERING: ("tab:orange", "--", 1.6),
    }
    for policy, allocation in curves(results, TIMING_WORKLOAD).items():
        xs = [x for x in sorted(allocation) if 70 <= x <= fgd.STOP]
        color, line, width = styles.get(policy, (None, ":", 1.2))
        left.plot(
            xs,
            [allocation[x] for x in xs],
            line,
            color=color,
            linewidth=width,
            label=LABELS.get(policy, policy),
        )
    left.set_xlabel("arrived GPU requests (% of the cluster's GPUs)")
    left.set_ylabel("GPUs allocated (%)")
    left.set_title("openb_pod_list_default, mean of the seeds")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    for workload, entry in curve.items():
        xs = sorted(entry["levels"])
        middle.plot(
            xs,
            [entry["levels"][x]["difference"] for x in xs],
            linewidth=1.2,
            label=workload.removeprefix("openb_pod_list_"),
        )
    middle.axhline(0.0, color="black", linewidth=1.0)
    middle.set_xlabel("arrived GPU requests (% of the cluster's GPUs)")
    middle.set_ylabel("gpufragmentation - FGD (points of allocation)")
    middle.set_title("against FGD as the cluster fills, every trace file")
    middle.grid(alpha=0.3)
    middle.legend(fontsize=6, ncol=2)
    names = list(summary)
    shown = [(OURS, "tab:red"), ("FGD", "tab:blue"), ("BestFit", "tab:green"), (DEFAULT, "tab:gray")]
    width = 0.2
    for i, (policy, color) in enumerate(shown):
        values = [summary[w]["means"].get(policy) or 0.0 for w in names]
        right.bar(
            [k + (i - 1.5) * width for k in range(len(names))],
            values,
            width,
            color=color,
            label=LABELS.get(policy, policy),
        )
    right.set_xticks(range(len(names)))
    right.set_xticklabels(
        [w.removeprefix("openb_pod_list_") for w in names], rotation=60, ha="right", fontsize=8
    )
    right.set_ylim(75, 100)
    right.set_ylabel("GPUs allocated (%) at 100% (gpuspec: 130%)")
    right.set_title("every trace file")
    right.grid(axis="y", alpha=0.3)
    right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def carry_stored(summary: dict[str, Any], stored: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`summary` with what this run did not replay as `stored` has it: a configuration of a trace file
    (KAI's default and its option do not change with the plugin, and decisions of the default do not
    change), or a trace file; and which configurations were carried."""
    merged = {workload: row for workload, row in stored.get("summary", {}).items()}
    carried: set[str] = set()
    for workload, row in summary.items():
        before = merged.get(workload)
        if before is not None:
            for policy in OUR_POLICIES:
                if not any(v is not None for v in row["perSeed"].get(policy, {}).values()):
                    row["means"][policy] = before["means"].get(policy)
                    row["perSeed"][policy] = before["perSeed"].get(policy, {})
                    carried.add(policy)
            fgd_mean, ours_mean = row["means"].get("FGD"), row["means"].get(OURS)
            row["oursAboveFgd"] = None if fgd_mean is None or ours_mean is None else ours_mean > fgd_mean
        merged[workload] = row
    return dict(sorted(merged.items())), sorted(carried)


def _stored_entry() -> dict[str, Any] | None:
    """results.json's `fragmentation` entry, if there is one."""
    if not bench_io.RESULTS_JSON.exists():
        return None
    entry: dict[str, Any] | None = (
        json.loads(bench_io.RESULTS_JSON.read_text(encoding="utf-8")).get("fragmentation", {}).get("after")
    )
    return entry


def _same_replays(stored: dict[str, Any], summary: dict[str, Any]) -> bool:
    """Whether `summary` comes from the replays `stored` was recorded from: every configuration's figure
    per seed alike (a results.json from another checkout keeps its own)."""
    fresh = json.loads(json.dumps(summary))  # (seeds as JSON keys, as stored)
    return bool(
        {w: row["perSeed"] for w, row in stored.get("summary", {}).items()}
        == {w: row["perSeed"] for w, row in fresh.items()}
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workloads", default="all", help="comma-separated trace files (default: all of them)"
    )
    parser.add_argument("--seeds", default=",".join(str(s) for s in fgd.SEEDS), help="comma-separated seeds")
    parser.add_argument("--quick", action="store_true", help="the default trace, seeds 42 and 43")
    parser.add_argument(
        "--configurations",
        default=",".join(OUR_POLICIES),
        help="comma-separated configurations to replay (default: all three); the others keep their figures "
        "in results.json",
    )
    parser.add_argument("--jobs", type=int, default=2, help="replays at once (child processes)")
    parser.add_argument("--no-timing", action="store_true", help="skip the timed simulate command")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost row (fragmentation_cost.py)")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds one timed command may take")
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="no replays: the table, the plot and results.json's comparison again from the last replays",
    )
    args = parser.parse_args(argv)
    console = Console(width=200)
    workloads = fgd.workloads() if args.workloads == "all" else args.workloads.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.quick:
        workloads, seeds = [TIMING_WORKLOAD], [42, 43]
    unknown = sorted(set(workloads) - set(fgd.workloads()))
    if unknown:
        raise SystemExit(f"--workloads: no trace file {unknown[0]} (known: {', '.join(fgd.workloads())})")
    policies = tuple(args.configurations.split(","))
    if strange := sorted(set(policies) - set(OUR_POLICIES)):
        raise SystemExit(
            f"--configurations: no configuration {strange[0]} (known: {', '.join(OUR_POLICIES)})"
        )
    if args.report_only:
        saved = json.loads(RESULTS.read_text(encoding="utf-8"))
        results, timings = saved["results"], saved["timings"]
        for result in results:  # (JSON keys are strings)
            result["columns"] = {int(x): value for x, value in result["columns"].items()}
        seeds = sorted({r["seed"] for r in results})
    else:
        results = replay_all(workloads, seeds, args.jobs, console, policies)
        timings = None if args.no_timing else time_command(args.budget)
    summary = summarise(results, seeds)
    carried: list[str] = []
    carried_from = ""
    if set(policies) != set(OUR_POLICIES) and not args.report_only and (stored := _stored_entry()):
        summary, carried = carry_stored(summary, stored)
        timings, carried_from = timings or stored.get("timings"), stored["timestamp"]
    curve = fgd_curve(results, seeds)
    render(summary, curve, timings, console)
    if not (args.quick or args.no_cost or args.report_only):
        fragmentation_cost.main(["--no-save"] if args.no_save else [])
    if args.no_save:
        return 0
    recorded = not args.report_only
    if not args.report_only:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"results": results, "timings": timings}, indent=1), encoding="utf-8")
        entry: dict[str, Any] = {
            **bench_io.stamp(bench_io.DEFAULT_TREE),
            "summary": summary,
            "curve": curve,
            "timings": timings,
        }
        if carried:
            entry["carried"] = {"from": carried_from, "configurations": carried}
        bench_io.update("fragmentation", "after", entry)
    elif (stored := _stored_entry()) and _same_replays(stored, summary):
        # The replays are the measurement (their stamp and timings stay); the comparison with the paper's
        # rows is worked out again from them.
        bench_io.update("fragmentation", "after", {**stored, "summary": summary, "curve": curve})
        recorded = True
    # (the plot draws every configuration's replays of the default trace: kept as it was without them)
    plotted = plot(results, summary, curve, PLOT) if not carried else PLOT.exists()
    DOC.write_text(markdown(summary, curve, timings, seeds, plotted), encoding="utf-8")
    written = [] if args.report_only else [RESULTS]
    written += [bench_io.RESULTS_JSON] if recorded else []
    written = [path.relative_to(bench_io.REPO) for path in [*written, DOC]]
    console.print("written: " + ", ".join(str(path) for path in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
