"""Issue #24's benchmark: do large jobs still starve, and what does holding capacity for them cost?

    python benchmarks/backfill.py                  # both workloads, with and without; results.json, plots
    python benchmarks/backfill.py --write-doc      # ... and the tables of the benchmark's doc
    python benchmarks/backfill.py --quick          # a 3-hour saturated workload and the trace's first 4 hours
    python benchmarks/backfill.py --write-yaml DIR # the saturated workload as manifests `simulate` reads

Each workload runs twice through the embedded simulator until every job completed, with the same
manifests and the same configuration except one plugin: KAI's default (`SchedulerConfig()`), and the
default with `reservation` (`maxReservations: "1"`) added to its tier, as `examples/backfill-config.yaml`
configures it. The workloads:

1. `saturated`, issue #24's (seeded, `SEED`): 32 nodes x 8 GPUs; queues `research` and `training` under
   the department `ml`, each deserving 128 GPUs, over-quota weight 1, no limit, `research` with
   `reclaimMinRuntime: 2h` (its running jobs may not be reclaimed: KAI then waits for free GPUs rather
   than kill small jobs for the gang); a one-GPU `research` job every 10 s for 7 h, each running 20-90
   minutes (uniform); a 16 x 8-GPU `training` gang (minMember 16, half the cluster) every hour from 1 h
   to 7 h, each running 60 minutes. Small jobs are bare pods; large ones are the gangs.
2. `trace`, a public trace: a Pollux / AdaptDL workload (`../shared/traces/pollux-adaptdl-workloads`, read
   there, never copied), imported as `kai-scheduler trace import pollux` does, except that each job is a
   rigid gang of its `num_replicas` one-GPU pods (minMember = num_replicas), the job a scheduler without
   elastic resizing runs; large jobs are those wider than a node (multi-node gangs).

Reported per run: the large and small jobs' waits (arrival to start, mean and p99), the time-weighted GPU
allocation over the arrival window and over the whole run, the large jobs that started, the jobs
backfilled onto held capacity (`SessionResult.backfilled`), and the run's wall and CPU time (simulation
plus the timeline replay that yields the figures). Results go to `benchmarks/results.json` under
`reservationBackfill` and the plots (GPU allocation over time, both runs on one plot per workload) to
`docs/`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

import kai_scheduler
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.config import SchedulerConfig, config_document, parse_config
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.sim.engine import CycleRecord, Simulation, SimulationOptions
from kai_scheduler.sim.gc_policy import collector_paused, fewer_collections
from kai_scheduler.sim.results import result_document
from kai_scheduler.sim.summary import distribution
from kai_scheduler.sim.timeline import GroupTimes, Timeline, integral, replay
from kai_scheduler.sim.timeseries import run_facts
from kai_scheduler.traces import pollux
from kai_scheduler.traces.jobs import Slice
from kai_scheduler.traces.manifests import job_manifests, queue_manifest, seconds
from kai_scheduler.traces.queues import QueueMapping, assign, plan_queues

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_io  # results.json, the machine
import instrument  # the simulation's start time
import run  # node, queue and pod documents; models

SEED = 20261205
KEY = "reservationBackfill"
DOC = bench_io.REPO / "docs" / "reservation-and-backfill-benchmark.md"
DOC_START = "<!-- backfill-benchmark:start (benchmarks/backfill.py --write-doc) -->"
DOC_END = "<!-- backfill-benchmark:end -->"
MAX_RESERVATIONS = "1"
# The code measured: where kai_scheduler was imported from (this checkout's src, or PYTHONPATH's).
TREE = Path(kai_scheduler.__file__).resolve().parents[1]
SERIES = bench_io.BENCHMARKS / "results"  # each run's allocation over time, for the plots (git-ignored)
HOUR = 3600.0

# The saturated workload (issue #24).
NODES = 32
DEPARTMENT, SMALL_QUEUE, LARGE_QUEUE = "ml", "research", "training"
QUEUE_GPUS = 128
RECLAIM_MIN_RUNTIME = "2h"
SMALL_EVERY = 10.0
SMALL_MINUTES = (20, 90)
GANG_PODS, GANG_POD_GPUS, GANG_MINUTES = 16, 8, 60
PRIORITY = "train"

# The trace: a Pollux workload on the Pollux paper's testbed, 16 nodes x 4 GPUs.
TRACE_WORKLOAD = bench_io.TRACES / "pollux-adaptdl-workloads" / "workloads-realistic_workload-5.csv"
TRACE_CLUSTER = pollux.Cluster(16, 4)


# --- the workloads --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    title: str
    docs: list[dict[str, Any]]
    gpus_per_node: int
    # The last arrival: the end of the window the allocation is also averaged over.
    arrivals_end: float
    large_arrivals: tuple[float, ...]
    notes: dict[str, Any] = field(default_factory=dict)


def _timing(arrival: float, duration: float) -> dict[str, str]:
    return {
        "simulation.kai.scheduler/arrival": seconds(arrival),
        "simulation.kai.scheduler/duration": seconds(duration),
    }


def saturated(seed: int = SEED, hours: int = 7) -> Workload:
    """Issue #24's workload: small jobs every 10 s for `hours`, a half-cluster gang every hour from 1 h."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = [run.node_doc(i, {}) for i in range(NODES)]
    docs.append(run.queue_doc(DEPARTMENT, 2 * QUEUE_GPUS))
    research = run.queue_doc(SMALL_QUEUE, QUEUE_GPUS, parent=DEPARTMENT)
    research["spec"]["reclaimMinRuntime"] = RECLAIM_MIN_RUNTIME
    docs += [research, run.queue_doc(LARGE_QUEUE, QUEUE_GPUS, parent=DEPARTMENT)]
    end = hours * HOUR
    small = 0
    while small * SMALL_EVERY < end:
        duration = 60.0 * round(rng.uniform(*SMALL_MINUTES), 1)
        pod = run._pod(
            f"small-{small:05d}",
            SMALL_QUEUE,
            PRIORITY,
            run._container(1, 4, 32),
            annotations=_timing(small * SMALL_EVERY, duration),
        )
        docs.append(pod)
        small += 1
    for hour in range(1, hours + 1):
        name, arrival = f"gang-{hour}", hour * HOUR
        docs.append(
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {
                    "name": name,
                    "namespace": LARGE_QUEUE,
                    "labels": {run.QUEUE_LABEL: LARGE_QUEUE},
                    "annotations": {"simulation.kai.scheduler/arrival": seconds(arrival)},
                },
                "spec": {"minMember": GANG_PODS, "queue": LARGE_QUEUE, "priorityClassName": PRIORITY},
            }
        )
        container = run._container(GANG_POD_GPUS, 64, 512)
        timing = _timing(arrival, GANG_MINUTES * 60.0)
        for i in range(GANG_PODS):
            annotations = {run.POD_GROUP_ANNOTATION: name, **timing}
            docs.append(
                run._pod(f"{name}-{i:02d}", LARGE_QUEUE, PRIORITY, container, annotations=annotations)
            )
    last = max(float((small - 1) * SMALL_EVERY), hours * HOUR)
    return Workload(
        "saturated",
        f"issue #24's saturated workload ({NODES} nodes x 8 GPUs, {hours} h of arrivals)",
        docs,
        run.GPUS_PER_NODE,
        last,
        tuple(hour * HOUR for hour in range(1, hours + 1)),
        {"smallJobs": small, "gangs": hours, "seed": seed},
    )


def trace(
    path: Path = TRACE_WORKLOAD, cluster: pollux.Cluster = TRACE_CLUSTER, hours: float | None = None
) -> Workload:
    """A Pollux workload as rigid gangs (see the module doc), the importer's queues (one per application,
    quotas by demand), arrivals in [0, `hours`) (None: all)."""
    read = pollux.read_trace(str(path), cluster)
    jobs = [replace(job, min_member=job.replicas) for job in read.jobs]
    jobs = Slice(0.0, None if hours is None else hours * HOUR).take(jobs)
    mapping = QueueMapping(read.default_queue_column)
    queues = assign(jobs, mapping)
    planned = plan_queues(jobs, queues, mapping, read.gpu_capacity)
    docs = [
        *read.nodes,
        *(queue_manifest(q.name, q.quota, q.limit, q.over_quota_weight) for q in planned),
        *(doc for job, queue in zip(jobs, queues, strict=True) for doc in job_manifests(job, queue)),
    ]
    return Workload(
        "trace",
        f"Pollux `{path.name}` as rigid gangs ({cluster.nodes} nodes x {cluster.gpus_per_node} GPUs)",
        docs,
        cluster.gpus_per_node,
        max(job.arrival for job in jobs),
        tuple(job.arrival for job in jobs if job.replicas > cluster.gpus_per_node),
        {
            "workload": bench_io.shown_path(path),
            "jobs": len(jobs),
            "largeJobs": sum(1 for job in jobs if job.replicas > cluster.gpus_per_node),
            "queues": [q.name for q in planned],
            "gpuHoursAsked": round(sum(job.gpu_seconds or 0.0 for job in jobs) / HOUR, 1),
        },
    )


# --- the configurations ---------------------------------------------------------------------------


def kai_default() -> SchedulerConfig:
    return SchedulerConfig()


def with_reservation() -> SchedulerConfig:
    """KAI's default with the `reservation` plugin last in its tier: the one difference the issue asks for,
    and what `examples/backfill-config.yaml` configures."""
    document = config_document(SchedulerConfig())
    document["tiers"][-1]["plugins"].append(
        {"name": "reservation", "arguments": {"maxReservations": MAX_RESERVATIONS}}
    )
    return parse_config(document)


def without_consolidation(config: SchedulerConfig) -> SchedulerConfig:
    """`config` less the consolidation action, which placed pods on held capacity before dac6be7."""
    return replace(config, actions=tuple(a for a in config.actions if a != "consolidation"))


CONFIGS: dict[str, Callable[[], SchedulerConfig]] = {
    "default": kai_default,
    "reservation": with_reservation,
    # Not run unless asked for (--configs): whether consolidation changes what the feature gives.
    "default-no-consolidation": lambda: without_consolidation(kai_default()),
    "reservation-no-consolidation": lambda: without_consolidation(with_reservation()),
}
DEFAULT_RUNS = ("default", "reservation")
# The runs a plot shows (default-no-consolidation is drawn on top of the default's line).
PLOTTED = ("default", "reservation", "reservation-no-consolidation")
LABELS = {
    "default": "KAI's default",
    "reservation": "with reservation",
    "default-no-consolidation": "default, no consolidation",
    "reservation-no-consolidation": "reservation, no consolidation",
}
COLOURS = {
    "default": "tab:red",
    "reservation": "tab:blue",
    "default-no-consolidation": "tab:orange",
    "reservation-no-consolidation": "tab:green",
}


# --- one run --------------------------------------------------------------------------------------


@dataclass
class Backfills:
    """An observer: the jobs each cycle placed on held capacity, and the most holds at once."""

    jobs: set[str] = field(default_factory=set)
    holding: dict[str, bool] = field(default_factory=dict)
    most_holds: int = 0

    def __call__(self, record: CycleRecord, result: SessionResult) -> None:
        self.jobs.update(result.backfilled)
        for job, reservation in result.reservations.items():
            self.holding[job] = reservation is not None
        self.most_holds = max(self.most_holds, sum(self.holding.values()))


def measure(workload: Workload, config: SchedulerConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run to the end: its figures, and its GPU allocation over time (the plot's series)."""
    objects: list[ApiObject] = run.to_objects(workload.docs)
    options = SimulationOptions(start=instrument.START, max_cycles=10**8)
    wall, cpu = time.perf_counter(), time.process_time()
    with collector_paused():
        simulation = Simulation(objects, config, options)
    backfills = Backfills()
    simulation.observers.append(backfills)
    with fewer_collections():
        result = simulation.run()
        with collector_paused():
            timeline = replay(result_document(result), run_facts(result))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    series = {
        "times": timeline.times.tolist(),
        "allocated": timeline.total_allocated.tolist(),
        "end": timeline.end,
        "capacity": timeline.capacity,
    }
    return figures(workload, timeline, backfills, len(result.cycles), wall, cpu), series


def _large(group: GroupTimes, gpus_per_node: int, pod_gpus: dict[str, float]) -> bool:
    """Wider than one node: the GPUs its minMember pods take."""
    return group.min_member * pod_gpus.get(group.key, 0.0) > gpus_per_node


def figures(
    workload: Workload, timeline: Timeline, backfills: Backfills, cycles: int, wall: float, cpu: float
) -> dict[str, Any]:
    pod_gpus = _pod_gpus(workload.docs)
    groups = [g for g in timeline.groups if not g.preexisting]
    large = [g for g in groups if _large(g, workload.gpus_per_node, pod_gpus)]
    small = [g for g in groups if not _large(g, workload.gpus_per_node, pod_gpus)]

    def waits(of: Sequence[GroupTimes]) -> dict[str, Any]:
        found = distribution([g.start - g.arrival for g in of if g.start is not None])
        return {k: found[k] for k in ("count", "mean", "p99")}

    def allocation(until: float) -> float | None:
        if until <= 0 or timeline.capacity <= 0:
            return None
        return integral(timeline.times, timeline.total_allocated, until) / until / timeline.capacity

    return {
        "largeJobs": len(large),
        "largeStarted": sum(1 for g in large if g.start is not None),
        "largeWaitSeconds": waits(large),
        "largeWaits": [
            {"job": g.key, "arrival": g.arrival, "wait": None if g.start is None else g.start - g.arrival}
            for g in sorted(large, key=lambda g: g.arrival)
        ],
        "smallJobs": len(small),
        "smallStarted": sum(1 for g in small if g.start is not None),
        "smallWaitSeconds": waits(small),
        "gpuAllocationArrivals": allocation(workload.arrivals_end),
        "gpuAllocationRun": allocation(timeline.end),
        "arrivalsEndSeconds": workload.arrivals_end,
        "endSeconds": timeline.end,
        "backfilledJobs": len(backfills.jobs),
        "mostReservations": backfills.most_holds,
        "cycles": cycles,
        "wallSeconds": wall,
        "cpuSeconds": cpu,
    }


def _pod_gpus(docs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each pod group's GPUs a pod, by the timeline's group key: `namespace/name`, a bare pod's group
    named `pg-<pod>` as the simulator names it."""
    found: dict[str, float] = {}
    for doc in docs:
        if doc["kind"] != "Pod":
            continue
        meta = doc["metadata"]
        group = meta.get("annotations", {}).get(run.POD_GROUP_ANNOTATION)
        gpus = sum(
            float(c["resources"].get("requests", {}).get("nvidia.com/gpu", 0))
            for c in doc["spec"]["containers"]
        )
        found[f"{meta['namespace']}/{group or 'pg-' + meta['name']}"] = gpus
    return found


# --- the plot, the table, the doc ---------------------------------------------------------------


def plot(workload: Workload, name: str, configs: Sequence[str], path: Path, quick: bool) -> bool:
    """GPU allocation over time, the stored runs of `configs` on one plot; the large jobs' arrivals as
    dotted lines. False if no run of the workload is stored."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stored = {c: _series_path(name, c, quick) for c in configs if _series_path(name, c, quick).exists()}
    if not stored:
        return False
    figure, axes = plt.subplots(figsize=(10, 4.2))
    for config, series_path in stored.items():
        series = json.loads(series_path.read_text(encoding="utf-8"))
        hours = np.append(series["times"], series["end"]) / HOUR
        allocated = np.asarray(series["allocated"], dtype=float)
        share = 100.0 * np.append(allocated, allocated[-1:]) / series["capacity"]
        axes.step(hours, share, where="post", label=LABELS[config], color=COLOURS[config], linewidth=1.0)
    for arrival in workload.large_arrivals:
        axes.axvline(arrival / HOUR, color="grey", linewidth=0.6, linestyle=":")
    axes.axvline(workload.arrivals_end / HOUR, color="black", linewidth=0.8, linestyle="--")
    axes.set_xlabel("simulated hours (dotted: a large job arrives; dashed: the last arrival)")
    axes.set_ylabel("GPUs allocated (%)")
    axes.set_ylim(0, 105)
    axes.set_title(workload.title)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _series_path(workload: str, config: str, quick: bool) -> Path:
    return SERIES / f"backfill-{workload}-{config}{'-quick' if quick else ''}.json"


def _minutes(value: float | None) -> str:
    return "-" if value is None else f"{value / 60:,.1f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def table(workload_result: dict[str, Any]) -> str:
    """One workload's runs side by side (markdown)."""
    runs = workload_result["runs"]
    names = [name for name in CONFIGS if name in runs]
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("large jobs started", lambda r: f"{r['largeStarted']} of {r['largeJobs']}"),
        ("large-job wait, mean (min)", lambda r: _minutes(r["largeWaitSeconds"]["mean"])),
        ("large-job wait, p99 (min)", lambda r: _minutes(r["largeWaitSeconds"]["p99"])),
        ("small-job wait, mean (min)", lambda r: _minutes(r["smallWaitSeconds"]["mean"])),
        ("small-job wait, p99 (min)", lambda r: _minutes(r["smallWaitSeconds"]["p99"])),
        ("GPU allocation, arrival window", lambda r: _percent(r["gpuAllocationArrivals"])),
        ("GPU allocation, whole run", lambda r: _percent(r["gpuAllocationRun"])),
        ("jobs backfilled", lambda r: f"{r['backfilledJobs']:,}"),
        ("run ends at (h)", lambda r: f"{r['endSeconds'] / HOUR:.2f}"),
        ("cycles", lambda r: f"{r['cycles']:,}"),
        ("wall / CPU time (s)", lambda r: f"{r['wallSeconds']:.1f} / {r['cpuSeconds']:.1f}"),
        ("measured (code, load average)", _measured),
    ]
    header = "| | " + " | ".join(LABELS[n] for n in names) + " |"
    lines = [header, "|---|" + "---|" * len(names)]
    lines += [f"| {label} | " + " | ".join(cell(runs[n]) for n in names) + " |" for label, cell in rows]
    waits = [", ".join(_minutes(w["wait"]) for w in runs[n]["largeWaits"]) for n in names]
    lines.append("| each large job's wait (min) | " + " | ".join(waits) + " |")
    return "\n".join(lines)


def _measured(run_figures: dict[str, Any]) -> str:
    if "tree" not in run_figures:
        return "-"
    load = run_figures["machine"]["loadAverage"]
    return f"{run_figures['tree']['commit']}, {load[0] if load else '?'}"


FEATURE_CONFIGS = ("reservation", "reservation-no-consolidation")


def acceptance(result: dict[str, Any]) -> dict[str, Any]:
    """Issue #24's acceptance on the saturated workload, for each run with the feature against KAI's
    default: every gang starts, their mean wait is at most 1.5 x the longest small job, the time-weighted
    allocation drops by at most 3 points."""
    runs = result["runs"]
    if "default" not in runs:
        return {}
    return {name: _accepted(runs[name], runs["default"]) for name in FEATURE_CONFIGS if name in runs}


def _accepted(on: dict[str, Any], off: dict[str, Any]) -> dict[str, Any]:
    limit = 1.5 * SMALL_MINUTES[1] * 60
    mean = on["largeWaitSeconds"]["mean"]
    drop = {
        key: 100 * (off[key] - on[key])
        for key in ("gpuAllocationArrivals", "gpuAllocationRun")
        if off[key] is not None and on[key] is not None
    }
    return {
        "everyGangStarts": on["largeStarted"] == on["largeJobs"],
        "meanWaitSeconds": mean,
        "meanWaitLimitSeconds": limit,
        "meanWaitMet": mean is not None and mean <= limit,
        "allocationDropPoints": drop,
        "allocationMet": all(points <= 3.0 for points in drop.values()),
    }


def write_doc(results: dict[str, Any]) -> None:
    parts = []
    for name, result in results["workloads"].items():
        parts.append(f"**{result['title']}** (`{name}`)\n\n{table(result)}")
        for config, check in (result.get("acceptance") or {}).items():
            windows = {"gpuAllocationArrivals": "arrival window", "gpuAllocationRun": "whole run"}
            drop = ", ".join(f"{windows[k]} {v:+.1f}" for k, v in check["allocationDropPoints"].items())
            parts.append(
                f"Acceptance, {LABELS[config]}: every gang starts: "
                f"{'yes' if check['everyGangStarts'] else 'NO'}; mean gang wait "
                f"{_minutes(check['meanWaitSeconds'])} min against at most "
                f"{_minutes(check['meanWaitLimitSeconds'])}: {'met' if check['meanWaitMet'] else 'NOT met'}; "
                f"allocation drop in points ({drop}): {'met' if check['allocationMet'] else 'NOT met'}."
            )
    if results["quick"]:
        parts.append("(--quick: 3 hours of the saturated workload, the trace's first 4 hours.)")
    text = "\n\n".join(parts)
    doc = DOC.read_text(encoding="utf-8")
    start, end = doc.index(DOC_START), doc.index(DOC_END)
    DOC.write_text(doc[: start + len(DOC_START)] + "\n\n" + text + "\n\n" + doc[end:], encoding="utf-8")


def record(name: str, workload: Workload, config: str, figures_of: dict[str, Any], quick: bool) -> None:
    """Merge one run into results.json's `reservationBackfill.after` (`.quick` for --quick, so that a quick
    run leaves the full figures alone); the other runs stay, each with its own stamp, as runs are measured
    at different times on a shared machine."""
    results = bench_io.load().get(KEY, {}).get(_which(quick), {"quick": quick, "workloads": {}})
    entry = results["workloads"].setdefault(name, {"runs": {}})
    entry.update(title=workload.title, notes=workload.notes)
    stamp = bench_io.stamp(TREE)
    # The commit says which code ran; the path (a worktree, say) is this machine's business.
    stamp["tree"] = {"commit": stamp["tree"]["commit"]}
    entry["runs"][config] = {**stamp, **figures_of}
    if name == "saturated":
        entry["acceptance"] = acceptance(entry)
    bench_io.update(KEY, _which(quick), results)


def _plot_path(workload: str) -> Path:
    return DOC.with_name(f"reservation-and-backfill-{workload}.png")


def _which(quick: bool) -> str:
    return "quick" if quick else "after"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 hours of the saturated workload, 4 of the trace"
    )
    parser.add_argument(
        "--seed", type=int, default=SEED, help=f"the saturated workload's seed (default {SEED})"
    )
    parser.add_argument("--trace", type=Path, default=TRACE_WORKLOAD, help="the Pollux workload to replay")
    parser.add_argument("--workloads", default="saturated,trace", help="which workloads (comma-separated)")
    parser.add_argument(
        "--configs",
        default=",".join(DEFAULT_RUNS),
        help=f"which runs (comma-separated, default {','.join(DEFAULT_RUNS)}; of {', '.join(CONFIGS)})",
    )
    parser.add_argument(
        "--write-yaml", metavar="DIR", type=Path, help="write the saturated workload and exit"
    )
    parser.add_argument("--write-doc", action="store_true", help=f"put the stored tables into {DOC.name}")
    parser.add_argument("--no-record", action="store_true", help="store nothing (results.json, plots)")
    args = parser.parse_args(argv)
    if args.write_yaml:
        args.write_yaml.mkdir(parents=True, exist_ok=True)
        files = run.write_yaml(saturated(args.seed, 3 if args.quick else 7).docs, args.write_yaml)
        print(f"wrote {', '.join(str(f) for f in files)}")
        return 0
    builders: dict[str, Callable[[bool], Workload]] = {
        "saturated": lambda quick: saturated(args.seed, 3 if quick else 7),
        "trace": lambda quick: trace(args.trace, hours=4 if quick else None),
    }
    chosen = [w for w in args.workloads.split(",") if w]
    configs = [c for c in args.configs.split(",") if c]
    for name in (*chosen, *configs):
        if name not in builders and name not in CONFIGS:
            raise SystemExit(f"backfill.py: unknown workload or run {name!r}")
    if "trace" in chosen and not args.trace.exists():
        raise SystemExit(f"{args.trace}: not found (the trace is read from ../shared/traces)")
    for name in chosen:
        workload = builders[name](args.quick)
        entry: dict[str, Any] = {"runs": {}}
        for config_name in configs:
            print(f"{name}/{config_name} ...", file=sys.stderr, flush=True)
            figures_of, series = measure(workload, CONFIGS[config_name]())
            entry["runs"][config_name] = figures_of
            if not args.no_record:
                record(name, workload, config_name, figures_of, args.quick)
                SERIES.mkdir(exist_ok=True)
                _series_path(name, config_name, args.quick).write_text(json.dumps(series), encoding="utf-8")
        print(f"\n{workload.title}\n{table(entry)}\n", flush=True)
        if not args.no_record:
            plot(workload, name, PLOTTED, _plot_path(name), args.quick)
    if args.write_doc:
        stored = bench_io.load()[KEY][_which(args.quick)]
        for name in stored["workloads"]:  # the plots again, in case the drawing changed
            plot(
                builders[name](stored["quick"]),
                name,
                PLOTTED,
                _plot_path(name),
                args.quick,
            )
        write_doc(stored)
    return 0


if __name__ == "__main__":
    sys.exit(main())
