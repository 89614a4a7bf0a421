"""Scale benchmarks of issue #8: first cycle, steady cycle, their growth with the cluster, the whole
`simulate` command on the steady input, and the openb trace replay.

    python benchmarks/scale.py                      # everything, against this checkout's src/
    python benchmarks/scale.py --quick              # up to 5,000 nodes, fewer steady cycles
    python benchmarks/scale.py --only openb,command # some of: scale, command, openb
    python benchmarks/scale.py --tree ../baseline/src       # the same against another tree: "before"
    python benchmarks/scale.py --only scale --sizes 5000 --kinds trickle   # one point; the rest stays
    python benchmarks/scale.py --only scale --kinds first --repeat 1       # each first-cycle point once

Each measurement runs in a child process that imports `kai_scheduler` from the tree under test
(`--tree`, default this checkout's `src/`) and uses only its public entry points: the API models,
`Simulation` / `SimulationOptions`, `SchedulerConfig`, and the `simulate` command. Results go to
`benchmarks/results.json` under the keys `scale`, `command` and `openb`, as `after` (or `before`: the
default when --tree names another tree than this checkout's). The scale points measured (`--sizes`,
`--kinds`) replace the same points stored; the others stay, each with the header of the run that
measured it. The workloads are in `scale_workload.py`
and `openb.py`; `report.py` turns results.json into docs/performance.md.

* scale: for each cluster size (500, 1,000, 2,000, 5,000, 10,000, 20,000 nodes), cycle 1 of the first-cycle
  workload (the simulator's own cycle time: snapshot build + session) and the pods it placed (bind +
  pipeline), the least of `--repeat` runs (default 5: a single run swings by up to a third with the
  host, and the least of three still by a tenth, as much as the growth row allows) made in rounds over
  the sizes; the same on the deep backlog (`deep`: asking 2.7
  times the cluster's GPUs, issue #23's first-cycle row); and the median cycle time of cycles 2..N of the
  steady workload. The 5,000-node point is issue #8's "first cycle" (goal >= 5,000 pods/s) and "steady
  cycle" (goal <= 0.5 s) rows. A point that does not finish within --budget seconds is recorded as not
  reached, and larger ones are not tried.
  And the steady cycle after a trickle of changes (`scale_trickle.py`, issue #23 point 1): the steady
  workload with one change before each of cycles 2..N (a pod that cannot fit arrives; a running pod
  completes and another arrives; a node is cordoned), each cycle's CPU and wall time, the median of
  cycles 2..N. Every point keeps a digest of its decisions (`decisionsDigest`, every cycle's): a change
  meant to change no decision leaves it the same.
* command: the 5,000-node steady workload (about 85,000 objects) written as YAML, then
  `kai-scheduler simulate DIR --cycles 3 --output json` as a process: its wall time, CPU time and peak
  memory.
* command20k: the same at 20,000 nodes with 10,000 pending pods (issue #23's row: 280,000 running
  pods; about 310,000 objects, 124 MiB of YAML). With
  `--yaml-dir DIR` the YAML is written once to DIR (outside the repository, e.g. under /tmp) and read from
  there by later runs, before and after alike.
* openb: the openb trace as manifests, then `kai-scheduler simulate DIR --cycles 1 --output json`:
  wall time, peak memory, pods placed and GPUs allocated.

Internally, `scale.py point first|steady|trickle NODES` is one measurement (it prints its JSON).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_io
from bench_io import ChildRun

SEED = 20260108
SIZES = (500, 1_000, 2_000, 5_000, 10_000, 20_000)  # 20,000: issue #23's growth row
QUICK_SIZES = (500, 1_000, 2_000, 5_000)
ROW_NODES = 5_000  # the first-cycle and steady-cycle rows
SCALE_KINDS = ("first", "deep", "steady", "trickle")
# The first-cycle kinds: `first` on `scale_workload.first_cycle` (the growth rows since issue #8), `deep` on
# `first_cycle_deep` (issue #23's first-cycle row: a backlog asking 2.7 times the cluster's GPUs).
FIRST_CYCLE_KINDS = ("first", "deep")
TRICKLE_CYCLES = 7  # the first, then two of each change (`scale_trickle.CHANGES`)
LARGE_COMMAND_NODES = 20_000  # issue #23's whole-command row
GOALS = {
    "firstCyclePodsPerSecond": 5_000.0,
    "steadyCycleSeconds": 0.5,
    # Issue #23: a cycle costs what changed, so after one change no more than its steady goal at 5,000 nodes.
    "changedCycleSeconds": 0.03,
    "commandSeconds": 20.0,
    "commandMaxRssBytes": 2 * 2**30,
    "openbSeconds": 5.0,
    "command20kSeconds": 30.0,
    "command20kMaxRssBytes": 3 * 2**30,
}


# --- one measurement, in the child ---------------------------------------------------------------


def point(kind: str, nodes: int, cycles: int, seed: int) -> dict[str, Any]:
    """Build the workload, simulate `cycles` cycles in memory, time them (runs in the child process)."""
    import resource

    import run
    import scale_trickle

    if kind == "trickle":
        trickle = scale_trickle.measure(nodes, seed, cycles)
        trickle["maxRssBytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return trickle
    import scale_workload
    from instrument import START

    from kai_scheduler.framework.config import SchedulerConfig
    from kai_scheduler.sim.engine import Simulation, SimulationOptions

    started = time.perf_counter()
    workloads = {
        "first": scale_workload.first_cycle,
        "deep": scale_workload.first_cycle_deep,
        "steady": scale_workload.steady,
    }
    docs = workloads[kind](nodes, seed)
    kinds = Counter(doc["kind"] for doc in docs)
    pending = sum(1 for d in docs if d["kind"] == "Pod" and d["status"]["phase"] == "Pending")
    generated = time.perf_counter()
    # The garbage-collector policy of `simulate` (when the tree has one), so that the cycles are timed as
    # the command runs them.
    policy = _gc_policy()
    with policy.collector_paused():
        objects = run.to_objects(docs)
        del docs
        validated = time.perf_counter()
        simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=cycles))
        gc.freeze()
    set_up = time.perf_counter()
    cpu_started = time.process_time()
    with policy.fewer_collections():
        result = simulation.run()
    ran = time.perf_counter()
    cpu = time.process_time() - cpu_started
    seconds = [record.seconds for record in result.cycles]
    decisions = [dict(Counter(d.type for d in record.decisions)) for record in result.cycles]
    # Every decision of every cycle, as text, hashed: a change that should change no decision leaves it.
    digest = hashlib.sha256("\n".join(repr(d) for r in result.cycles for d in r.decisions).encode())
    placed = decisions[0].get("bind", 0) + decisions[0].get("pipeline", 0)
    report: dict[str, Any] = {
        "kind": kind,
        "nodes": nodes,
        "objects": dict(kinds),
        "pendingPods": pending,
        "runningPods": kinds["Pod"] - pending,
        "generateSeconds": generated - started,
        "validateSeconds": validated - generated,
        "setupSeconds": set_up - validated,
        "runSeconds": ran - set_up,
        # CPU seconds of the run / its wall seconds: below 1 when other processes took the CPU from it.
        "runCpuSeconds": cpu,
        "cpuShare": cpu / (ran - set_up),
        "cycleSeconds": seconds,
        "decisionsPerCycle": decisions,
        "decisionsDigest": digest.hexdigest()[:16],
        "maxRssBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if kind in FIRST_CYCLE_KINDS:
        report.update(
            seconds=seconds[0],
            placed=placed,
            podsPerSecond=placed / seconds[0] if seconds[0] > 0 else None,
            microsecondsPerPodPlaced=seconds[0] / placed * 1e6 if placed else None,
        )
    else:
        later = seconds[1:]
        report.update(
            medianSeconds=statistics.median(later) if later else None,
            minSeconds=min(later) if later else None,
            maxSeconds=max(later) if later else None,
            decisionsAfterFirst=sum(sum(d.values()) for d in decisions[1:]),
        )
    return report


def _gc_policy() -> Any:
    """`kai_scheduler.sim.gc_policy`, or a stand-in that changes nothing for trees without it."""
    try:
        from kai_scheduler.sim import gc_policy
    except ImportError:
        import contextlib
        import types

        return types.SimpleNamespace(
            collector_paused=contextlib.nullcontext, fewer_collections=contextlib.nullcontext
        )
    return gc_policy


# --- the benchmarks, in the parent ------------------------------------------------------------------


def _child_point(
    tree: Path, kind: str, nodes: int, cycles: int, seed: int, budget: float, work: Path
) -> dict[str, Any]:
    out = work / f"{kind}-{nodes}.json"
    command = bench_io.python_command(
        str(Path(__file__)), "point", kind, str(nodes), "--cycles", str(cycles), "--seed", str(seed)
    )
    child = bench_io.run_child(command, bench_io.child_env(tree), out, budget or None)
    if child.timed_out:
        return {"nodes": nodes, "reached": False, "budgetSeconds": budget}
    if child.returncode != 0:
        raise SystemExit(f"point {kind} {nodes} failed:\n{child.stderr[-2000:]}")
    measured: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    measured.update(reached=True, processSeconds=child.seconds, loadAverageAfter=_load())
    return measured


def bench_scale(args: argparse.Namespace, tree: Path, work: Path) -> dict[str, Any]:
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    cycles = args.steady_cycles or (3 if args.quick else 5)
    first_kinds = [kind for kind in FIRST_CYCLE_KINDS if kind in args.kinds]

    def first_run(kind: str, nodes: int) -> dict[str, Any]:
        say(f"scale: {kind} cycle, {nodes:,} nodes ...")
        return _child_point(tree, kind, nodes, 1, args.seed, args.budget, work)

    firsts = first_cycle_rounds(first_kinds, sizes, args.repeat, first_run)
    points: list[dict[str, Any]] = []
    gave_up: set[str] = set()  # kinds that ran out of budget: larger clusters are not tried
    for nodes in sizes:
        entry: dict[str, Any] = {"nodes": nodes}
        for kind in first_kinds:
            entry[kind] = firsts[kind, nodes]
            say("  " + _point_line(entry[kind]))
        trickle = 4 if args.quick else TRICKLE_CYCLES
        for kind, kind_cycles in (("steady", cycles), ("trickle", trickle)):
            if kind not in args.kinds:
                continue
            if kind in gave_up:
                entry[kind] = {"nodes": nodes, "reached": False, "skipped": True}
                continue
            say(f"scale: {kind} cycle, {nodes:,} nodes ...")
            entry[kind] = _child_point(tree, kind, nodes, kind_cycles, args.seed, args.budget, work)
            if not entry[kind]["reached"]:
                gave_up.add(kind)
            say("  " + _point_line(entry[kind]))
        points.append(entry)
    return {"seed": args.seed, "steadyCycles": cycles, "budgetSeconds": args.budget, "points": points}


def first_cycle_rounds(
    kinds: Sequence[str],
    sizes: Sequence[int],
    repeat: int,
    run_point: Callable[[str, int], dict[str, Any]],
) -> dict[tuple[str, int], dict[str, Any]]:
    """Each (kind, size)'s first-cycle point: the least of `repeat` runs (`least_cpu`), made in rounds over
    every size and kind (each once, then each again) rather than one point's runs back to back. Why: the
    host's speed swings over minutes, and the growth row compares sizes (largest CPU per pod over the
    least); runs back to back would give each size the swing of its own minute, rounds spread every
    size's runs over the whole pass alike. A run that does not finish within the budget makes its point
    not reached; it and the kind's larger sizes are not run again (a point never tried is recorded as
    not reached, `skipped`)."""
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {(k, n): [] for k in kinds for n in sizes}
    tried = {kind: list(sizes) for kind in kinds}
    for _ in range(repeat):
        for nodes in sizes:
            for kind in kinds:
                if nodes not in tried[kind]:
                    continue
                run = run_point(kind, nodes)
                runs[kind, nodes].append(run)
                if not run["reached"]:
                    tried[kind] = [size for size in tried[kind] if size < nodes]
    return {
        point: least_cpu(measured) if measured else {"nodes": point[1], "reached": False, "skipped": True}
        for point, measured in runs.items()
    }


def least_cpu(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of a first-cycle point (or of any kind run once) that took the least CPU, its cycle's wall
    seconds times its CPU share, with every run's cycle seconds (`runSeconds`): a single run at 10,000 or
    20,000 nodes swings a fifth with the host, more than the growth the point measures. A run that did not
    finish within the budget makes the point not reached."""
    if len(runs) == 1 or not all(run["reached"] for run in runs):
        return next((run for run in runs if not run["reached"]), runs[0])
    least = min(runs, key=lambda run: run["seconds"] * run["cpuShare"])
    return {**least, "repeats": len(runs), "runSeconds": [run["seconds"] for run in runs]}


def merge_points(stored: dict[str, Any] | None, measured: dict[str, Any]) -> dict[str, Any]:
    """The scale result to store: `measured`'s points replace the same (size, kind) points of `stored`,
    the others stay, so that measuring some sizes or kinds does not drop the rest of the growth rows.
    Every point carries the header of the run that measured it (`measured`); the result's own header
    and settings (what report.py's provenance table shows) stay the stored run's, which measured most."""
    header = _stamp(measured)
    by_nodes: dict[int, dict[str, Any]] = {}
    for entry in (stored or {}).get("points", []):
        by_nodes[entry["nodes"]] = {
            kind: value if kind == "nodes" or "measured" in value else {**value, "measured": _stamp(stored)}
            for kind, value in entry.items()
        }
    for entry in measured["points"]:
        kept = by_nodes.setdefault(entry["nodes"], {"nodes": entry["nodes"]})
        kept.update({kind: {**value, "measured": header} for kind, value in entry.items() if kind != "nodes"})
    return {**measured, **(stored or {}), "points": [by_nodes[nodes] for nodes in sorted(by_nodes)]}


def _stamp(result: dict[str, Any] | None) -> dict[str, Any]:
    return {key: value for key, value in (result or {}).items() if key in ("timestamp", "tree")}


def _point_line(p: dict[str, Any]) -> str:
    if not p["reached"]:
        return "not reached (budget)" if not p.get("skipped") else "skipped"
    if p["kind"] in FIRST_CYCLE_KINDS:
        return (
            f"{p['kind']}: {p['placed']:,} placed in {p['seconds']:.2f} s: {p['podsPerSecond']:,.0f} pods/s"
            f" (decisions {p.get('decisionsDigest', '?')})"
        )
    if p["kind"] == "trickle":
        cycles = " ".join(
            f"{change} {cpu:.2f}" for change, cpu in zip(p["changes"], p["cycleCpuSeconds"][1:], strict=True)
        )
        return f"cycles after a change, s of CPU: {cycles}; median {p['medianCpuSeconds']:.3f}"
    return (
        f"steady cycles {' '.join(f'{s:.2f}' for s in p['cycleSeconds'])} s, median {p['medianSeconds']:.3f}"
    )


def _simulate_command(
    tree: Path, folder: Path, cycles: int, budget: float, work: Path
) -> tuple[ChildRun, Path]:
    out = work / f"{folder.name}-out.json"
    command = bench_io.python_command(
        "-m", "kai_scheduler", "simulate", str(folder), "--cycles", str(cycles), "--output", "json"
    )
    child = bench_io.run_child(command, bench_io.child_env(tree), out, budget or None)
    if child.returncode not in (0, None):
        raise SystemExit(f"simulate {folder} failed:\n{child.stderr[-2000:]}")
    return child, out


def _yaml_folder(docs: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    import run

    started = time.perf_counter()
    files = run.write_yaml(docs, folder)
    return {
        "objects": len(docs),
        "yamlBytes": sum(f.stat().st_size for f in files),
        "writeSeconds": time.perf_counter() - started,
    }


def bench_command(args: argparse.Namespace, tree: Path, work: Path) -> dict[str, Any]:
    return _steady_command(args, tree, work, ROW_NODES, None, "command")


def bench_command_20k(args: argparse.Namespace, tree: Path, work: Path) -> dict[str, Any]:
    import scale_workload

    pending = scale_workload.LARGE_STEADY_PENDING
    return _steady_command(args, tree, work, LARGE_COMMAND_NODES, pending, "command20k")


def _steady_command(
    args: argparse.Namespace, tree: Path, work: Path, nodes: int, pending: int | None, name: str
) -> dict[str, Any]:
    folder, written = _steady_yaml(args, work, nodes, pending, name)
    say(f"{name}: kai-scheduler simulate ({written['objects']:,} objects) --cycles 3 --output json ...")
    child, out = _simulate_command(tree, folder, 3, args.budget, work)
    report = {"nodes": nodes, "seed": args.seed, "cycles": 3, **written, **_child_figures(child)}
    if not child.timed_out:
        document = json.loads(out.read_text(encoding="utf-8"))
        report.update(cycleSeconds=document["cycleSeconds"], outputBytes=out.stat().st_size)
    say(f"  {_command_line(report)}")
    return report


def _steady_yaml(
    args: argparse.Namespace, work: Path, nodes: int, pending: int | None, name: str
) -> tuple[Path, dict[str, Any]]:
    """The steady workload of `nodes` (with `pending` pending pods, or the workload's count per node) as
    YAML: written to the work folder, or with --yaml-dir kept there (with what was written:
    `written.json`) and read back by later runs."""
    import scale_workload

    if args.yaml_dir is None:
        say(f"{name}: writing the {nodes:,}-node steady workload as YAML ...")
        folder = work / "steady"
        return folder, _yaml_folder(scale_workload.steady(nodes, args.seed, pending), folder)
    pending_part = "" if pending is None else f"-pending{pending}"
    folder = args.yaml_dir / f"steady-{nodes}{pending_part}-{args.seed}"
    record = folder / "written.json"
    if record.exists():
        say(f"{name}: the {nodes:,}-node steady workload as written before, in {folder}")
        kept: dict[str, Any] = json.loads(record.read_text(encoding="utf-8"))
        return folder, kept
    say(f"{name}: writing the {nodes:,}-node steady workload as YAML to {folder} ...")
    written = _yaml_folder(scale_workload.steady(nodes, args.seed, pending), folder)
    record.write_text(json.dumps(written), encoding="utf-8")
    return folder, written


def bench_openb(args: argparse.Namespace, tree: Path, work: Path) -> dict[str, Any]:
    import openb

    traces = Path(args.traces)
    docs = openb.manifests(traces)
    folder = work / "openb"
    written = _yaml_folder(docs, folder)
    say(f"openb: kai-scheduler simulate ({written['objects']:,} objects) --cycles 1 --output json ...")
    child, out = _simulate_command(tree, folder, 1, args.budget, work)
    report = {"cycles": 1, "trace": openb.describe(docs, traces), **written, **_child_figures(child)}
    if not child.timed_out:
        document = json.loads(out.read_text(encoding="utf-8"))
        kinds = Counter(d["type"] for d in document["decisions"] if d["cycle"] == 1)
        gpu = document["summary"]["gpu"]
        report.update(
            cycleSeconds=document["cycleSeconds"],
            placed=kinds.get("bind", 0) + kinds.get("pipeline", 0),
            podsByPhase=document["summary"]["pods"],
            gpuAllocated=gpu["allocated"],
            gpuCapacity=gpu["capacity"],
            gpuAllocation=gpu["allocated"] / gpu["capacity"] if gpu["capacity"] else None,
        )
    say(f"  {_command_line(report)}")
    return report


def _child_figures(child: ChildRun) -> dict[str, Any]:
    return {
        "reached": not child.timed_out,
        "seconds": child.seconds,
        "maxRssBytes": child.max_rss_bytes,
        "cpuSeconds": child.cpu_seconds,
        "loadAverageAfter": _load(),
    }


def _load() -> list[float]:
    """The load average (1, 5, 15 minutes) now: how much other work shared the CPUs during a run."""
    return [round(x, 2) for x in os.getloadavg()]


def _command_line(r: dict[str, Any]) -> str:
    if not r["reached"]:
        return f"not finished within the budget ({r['seconds']:.0f} s)"
    line = (
        f"{r['seconds']:.2f} s wall, {r['cpuSeconds']:.2f} s CPU, peak RSS {r['maxRssBytes'] / 2**30:.2f} GiB"
    )
    if "placed" in r:
        line += f", {r['placed']:,} pods placed, GPU allocation {r['gpuAllocation']:.1%}"
    return line


def say(text: str) -> None:
    print(text, flush=True)


BENCHMARKS = {
    "scale": bench_scale,
    "command": bench_command,
    "command20k": bench_command_20k,
    "openb": bench_openb,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["point"]:
        parser = argparse.ArgumentParser(prog="scale.py point")
        parser.add_argument("kind", choices=SCALE_KINDS)
        parser.add_argument("nodes", type=int)
        parser.add_argument("--cycles", type=int, default=1)
        parser.add_argument("--seed", type=int, default=SEED)
        args = parser.parse_args(argv[1:])
        print(json.dumps(point(args.kind, args.nodes, args.cycles, args.seed)))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, default=bench_io.DEFAULT_TREE, help="the src folder to measure")
    parser.add_argument(
        "--as",
        dest="which",
        choices=("after", "before"),
        help="results.json sub-key (default: before if --tree)",
    )
    parser.add_argument(
        "--only", default=",".join(BENCHMARKS), help="comma-separated: scale,command,command20k,openb"
    )
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, 3 steady cycles")
    parser.add_argument("--sizes", type=lambda s: tuple(int(x) for x in s.split(",")), help="node counts")
    parser.add_argument(
        "--kinds",
        type=lambda s: tuple(k.strip() for k in s.split(",") if k.strip()),
        default=SCALE_KINDS,
        help="scale points to measure (default: all of first,deep,steady,trickle); others stored stay",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="runs of each first-cycle point; the least CPU is kept (default 5)",
    )
    parser.add_argument("--steady-cycles", type=int, help="cycles of the steady runs (default 5; quick 3)")
    parser.add_argument("--budget", type=float, default=600.0, help="wall seconds per measurement (0: none)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--traces", default=str(bench_io.TRACES), help="shared traces")
    parser.add_argument("--no-save", action="store_true", help="print only; leave results.json alone")
    parser.add_argument(
        "--yaml-dir", type=Path, help="keep the commands' YAML here and reuse it (outside the repository)"
    )
    args = parser.parse_args(argv)
    tree = args.tree.resolve()
    which = args.which or ("after" if tree == bench_io.DEFAULT_TREE.resolve() else "before")
    selected = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(selected) - set(BENCHMARKS)
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {', '.join(sorted(unknown))}")
    if not args.kinds or set(args.kinds) - set(SCALE_KINDS):
        parser.error(f"--kinds: some of {','.join(SCALE_KINDS)}, not {','.join(args.kinds) or 'none'}")
    say(f"measuring {tree} as '{which}'")
    for name in selected:
        work = Path(tempfile.mkdtemp(prefix=f"kai-bench-{name}-"))
        try:
            header = bench_io.stamp(tree)
            header["quick"] = args.quick
            result = {**header, **BENCHMARKS[name](args, tree, work)}
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if not args.no_save:
            if name == "scale":
                result = merge_points(bench_io.load().get("scale", {}).get(which), result)
            bench_io.update(name, which, result)
    if not args.no_save:
        say(f"wrote {bench_io.RESULTS_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
