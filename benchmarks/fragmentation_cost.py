"""Issue #23's cost row for `gpufragmentation`: its first cycle at 5,000 nodes against KAI's default's.

    python benchmarks/fragmentation_cost.py                         # 3 rounds at 5,000 nodes, stored
    python benchmarks/fragmentation_cost.py --before ../base/src    # the plugin of another tree alongside
    python benchmarks/fragmentation_cost.py --nodes 2000 --rounds 5 --no-save

The workload is the scale benchmark's first cycle (`scale_workload.first_cycle`: an empty cluster and a
backlog of mixed shapes asking about half its GPUs). Each round simulates its first cycle once with KAI's
default configuration and once with examples/gpu-fragmentation-config.yaml (and with `--before`, once
more with that configuration on the other tree), each in a child process importing the tree under test,
one after the other, so that the shared host's swings fall on all of them alike. A run's figure is the
CPU time of the cycle (snapshot build and session, as `simulate` times it); the ratio is of the least
of each over the rounds (the issue's goal: at most 1.2). Each run's decisions are kept as a digest:
`--before` must give the same ones (the plugin's speed work changes no decision).

Stored under the key `fragmentationCost` of benchmarks/results.json, as `after` (with `--before`, that
tree's runs and ratio in it). Internally, `fragmentation_cost.py point POLICY NODES` is one run (it
prints its JSON).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import bench_io

NODES = 5_000
ROUNDS = 3
SEED = 20260108  # the scale benchmark's
GOAL_RATIO = 1.2
POLICIES = ("default", "gpufragmentation")


def point(policy: str, nodes: int, seed: int) -> dict[str, Any]:
    """One first cycle, in the child process (imports from the tree under test)."""
    import fgd_replay
    import run
    import scale_workload
    from instrument import START

    from kai_scheduler.framework.config import SchedulerConfig
    from kai_scheduler.sim import gc_policy
    from kai_scheduler.sim.engine import Simulation, SimulationOptions

    config = (
        SchedulerConfig() if policy == "default" else fgd_replay.read_config(fgd_replay.FRAGMENTATION_CONFIG)
    )
    docs = scale_workload.first_cycle(nodes, seed)
    with gc_policy.collector_paused():
        objects = run.to_objects(docs)
        del docs
        simulation = Simulation(objects, config, SimulationOptions(start=START, cycles=1))
        gc.freeze()
    cpu_started, started = time.process_time(), time.perf_counter()
    with gc_policy.fewer_collections():
        record = simulation.run().cycles[0]
    cpu, wall = time.process_time() - cpu_started, time.perf_counter() - started
    decisions = record.decisions
    digest = hashlib.sha256("\n".join(repr(d) for d in decisions).encode()).hexdigest()[:16]
    return {
        "policy": policy,
        "nodes": nodes,
        "cycleSeconds": record.seconds,
        "cpuSeconds": cpu,
        "wallSeconds": wall,
        "decisions": dict(Counter(d.type for d in decisions)),
        "digest": digest,
    }


def _child(tree: Path, policy: str, nodes: int, seed: int, work: Path) -> dict[str, Any]:
    out = work / f"{policy}-{nodes}.json"
    command = bench_io.python_command(str(Path(__file__)), "point", policy, str(nodes), "--seed", str(seed))
    child = bench_io.run_child(command, bench_io.child_env(tree), out, None)
    if child.returncode != 0:
        raise SystemExit(f"fragmentation_cost point {policy} {nodes} failed:\n{child.stderr[-2000:]}")
    measured: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return measured


def measure(nodes: int, rounds: int, seed: int, before: Path | None) -> dict[str, Any]:
    """Every round's runs, in turn; the least CPU of each and the ratios."""
    runs: dict[str, list[dict[str, Any]]] = {"default": [], "gpufragmentation": []}
    if before is not None:
        runs["gpufragmentationBefore"] = []
    with tempfile.TemporaryDirectory(prefix="kai-fragmentation-cost-") as work:
        for number in range(1, rounds + 1):
            for name in runs:
                tree = before if name == "gpufragmentationBefore" and before else bench_io.DEFAULT_TREE
                policy = "default" if name == "default" else "gpufragmentation"
                result = _child(tree, policy, nodes, seed, Path(work))
                runs[name].append(result)
                print(f"  round {number}, {name}: {result['cpuSeconds']:.2f} s of CPU", file=sys.stderr)
    least = {name: min(r["cpuSeconds"] for r in results) for name, results in runs.items()}
    entry: dict[str, Any] = {
        "nodes": nodes,
        "rounds": rounds,
        "seed": seed,
        "runs": runs,
        "leastCpuSeconds": least,
        "ratio": least["gpufragmentation"] / least["default"],
        "goalRatio": GOAL_RATIO,
    }
    if before is not None:
        entry["ratioBefore"] = least["gpufragmentationBefore"] / least["default"]
        digests = {name: {r["digest"] for r in results} for name, results in runs.items()}
        entry["sameDecisionsAsBefore"] = digests["gpufragmentation"] == digests["gpufragmentationBefore"]
    return entry


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["point"]:
        parser = argparse.ArgumentParser(prog="fragmentation_cost.py point")
        parser.add_argument("policy", choices=POLICIES)
        parser.add_argument("nodes", type=int)
        parser.add_argument("--seed", type=int, default=SEED)
        args = parser.parse_args(argv[1:])
        print(json.dumps(point(args.policy, args.nodes, args.seed)))
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=NODES)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--before", type=Path, help="another tree's src/: its plugin measured alongside")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.before is not None and not (args.before / "kai_scheduler").is_dir():
        raise SystemExit(f"--before: {args.before} holds no kai_scheduler package")
    entry = measure(args.nodes, args.rounds, args.seed, args.before)
    least = entry["leastCpuSeconds"]
    line = (
        f"first cycle at {args.nodes:,} nodes, least CPU of {args.rounds}: default {least['default']:.2f} s, "
        f"gpufragmentation {least['gpufragmentation']:.2f} s ({entry['ratio']:.2f}x; goal {GOAL_RATIO}x)"
    )
    if args.before is not None:
        line += (
            f"; before {least['gpufragmentationBefore']:.2f} s ({entry['ratioBefore']:.2f}x), "
            f"same decisions: {entry['sameDecisionsAsBefore']}"
        )
    print(line)
    if not args.no_save:
        bench_io.update("fragmentationCost", "after", {**bench_io.stamp(bench_io.DEFAULT_TREE), **entry})
    return 0


if __name__ == "__main__":
    sys.exit(main())
