"""Issue #12's trace acceptance: the whole openb trace, imported with its real times, replayed to a report.

    python benchmarks/trace_replay.py                 # measure, store under `traceReplay`, print the table
    python benchmarks/trace_replay.py --write-doc     # ... and put the table into docs/traces.md
    python benchmarks/trace_replay.py --window 10d:11d --record ''   # a slice, not stored

Two child processes that import `kai_scheduler` from the tree under test (`--tree`, default this
checkout's `src/`), as a user runs them:

1. `kai-scheduler trace import openb ../shared/traces/.../openb_pod_list_default.csv -o DIR/openb.yaml`
   (the trace is read from `../shared/traces`, never copied into the repository);
2. `kai-scheduler simulate DIR/openb.yaml --max-cycles 1000000 --output json --out DIR/result.json
   --report DIR/report`: every arrival and completion of the trace's 149 days, until nothing is left.

Recorded: both children's wall and CPU time and peak memory, the run's cycles and simulated time, and
the report's summary.json numbers (allocation, waits, completion times, evictions, fairness). The goal
is the issue's: the replay (import + simulate with the report) in under five minutes. Results go to
`benchmarks/results.json` under `traceReplay` (`after`, or `--record before` for another tree).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_io

POD_LIST = bench_io.TRACES / "cluster-trace-gpu-v2023" / "csv" / "openb_pod_list_default.csv"
GOAL_SECONDS = 300.0
DOC = bench_io.REPO / "docs" / "traces.md"
DOC_START = "<!-- trace-replay:start (benchmarks/trace_replay.py --write-doc) -->"
DOC_END = "<!-- trace-replay:end -->"


def measure(tree: Path, work: Path, pods: Path, window: str | None) -> dict[str, Any]:
    stamp = bench_io.stamp(tree)  # the load average before the run
    env = bench_io.child_env(tree)
    manifests = work / "openb.yaml"
    command = ["-m", "kai_scheduler", "trace", "import", "openb", str(pods), "-o", str(manifests)]
    imported = _run(bench_io.python_command(*command, *(["--window", window] if window else [])), env, work)
    result, report = work / "result.json", work / "report"
    simulate = ["-m", "kai_scheduler", "simulate", str(manifests), "--max-cycles", "1000000"]
    simulated = _run(
        bench_io.python_command(*simulate, "--output", "json", "--out", str(result), "--report", str(report)),
        env,
        work,
    )
    document = json.loads(result.read_text(encoding="utf-8"))
    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    total = imported.seconds + simulated.seconds
    return {
        **stamp,
        "input": {
            "pods": bench_io.shown_path(pods),
            "window": window,
            # Without the temporary folder it wrote to, which is of no use once the run is over.
            "importMessage": imported.stderr.strip().replace(str(work), "DIR"),
        },
        "importSeconds": imported.seconds,
        "importCpuSeconds": imported.cpu_seconds,
        "simulateSeconds": simulated.seconds,
        "simulateCpuSeconds": simulated.cpu_seconds,
        "simulateMaxRssBytes": simulated.max_rss_bytes,
        "totalSeconds": total,
        "totalCpuSeconds": imported.cpu_seconds + simulated.cpu_seconds,
        "goalSeconds": GOAL_SECONDS,
        "meetsGoal": total < GOAL_SECONDS,
        "cycles": document["summary"]["cycles"],
        "cycleSecondsTotal": sum(document["cycleSeconds"]),
        "simulatedSeconds": document["summary"]["time"],
        "steady": document["summary"]["steady"],
        "pods": document["summary"]["pods"],
        "summary": {key: summary[key] for key in SUMMARY_KEYS if key in summary},
        "loadAverageAfter": bench_io.machine()["loadAverage"],
    }


SUMMARY_KEYS = (
    "time",
    "gpuCapacity",
    "gpuAllocationRatio",
    "waitSeconds",
    "jctSeconds",
    "podGroups",
    "evictions",
    "gpuHoursLostToPreemption",
    "jainFairness",
    "fragmentedGpus",
)


def _run(command: list[str], env: dict[str, str], work: Path) -> bench_io.ChildRun:
    run = bench_io.run_child(command, env, work / "stdout.txt", timeout=None)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command[1:])}: exit {run.returncode}: {run.stderr.strip()[-2000:]}")
    return run


def table(result: dict[str, Any]) -> str:
    """The summary table (markdown), as docs/traces.md shows it."""
    s = result["summary"]

    def dist(key: str) -> str:
        d = s[key]
        values = (d.get("mean"), d.get("p50"), d.get("p99"))
        return " / ".join("-" if v is None else f"{v:,.0f}" for v in values) + f" ({d['count']:,} groups)"

    load = result["machine"]["loadAverage"]
    rows = [
        (
            "input",
            f"`{Path(result['input']['pods']).name}`"
            + (f" `--window {w}`" if (w := result["input"]["window"]) else ""),
        ),
        ("pods (end state)", ", ".join(f"{n:,} {phase}" for phase, n in result["pods"].items() if n)),
        (
            "simulated time",
            f"{result['simulatedSeconds']:,.0f} s ({result['simulatedSeconds'] / 86400:.1f} days)",
        ),
        ("cycles", f"{result['cycles']:,} (their sessions: {result['cycleSecondsTotal']:,.1f} s wall)"),
        (
            "gpuAllocationRatio (time-weighted)",
            f"{s['gpuAllocationRatio']:.4f} of {s['gpuCapacity']:,.0f} GPUs",
        ),
        ("waitSeconds mean / p50 / p99", dist("waitSeconds")),
        ("jctSeconds mean / p50 / p99", dist("jctSeconds")),
        ("evictions", f"{s['evictions']:,} ({s['gpuHoursLostToPreemption']:,.1f} GPU-hours lost)"),
        ("jainFairness", "-" if s["jainFairness"] is None else f"{s['jainFairness']:.4f}"),
        ("import (wall / CPU)", f"{result['importSeconds']:.1f} s / {result['importCpuSeconds']:.1f} s"),
        (
            "simulate with --report (wall / CPU)",
            f"{result['simulateSeconds']:.1f} s / {result['simulateCpuSeconds']:.1f} s, "
            f"peak {result['simulateMaxRssBytes'] / 2**20:,.0f} MiB",
        ),
        (
            "total wall time (goal < 300 s)",
            f"**{result['totalSeconds']:.1f} s** ({'meets' if result['meetsGoal'] else 'misses'} the goal)",
        ),
        (
            "machine",
            f"{result['machine']['cpus']} CPUs, load average {load[0]} before, "
            f"{result['loadAverageAfter'][0]} after; code {result['tree']['commit']}, {result['timestamp']}",
        ),
    ]
    lines = ["| figure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    start, end = doc.index(DOC_START), doc.index(DOC_END)
    DOC.write_text(doc[: start + len(DOC_START)] + "\n\n" + text + "\n\n" + doc[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tree", type=Path, default=bench_io.DEFAULT_TREE, help="the src folder to measure")
    parser.add_argument("--pods", type=Path, default=POD_LIST, help="the openb pod list")
    parser.add_argument("--window", help="import only this slice (trace import's --window)")
    parser.add_argument(
        "--record", default="after", help="results.json key under traceReplay (after, before; '': not stored)"
    )
    parser.add_argument("--write-doc", action="store_true", help="put the table into docs/traces.md")
    parser.add_argument("--keep", type=Path, help="keep the manifests, result and report in this folder")
    args = parser.parse_args(argv)
    if not args.pods.exists():
        raise SystemExit(f"{args.pods}: not found (the openb trace is read from ../shared/traces)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="trace-replay-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(args.tree.resolve(), work, args.pods, args.window)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.record:
        bench_io.update("traceReplay", args.record, result)
    text = table(result)
    print(text)
    if args.write_doc:
        write_doc(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
