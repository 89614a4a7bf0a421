"""The scale benchmark's trickle point (issue #23, point 1): a steady cycle after a small change.

The steady workload (`scale_workload.steady`: every GPU taken by non-preemptible pods, pending GPU pods
that cannot fit), and before each of cycles 2..N one change, in turn:

* `arrival`: a new pending pod that cannot fit arrives in some leaf queue;
* `completion`: a running single-GPU pod completes (its GPU is free, and a pending pod may take it) and a
  pending pod of another shape, in another queue, arrives;
* `cordon`: a node is cordoned.

Arrivals and completions are in the input (the simulator's arrival and duration annotations), so they
happen at the cycle's time as a cluster's would; a cordon is a node update handed to the scheduler's
cache, as an informer would. Cycles are CYCLE_GAP seconds apart on the simulated clock.

`measure(nodes, seed, cycles)` runs in `scale.py`'s child process and returns the point's JSON: each
cycle's simulator time (snapshot to decisions), the whole cycle's CPU and wall time (with the cluster's
effects), what changed before it and what it decided.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from collections import Counter
from typing import Any

import scale_workload

from kai_scheduler.api import constants as c

CYCLE_GAP = 10.0  # seconds of simulated time between two cycles
CHANGES = ("arrival", "completion", "cordon")
ARRIVING_SHAPES = ("gpu-1", "gpu-2", "gpu-4", "gpu-8", "fraction-0.5")


def workload(nodes: int, seed: int, cycles: int) -> tuple[list[dict[str, Any]], list[str], dict[int, str]]:
    """The steady workload with the trickle's arrivals and completions in it, the change before each cycle
    (by cycle number from 2), and the node to cordon before each `cordon` cycle."""
    docs = scale_workload.steady(nodes, seed)
    rng = random.Random(seed + 23)
    queues = [d for d in docs if d["kind"] == "Queue" and d["spec"].get("parentQueue")]
    leaves = [q["metadata"]["name"] for q in queues]
    single_gpu = [
        d
        for d in docs
        if d["kind"] == "Pod"
        and d["spec"].get("nodeName")
        and d["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu") == "1"
    ]
    rng.shuffle(single_gpu)
    racks = nodes // scale_workload.NODES_PER_RACK
    changes: list[str] = []
    cordons: dict[int, str] = {}
    arrivals: list[dict[str, Any]] = []
    for number in range(2, cycles + 1):
        kind = CHANGES[(number - 2) % len(CHANGES)]
        changes.append(kind)
        at = f"{(number - 1) * CYCLE_GAP:g}s"
        if kind == "cordon":
            cordons[number] = f"node-{rng.randrange(nodes):04d}"
            continue
        if kind == "completion":
            done = single_gpu.pop()
            done["metadata"].setdefault("annotations", {})[c.SIM_DURATION_ANNOTATION] = at
        shape = rng.choice(ARRIVING_SHAPES)
        pod = scale_workload._single(rng, 90_000 + number, shape, rng.choice(leaves), racks)
        pod["metadata"]["name"] = f"trickle-{number:03d}-{pod['metadata']['name']}"
        pod["metadata"].setdefault("annotations", {})[c.SIM_ARRIVAL_ANNOTATION] = at
        arrivals.append(pod)
    return [*docs, *arrivals], changes, cordons


def measure(nodes: int, seed: int, cycles: int) -> dict[str, Any]:
    """Simulate the trickle and time every cycle (runs in the child process)."""
    import run
    from instrument import START

    from kai_scheduler.api.objects import Node
    from kai_scheduler.framework.config import SchedulerConfig
    from kai_scheduler.sim import gc_policy
    from kai_scheduler.sim.engine import Simulation, SimulationOptions

    docs, changes, cordons = workload(nodes, seed, cycles)
    with gc_policy.collector_paused():
        objects = run.to_objects(docs)
        del docs
        simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=cycles))
        nodes_by_name = {o.metadata.name: o for o in objects if isinstance(o, Node)}
        del objects
        gc_policy.keep_survivors()  # the cluster lives as long as the run, as in `scale.py point`
    cache = simulation.cluster.cache
    seconds: list[float] = []
    cpu: list[float] = []
    wall: list[float] = []
    decisions: list[dict[str, int]] = []
    waiting: list[int] = []
    # Every cycle's decisions and every waiting job's reason, as text, hashed: a change that should change
    # no decision and no reason leaves it.
    digest = hashlib.sha256()
    with gc_policy.fewer_collections():
        for number in range(1, cycles + 1):
            began, began_cpu = time.perf_counter(), time.process_time()
            node = cordons.get(number)
            if node is not None:  # an informer's node update
                current = nodes_by_name[node]
                spec = current.spec.model_copy(update={"unschedulable": True})
                nodes_by_name[node] = current.model_copy(update={"spec": spec})
                cache.set_nodes(nodes_by_name.values())
            if number == 1:
                # As `Simulation.run` runs its first cycle: it makes the cluster's jobs and pods, which live
                # as long as the run, so it does so without collecting and sets them aside (else a full
                # collection walks them all in whichever later cycle it lands in).
                with gc_policy.collector_paused():
                    record, result = simulation._cycle(0.0, 1)
                    gc_policy.keep_survivors()
            else:
                record, result = simulation._cycle((number - 1) * CYCLE_GAP, number)
            cpu.append(time.process_time() - began_cpu)
            wall.append(time.perf_counter() - began)
            seconds.append(record.seconds)
            decisions.append(dict(Counter(d.type for d in record.decisions)))
            waiting.append(len(result.unschedulable))
            digest.update("\n".join(repr(d) for d in record.decisions).encode())
            digest.update("\n".join(f"{k}: {v}" for k, v in sorted(result.unschedulable.items())).encode())
    later_cpu, later_wall = cpu[1:], wall[1:]
    return {
        "kind": "trickle",
        "nodes": nodes,
        "changes": changes,
        "cycleSeconds": seconds,
        "cycleCpuSeconds": cpu,
        "cycleWallSeconds": wall,
        "decisionsPerCycle": decisions,
        "waitingPerCycle": waiting,
        "decisionsDigest": digest.hexdigest()[:16],
        "medianSeconds": statistics.median(seconds[1:]) if later_cpu else None,
        "medianCpuSeconds": statistics.median(later_cpu) if later_cpu else None,
        "medianWallSeconds": statistics.median(later_wall) if later_wall else None,
        "minCpuSeconds": min(later_cpu) if later_cpu else None,
        "maxCpuSeconds": max(later_cpu) if later_cpu else None,
    }
