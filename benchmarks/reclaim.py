"""Reclaim benchmark (issue #3): a cluster full of borrowed GPUs, and the queue that owns them comes back.

`make bench` runs this file after `run.py`. It builds, in memory and deterministically:

* the nodes of `run.py`: 1,000 nodes (`node-0000`..`node-0999`) x 8 GPUs, cpu 128, memory 1Ti;
* two top-level queues: `borrower` (GPU quota 0, no limit: everything it runs is borrowed) and `owner`
  (GPU quota 8,000: it is owed the whole cluster); CPU and memory are not rationed (-1);
* 8,000 running pods of `borrower`: one GPU each (cpu 8, memory 64Gi), priorityClassName `train`
  (preemptible), bound with `spec.nodeName` + `status.phase: Running`, so every GPU is taken;
* one pending gang of `owner`: PodGroup `owner/train-512` (minMember 512, priorityClassName `train`) and
  its 512 pods of 8 GPUs each (cpu 64, memory 512Gi), i.e. 4,096 GPUs, half the cluster.

Freeing 512 whole nodes means evicting 512 x 8 = 4,096 one-GPU pods: that is the minimal reclaim, and
the borrower keeps the other 3,904 GPUs (its fair share once the owner's demand is met). The simulator
runs (`Simulation(...).run()`, period 1 s) until the cluster settles (--quiet decision-free cycles in a
row), at most --cycles cycles or --budget wall seconds, and the benchmark reports:

* the cycle in which the last of the 512 gang pods was bound, the simulated time of that cycle and the
  wall time of the cycles up to it (snapshot build + session per cycle, as the simulator times them);
* every cycle's wall time and its decisions (by action and kind);
* evictions: how many borrower pods were evicted, how many of them sit on a node that no gang pod took
  (needless), how many more than the 4,096 minimum, and whether anything was decided after the gang
  ran (reclaim ping-pong); the fair shares and allocations of both queues at the end.

Which borrower pods are victims depends on the victim order (newest first within the queue), so the
benchmark runs two layouts of the same 8,000 pods (pods are created in index order, so a higher index
is a newer pod):

* `packed`: pod i on node i // 8 (what filling the cluster in arrival order with binpack gives): the
  newest 4,096 pods are exactly the pods of the last 512 nodes;
* `spread`: pod i on node i mod 1,000: the newest 4,096 pods are spread four or five per node, so no
  node is freed by the first 4,096 victims; a minimal reclaim must choose whole nodes instead.

KAI's own scale test needed 85 s to reclaim for a 500-pod job; that is printed as the reference line
(it is a real cluster's wall time, evictions and binds included; the simulator applies both instantly,
so compare the orders of magnitude, not the digits).

Usage:

    .venv/bin/python benchmarks/reclaim.py                     # both layouts (what `make bench` runs)
    .venv/bin/python benchmarks/reclaim.py --layout packed     # one layout
    .venv/bin/python benchmarks/reclaim.py --profile 1         # cProfile cycle 1 of --layout (packed)

Results are printed as a table and written to `benchmarks/results/reclaim.json`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.config import SchedulerConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import instrument  # the measured run, profiling, options and report plumbing
import run  # the sibling benchmark: nodes and pod documents

# --- workload parameters ------------------------------------------------------------------------

NODES = run.NODES
GPUS_PER_NODE = run.GPUS_PER_NODE
GPUS = NODES * GPUS_PER_NODE
BORROWER = "borrower"
OWNER = "owner"
GANG = "train-512"
GANG_PODS = 512
GANG_POD_GPUS = 8
MINIMAL_EVICTIONS = GANG_PODS * GANG_POD_GPUS  # one-GPU victims on a full cluster
LAYOUTS = ("packed", "spread")
KAI_REFERENCE = {
    "seconds": 85.0,
    "pods": 500,
    "what": "KAI-Scheduler's scale test, reclaim for a 500-pod job",
}

RESULTS = run.RESULTS

# --- workload -----------------------------------------------------------------------------------


def node_of(index: int, layout: str) -> int:
    """The node of borrower pod `index` (creation order: a higher index is a newer pod)."""
    if layout == "packed":
        return index // GPUS_PER_NODE
    if layout == "spread":
        return index % NODES
    raise ValueError(f"unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")


def workload_docs(layout: str) -> list[dict[str, Any]]:
    """Every object as a Kubernetes-style dict, in creation order: nodes, queues, the running borrower
    pods (oldest first), the gang's PodGroup and its pending pods."""
    docs = [*run.node_docs(), run.queue_doc(BORROWER, 0), run.queue_doc(OWNER, GPUS)]
    for index in range(GPUS):
        pod = run._pod(f"borrow-{index:04d}", BORROWER, "train", run._container(1, 8, 64))
        pod["spec"]["nodeName"] = f"node-{node_of(index, layout):04d}"
        pod["status"]["phase"] = "Running"
        docs.append(pod)
    docs.append(
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": GANG, "namespace": OWNER, "labels": {run.QUEUE_LABEL: OWNER}},
            "spec": {"minMember": GANG_PODS, "queue": OWNER, "priorityClassName": "train"},
        }
    )
    container = run._container(GANG_POD_GPUS, 64, 512)
    docs.extend(
        run._pod(f"{GANG}-{i:03d}", OWNER, "train", container, annotations={run.POD_GROUP_ANNOTATION: GANG})
        for i in range(GANG_PODS)
    )
    return docs


# --- measuring ----------------------------------------------------------------------------------


def run_layout(objects: list[ApiObject], cycles: int, budget: float | None, quiet: int) -> dict[str, Any]:
    """Simulate until `quiet` decision-free cycles in a row (cycle 1 included), `cycles` cycles or
    `budget` wall seconds (checked from cycle 2 on)."""
    measured = instrument.measure(
        objects, SchedulerConfig(), cycles, budget, quiet, count_first=True, budget_after=1
    )
    summary = analyse(measured)
    summary.update(
        cycleSeconds=measured.cycle_seconds,
        snapshotSeconds=measured.build_times,
        actionSeconds=measured.action_times,
        setupSeconds=measured.setup_seconds,
        runSeconds=measured.run_seconds,
        cycleCap=cycles,
        budgetSeconds=budget,
        quietCyclesRequired=quiet,
        stoppedBy=measured.stopped_by,
        gcSeconds=measured.gc_seconds,
        gcCollections=measured.gc_collections,
    )
    return summary


def analyse(measured: instrument.Measurement) -> dict[str, Any]:
    """What the run did with the gang and the borrower pods, cycle by cycle and at the end."""
    decisions, clock, last = measured.decisions, measured.clock, measured.last
    cycle_seconds = measured.cycle_seconds
    gang_prefix = f"{OWNER}/{GANG}-"
    borrower_prefix = f"{BORROWER}/"
    running = 0
    gang_cycle: int | None = None
    per_cycle = []
    evicted_nodes: dict[str, str] = {}  # borrower pod -> node it was (last) evicted from
    borrower_evictions = gang_evictions = borrower_moves = 0
    for index, cycle_decisions in enumerate(decisions, start=1):
        for d in cycle_decisions:
            if d.pod.startswith(gang_prefix):
                running += {"bind": 1, "evict": -1}.get(d.type, 0)
                gang_evictions += d.type == "evict"
            elif d.pod.startswith(borrower_prefix):
                if d.type == "evict":
                    borrower_evictions += 1
                    evicted_nodes[d.pod] = d.node
                elif d.type == "pipeline":
                    borrower_moves += 1
        if gang_cycle is None and running >= GANG_PODS:
            gang_cycle = index
        per_cycle.append(
            {
                "cycle": index,
                "time": clock[index - 1],
                "seconds": cycle_seconds[index - 1],
                "gangPodsRunning": running,
                "decisions": dict(sorted(Counter(f"{d.action} {d.type}" for d in cycle_decisions).items())),
            }
        )
    cluster = measured.simulation.cluster
    # Where the gang runs, or is pipelined to (if the run ended between the reclaim and the bind).
    gang_nodes = {p.node or p.nominated_node for p in cluster.pods if p.key.startswith(gang_prefix)}
    needless = sorted(pod for pod, node in evicted_nodes.items() if node not in gang_nodes)
    after = decisions[gang_cycle:] if gang_cycle is not None else []
    phases = Counter(
        (p.key.split("/")[0], p.phase)
        for p in cluster.pods
        if p.key.startswith((gang_prefix, borrower_prefix))
    )
    fair_share = last.fair_share if last is not None else {}
    # Cycle 1 also derives every pod's request and placement once (cached afterwards): not a quiet figure.
    quiet_times = [s for s, d in zip(cycle_seconds[1:], decisions[1:], strict=True) if not d]
    waits = last.unschedulable.get(f"{OWNER}/{GANG}") if last is not None and gang_cycle is None else None
    return {
        "gangRunning": gang_cycle is not None,
        "gangRunningCycle": gang_cycle,
        "gangPodsRunningAtEnd": running,
        "simulatedSecondsToRun": clock[gang_cycle - 1] if gang_cycle is not None else None,
        "wallSecondsToRun": sum(cycle_seconds[:gang_cycle]) if gang_cycle is not None else None,
        "cycles": len(decisions),
        "perCycle": per_cycle,
        "quietCycleMedianSeconds": statistics.median(quiet_times) if quiet_times else None,
        "evictions": {
            "borrowerPods": borrower_evictions,
            "gangPods": gang_evictions,
            "minimum": MINIMAL_EVICTIONS,
            "overMinimum": borrower_evictions - MINIMAL_EVICTIONS if gang_cycle is not None else None,
            "needless": len(needless),
            "needlessExamples": needless[:10],
            "borrowerPodsMoved": borrower_moves,
        },
        "decisionsAfterGangRan": sum(len(d) for d in after),
        "podsAtEnd": {f"{queue} {phase}": count for (queue, phase), count in sorted(phases.items())},
        "fairShareGpus": {queue: fair_share[queue][0] for queue in (BORROWER, OWNER) if queue in fair_share},
        "gangWaitsBecause": waits,
    }


# --- reporting ----------------------------------------------------------------------------------


def _value(result: dict[str, Any], row: str) -> str:
    ev = result["evictions"]
    cycles = result["perCycle"]
    ran = result["gangRunning"]
    if row == "gang running":
        if ran:
            return f"[green]yes[/green], in cycle {result['gangRunningCycle']}"
        return f"[red]NO[/red]: {result['gangPodsRunningAtEnd']}/{GANG_PODS} after {result['cycles']} cycles"
    if row == "simulated time to run":
        return instrument.fmt_s(result["simulatedSecondsToRun"]) if ran else "n/a"
    if row == "wall time to run":
        return instrument.fmt_s(result["wallSecondsToRun"]) if ran else "n/a"
    if row == "cycle wall times":
        return instrument.fmt_cycles(result["cycleSeconds"])
    if row == "reclaim cycle":
        first = next((c for c in cycles if c["decisions"]), None)
        if first is None:
            return "no decisions"
        kinds = ", ".join(f"{n:,} {k}" for k, n in first["decisions"].items())
        return f"cycle {first['cycle']}: {kinds}"
    if row == "evicted borrower pods":
        over = ev["overMinimum"]
        extra = "" if over is None else (" (minimal)" if over == 0 else f" ({over:+,} vs minimal)")
        return f"{ev['borrowerPods']:,} of min {ev['minimum']:,}{extra}"
    if row == "needlessly evicted":
        return f"{ev['needless']:,}" if ran else f"{ev['needless']:,} (gang not running yet)"
    if row == "borrower pods moved":
        return f"{ev['borrowerPodsMoved']:,}"
    if row == "decisions after gang ran":
        return f"{result['decisionsAfterGangRan']:,}" if ran else "n/a"
    if row == "quiet cycle (median)":
        return instrument.fmt_ms(result["quietCycleMedianSeconds"])
    if row == "GPU fair share (borrower / owner)":
        share = result["fairShareGpus"]
        return f"{share.get(BORROWER, 0):,.0f} / {share.get(OWNER, 0):,.0f}"
    if row == "pods at end":
        pods = result["podsAtEnd"]
        return ", ".join(f"{k} {v:,}" for k, v in pods.items())
    raise KeyError(row)


SECTIONS = (
    (
        "gang running",
        "simulated time to run",
        "wall time to run",
        "cycle wall times",
    ),
    (
        "reclaim cycle",
        "evicted borrower pods",
        "needlessly evicted",
        "borrower pods moved",
        "decisions after gang ran",
        "quiet cycle (median)",
        "GPU fair share (borrower / owner)",
        "pods at end",
        instrument.STOPPED_BY,
    ),
)


def render(report: dict[str, Any], console: Console) -> None:
    layouts = report["layouts"]
    workload = report["workload"]
    title = (
        f"kai-scheduler reclaim benchmark: {workload['nodes']:,} nodes x {GPUS_PER_NODE} GPUs full of "
        f"{workload['borrowerPods']:,} borrowed 1-GPU pods; the owner's gang: {GANG_PODS} pods x "
        f"{GANG_POD_GPUS} GPUs"
    )
    table = instrument.side_by_side(title, list(layouts), SECTIONS, _value, list(layouts.values()))
    reference = report["reference"]
    table.add_row(f"reference: {reference['what']}", *[f"{reference['seconds']:.0f} s" for _ in layouts])
    console.print(table)
    for layout, result in layouts.items():
        if result["gangWaitsBecause"]:
            console.print(f"[yellow]{layout}: the gang waits because: {result['gangWaitsBecause']}[/yellow]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--layout",
        choices=(*LAYOUTS, "both"),
        default="both",
        help="where the borrower pods run (default both, or packed with --profile)",
    )
    instrument.add_run_options(
        parser, cycles=20, quiet=2, budget=120.0, out=RESULTS / "reclaim.json", each=" per layout"
    )
    args = parser.parse_args(argv)
    console = Console(width=140)
    host = instrument.machine()
    layouts = LAYOUTS if args.layout == "both" else (args.layout,)

    if args.profile is not None:
        layout = "packed" if args.layout == "both" else args.layout
        objects = run.to_objects(workload_docs(layout))
        instrument.print_profile(console, objects, args.profile, RESULTS, args.top, f"reclaim-{layout}-cycle")
        return 0

    results: dict[str, Any] = {}
    setup: dict[str, Any] = {}
    for layout in layouts:
        started = time.perf_counter()
        docs = workload_docs(layout)
        objects = run.to_objects(docs)
        setup[layout] = {"buildAndValidateSeconds": time.perf_counter() - started}
        console.print(
            f"{layout}: {len(objects):,} objects built in {setup[layout]['buildAndValidateSeconds']:.1f}s; "
            f"simulating until {args.quiet} quiet cycles (at most {args.cycles}) ..."
        )
        del docs
        results[layout] = run_layout(objects, args.cycles, args.budget or None, args.quiet)
        del objects
        gc.collect()
    report: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": host,
        "workload": {
            "nodes": NODES,
            "gpus": GPUS,
            "borrowerPods": GPUS,
            "borrowerQuota": 0,
            "ownerQuota": GPUS,
            "gang": {"name": f"{OWNER}/{GANG}", "pods": GANG_PODS, "gpusPerPod": GANG_POD_GPUS},
            "minimalEvictions": MINIMAL_EVICTIONS,
            "layouts": {
                "packed": "borrower pod i on node i // 8 (the newest pods fill the last nodes)",
                "spread": "borrower pod i on node i mod 1000 (the newest pods are spread over every node)",
            },
        },
        "setup": setup,
        "reference": KAI_REFERENCE,
        "layouts": results,
    }
    render(report, console)
    instrument.finish(report, args.out, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
