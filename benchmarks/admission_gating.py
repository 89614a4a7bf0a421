"""Queue admission gating benchmark (issue #25 section 2; the validation scenario of KAI's design
`queue-admission-gating`): a queue with a large backlog parked over its quota, with and without the gate.

`make bench` runs this file. It builds, in memory and deterministically:

* --nodes (500) nodes x 8 GPUs, cpu 128, memory 1Ti (`run.node_doc`);
* one queue `team` (opted in with `spec.admissionGating`) with a GPU quota and limit of --limit (1,000)
  GPUs, which its running pods fill: --limit one-GPU pods bound with `spec.nodeName`, the first --cycles of
  them finishing one per second from t=1 s (so each cycle after the first has one change to act on: one
  GPU of quota frees);
* --backlog (50,000) pending one-GPU pods of `team`, bare pods (a pod group each), preemptible
  (`train`): over the queue's limit, so none may run until quota frees, one at a time.

The same workload is simulated twice for --cycles (8) cycles, period 1 s: with the default configuration
(the backlog waits `Unschedulable` / `OverLimit`) and with `queueAdmissionGating: {enabled: true}` (the
simulator gates the backlog at creation as the webhook would, and `ungate` admits one pod per freed GPU).
For each it reports:

* the first cycle and the median of cycles 2..N, CPU (time.process_time around the cycle and its effects)
  and wall (the simulator's own snapshot-to-decisions seconds);
* the API writes live mode would make, counted from each cycle's decisions by its rules (`loop.py`): a
  pod's `PodScheduled=False` condition and its Warning event when its (reason, message) is new; a
  PodGroup's scheduling condition and its Warning event when its reason is new; a BindRequest per bind;
  with gating, a pod patch per pod ungated and an `Admitted` event per pod group.

Results: a table, and `benchmarks/results/admission_gating.json`.

Usage:

    .venv/bin/python benchmarks/admission_gating.py                     # what `make bench` runs
    .venv/bin/python benchmarks/admission_gating.py --backlog 5000      # smaller
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.sim.engine import CycleRecord, Simulation, SimulationOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
import instrument  # options and report plumbing
import run  # the sibling benchmark: node and pod documents, models

OUT = Path(__file__).resolve().parent / "results" / "admission_gating.json"
QUEUE = "team"


def workload(nodes: int, limit: int, backlog: int, finishing: int) -> list[dict[str, Any]]:
    docs = [run.node_doc(i, {}) for i in range(nodes)]
    queue = run.queue_doc(QUEUE, limit, limit)
    queue["spec"]["admissionGating"] = True
    docs.append(queue)
    for i in range(limit):
        pod = run._pod(f"running-{i:05d}", QUEUE, "train", run._container(1, 1, 4))
        pod["spec"]["nodeName"] = f"node-{i // run.GPUS_PER_NODE:04d}"
        pod["status"] = {"phase": "Running"}
        if i < finishing:
            pod["metadata"]["annotations"] = {"simulation.kai.scheduler/duration": str(i + 1)}
        docs.append(pod)
    for i in range(backlog):
        docs.append(run._pod(f"waiting-{i:05d}", QUEUE, "train", run._container(1, 1, 4)))
    return docs


class WriteCounter:
    """The API writes live mode makes for a cycle's result, by its rules (see the module doc)."""

    def __init__(self, pending_pods: Mapping[str, list[str]]) -> None:
        self.pending_pods = pending_pods  # job -> its pods (bare pods here: one each)
        self.pod_said: dict[str, str] = {}
        self.group_said: dict[str, str] = {}
        self.ungated: set[str] = set()
        self.placed: set[str] = set()

    def count(self, result: SessionResult, gating: bool) -> int:
        writes = 0
        for decision in result.decisions:
            if decision.type == "bind":
                writes += 1
                self.placed.add(decision.pod)
        for ungating in result.ungates:
            writes += len(ungating.pods) + 1  # the patches, one Admitted event
            self.ungated.update(ungating.pods)
        for job, reason in result.unschedulable.items():
            if self.group_said.get(job) != reason:
                self.group_said[job] = reason
                writes += 2  # the PodGroup's condition and its Warning event
            for pod in self.pending_pods.get(job, ()):
                gated = gating and pod not in self.ungated
                if gated or pod in self.placed or self.pod_said.get(pod) == reason:
                    continue
                self.pod_said[pod] = reason
                writes += 2  # PodScheduled=False and its Warning event
        return writes


def measure(docs: list[dict[str, Any]], config: SchedulerConfig, cycles: int) -> dict[str, Any]:
    objects = run.to_objects(docs)
    pending = {
        f"{d['metadata']['namespace']}/pg-{d['metadata']['name']}": [
            f"{d['metadata']['namespace']}/{d['metadata']['name']}"
        ]
        for d in docs
        if d["kind"] == "Pod" and not d["spec"].get("nodeName")
    }
    gating = config.admission_gating.enabled
    counter = WriteCounter(pending)
    cpu: list[float] = []
    writes: list[int] = []
    ungated: list[int] = []
    mark = [time.process_time()]

    def observe(record: CycleRecord, result: SessionResult) -> None:
        now = time.process_time()
        cpu.append(now - mark[0])
        writes.append(counter.count(result, gating))
        ungated.append(sum(len(u.pods) for u in result.ungates))
        mark[0] = time.process_time()

    options = SimulationOptions(start=datetime(2026, 1, 1, tzinfo=UTC), cycles=cycles)
    simulation = Simulation(objects, config, options)
    simulation.observers.append(observe)
    mark[0] = time.process_time()
    result = simulation.run()
    wall = [record.seconds for record in result.cycles]
    binds = sum(1 for record in result.cycles for d in record.decisions if d.type == "bind")
    return {
        "firstCycleCpuSeconds": cpu[0],
        "firstCycleWallSeconds": wall[0],
        "laterCycleCpuSeconds": statistics.median(cpu[1:]) if len(cpu) > 1 else None,
        "laterCycleWallSeconds": statistics.median(wall[1:]) if len(wall) > 1 else None,
        "cycleCpuSeconds": cpu,
        "cycleWallSeconds": wall,
        "writesFirstCycle": writes[0],
        "writesLaterCycles": sum(writes[1:]),
        "writesPerCycle": writes,
        "ungatedPerCycle": ungated,
        "binds": binds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--limit", type=int, default=1000, help="the queue's GPU quota and limit")
    parser.add_argument("--backlog", type=int, default=50_000, help="pending pods over the queue's limit")
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    console = Console()
    docs = workload(args.nodes, args.limit, args.backlog, args.cycles)
    report: dict[str, Any] = {
        "machine": instrument.machine(),
        "workload": {
            "nodes": args.nodes,
            "limit": args.limit,
            "backlog": args.backlog,
            "cycles": args.cycles,
        },
    }
    report["ungated"] = measure(docs, SchedulerConfig(), args.cycles)
    report["gated"] = measure(docs, parse_config({"queueAdmissionGating": {"enabled": True}}), args.cycles)
    rows: dict[str, tuple[str, Callable[[Any], str]]] = {
        "first cycle, CPU": ("firstCycleCpuSeconds", instrument.fmt_s),
        "first cycle, wall": ("firstCycleWallSeconds", instrument.fmt_s),
        "later cycles (median), CPU": ("laterCycleCpuSeconds", instrument.fmt_s),
        "later cycles (median), wall": ("laterCycleWallSeconds", instrument.fmt_s),
        "API writes, first cycle": ("writesFirstCycle", str),
        "API writes, later cycles": ("writesLaterCycles", str),
        "binds": ("binds", str),
    }

    def cell(result: dict[str, Any], row: str) -> str:
        key, fmt = rows[row]
        return fmt(result[key])

    table = instrument.side_by_side(
        f"{args.backlog:,} pods over a {args.limit:,}-GPU queue limit, {args.nodes:,} nodes",
        ["without gating", "with gating"],
        (tuple(rows),),
        cell,
        [report["ungated"], report["gated"]],
    )
    console.print(table)
    instrument.finish(report, args.out, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
