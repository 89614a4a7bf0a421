"""Scheduler benchmark: one large cluster, one large backlog, the first cycle and the steady cycle.

`make bench` runs this file (and then `reclaim.py`). It builds, in memory and deterministically, a cluster
of 1,000 nodes x 8 GPUs and a backlog of 10,000 pending pods of mixed shapes in 20 leaf queues, runs the
simulator until the cluster settles and reports:

* the first cycle's placement rate: pods bound or pipelined in cycle 1 / cycle 1's wall time (snapshot
  build + scheduling session, the span of the simulator's `cycleSeconds`);
* the cycles it takes to settle: the first cycle fills the cluster and already starts to reclaim towards
  the fair shares (pods placed earlier in a cycle may be victims), a few more cycles reclaim the rest
  (evict victims and pipeline the reclaiming pods onto what they release) and bind, one cycle later, what
  was pipelined (a pipelined pod holds its nominated node for one cycle); with the default seed the last
  decision is taken in cycle 4;
* the steady cycle time: the median of the cycles after that in which nothing was bound, pipelined or
  evicted (the backlog still waits, so each of them walks every pending job and finds that nothing
  fits). The run stops once --quiet (3) such cycles followed each other, or at --cycles (15), or when the
  --budget (90 s) is spent; if it did not settle, the table says so and reports the later cycles instead;
* the share of the first cycle spent building the snapshot, and in the cyclic garbage collector;
* once, the YAML path end to end (write the same workload as YAML, load it as `kai-scheduler simulate`
  does, simulate one cycle), as a secondary figure.

Results are printed as a table and written to `benchmarks/results/latest.json`. The goal is a first-cycle
placement rate of at least 1,000 pods/s on the 2-core reference machine.

The workload (fixed by SEED below; change the seed and every figure may move a little):

* nodes `node-0000`..`node-0999`: `nvidia.com/gpu: 8`, cpu 128, memory 1Ti, pods 110, label
  `nvidia.com/gpu.memory: "81920"`, 5 zones (`topology.kubernetes.io/zone`) of 10 racks
  (`topology.kubernetes.io/rack`) of 20 nodes;
* 4 department queues with 5 leaf queues each; GPU quotas sum to the cluster (8,000 GPUs), a few leaves
  (and one department) have GPU limits, over-quota weights vary 1..4; CPU and memory quotas are -1
  (unlimited deserved), so only GPUs are rationed;
* 10,000 pending pods (`schedulerName: kai-scheduler`, label `kai.scheduler/queue`) in these shares:
  whole-GPU pods of 1/2/4/8 GPUs, gangs (PodGroups of minMember 4..16 whose pods take 1..8 GPUs each,
  some with an extra elastic pod or two), fractional pods (`gpu-fraction` 0.5 / 0.25) and CPU-only pods;
  about 8% of the single pods select a rack or a zone with a nodeSelector; priority classes
  train / build / inference. GPU demand is about 1.3x the cluster, so a backlog remains.

Usage:

    .venv/bin/python benchmarks/run.py                   # the benchmark (what `make bench` runs)
    .venv/bin/python benchmarks/run.py --write-yaml DIR  # write the workload as YAML and exit
    .venv/bin/kai-scheduler simulate DIR                 # ... then run it through the CLI, until steady
    .venv/bin/python benchmarks/run.py --profile [N]     # cProfile cycle N (default 1) to results/

(Without --cycles, `simulate` runs until a cycle decides nothing and nothing is due any more, at most
--max-cycles cycles: for this workload that is cycle 5, the first quiet one.)
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import instrument  # the measured run, profiling, options and report plumbing the benchmarks share
import yaml
from instrument import fmt_actions, fmt_cycles, fmt_ms, fmt_s
from rich.console import Console
from rich.table import Table

from kai_scheduler.api.objects import ApiObject, Node, Pod, PodGroup, Queue
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.sim.engine import CycleRecord, Simulation, SimulationOptions
from kai_scheduler.sim.in_memory_cluster import SimCluster
from kai_scheduler.sim.loader import load_manifests

# --- workload parameters ------------------------------------------------------------------------

SEED = 20260101
"""The one random seed: same seed, same workload, byte for byte."""

NODES = 1_000
GPUS_PER_NODE = 8
NODES_PER_RACK = 20
RACKS_PER_ZONE = 10
PENDING_PODS = 10_000
GOAL_PODS_PER_SECOND = 1_000.0

# Pod shares of the backlog (fractions of PENDING_PODS), by shape. Gang pods are the rest.
SINGLE_SHARES = {
    "gpu-1": 0.30,
    "gpu-2": 0.07,
    "gpu-4": 0.03,
    "gpu-8": 0.01,
    "fraction-0.5": 0.07,
    "fraction-0.25": 0.07,
    "cpu": 0.22,
}
GANG_GPUS_PER_POD = {1: 0.7, 2: 0.2, 4: 0.07, 8: 0.03}
GANG_MIN_MEMBER = (4, 16)
ELASTIC_EXTRA_PODS = 0.2  # share of gangs that have 1-2 pods beyond minMember
NODE_SELECTOR_SHARE = 0.08  # of single pods: half select a rack, half a zone

# Department -> (GPU quota, GPU limit or -1, leaf count). Quotas sum to NODES * GPUS_PER_NODE.
DEPARTMENTS = {
    "research": (3200, -1, 5),
    "product": (2400, -1, 5),
    "platform": (1600, 2400, 5),
    "ops": (800, -1, 5),
}
# Priority class of a job by kind: (train, build, inference) weights.
PRIORITY_WEIGHTS = {
    "gang": (0.85, 0.15, 0.0),
    "single": (0.55, 0.2, 0.25),
    "cpu": (0.3, 0.6, 0.1),
}

SCHEDULER = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.kubernetes.io/rack"

RESULTS = Path(__file__).resolve().parent / "results"

# --- workload -----------------------------------------------------------------------------------


def zone_of(rack: int) -> str:
    return f"zone-{chr(ord('a') + rack // RACKS_PER_ZONE)}"


def node_doc(index: int, labels: dict[str, str]) -> dict[str, Any]:
    """Node `node-{index:04d}`: 8 H100 GPUs, cpu 128, memory 1Ti, pods 110, and `labels` (zone, rack)."""
    resources = {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(GPUS_PER_NODE)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{index:04d}",
            "labels": {
                "kubernetes.io/hostname": f"node-{index:04d}",
                "nvidia.com/gpu.memory": "81920",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                **labels,
            },
        },
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def node_docs() -> list[dict[str, Any]]:
    return [
        node_doc(i, {ZONE_LABEL: zone_of(i // NODES_PER_RACK), RACK_LABEL: f"rack-{i // NODES_PER_RACK:02d}"})
        for i in range(NODES)
    ]


def queue_doc(
    name: str, quota: float, limit: float = -1, weight: float = 1, parent: str = ""
) -> dict[str, Any]:
    """A Queue with a GPU quota, limit and over-quota weight; CPU and memory not rationed (-1)."""
    spec: dict[str, Any] = {
        "displayName": name,
        "resources": {
            "gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight},
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": weight},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": weight},
        },
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def queue_docs(rng: random.Random) -> list[dict[str, Any]]:
    """Departments first (parents before children), then their leaves."""
    parents, leaves = [], []
    for department, (quota, limit, count) in DEPARTMENTS.items():
        parents.append(queue_doc(department, quota, limit))
        # Split the department's quota into `count` positive integers with random proportions.
        weights = [rng.uniform(0.5, 1.5) for _ in range(count)]
        shares = [int(quota * w / sum(weights)) for w in weights]
        shares[0] += quota - sum(shares)
        for j, share in enumerate(shares):
            leaf_limit = -1 if rng.random() < 0.75 else round(share * rng.choice((1.25, 1.5, 2.0)))
            weight = rng.choice((1, 2, 3, 4))
            leaves.append(queue_doc(f"{department}-{j + 1}", share, leaf_limit, weight, parent=department))
    return parents + leaves


def _priority(rng: random.Random, kind: str) -> str:
    train, build, inference = PRIORITY_WEIGHTS[kind]
    return rng.choices(("train", "build", "inference"), weights=(train, build, inference))[0]


def _container(gpus: int, cpu: float, memory_gi: int) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": f"{cpu:g}", "memory": f"{memory_gi}Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {"name": "main", "image": "registry.example.com/bench:1", "resources": resources}


def _pod(
    name: str,
    queue: str,
    priority_class: str,
    container: dict[str, Any],
    *,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "priorityClassName": priority_class,
        "containers": [container],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    metadata: dict[str, Any] = {"name": name, "namespace": queue, "labels": {QUEUE_LABEL: queue}}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _single_job(rng: random.Random, index: int, shape: str, queue: str) -> list[dict[str, Any]]:
    name = f"{shape.replace('.', '')}-{index:05d}"
    annotations: dict[str, str] = {}
    selector: dict[str, str] | None = None
    if shape == "cpu":
        priority = _priority(rng, "cpu")
        container = _container(0, rng.choice((1, 2, 4, 8, 16)), rng.choice((4, 8, 16, 32, 64)))
    elif shape.startswith("fraction-"):
        priority = _priority(rng, "single")
        annotations["gpu-fraction"] = shape.removeprefix("fraction-")
        container = _container(0, rng.choice((1, 2, 4)), rng.choice((8, 16, 32)))
    else:
        priority = _priority(rng, "single")
        gpus = int(shape.removeprefix("gpu-"))
        container = _container(gpus, gpus * rng.choice((4, 8, 12)), gpus * rng.choice((32, 64, 96)))
    if shape != "cpu" and rng.random() < NODE_SELECTOR_SHARE:
        rack = rng.randrange(NODES // NODES_PER_RACK)
        selector = {RACK_LABEL: f"rack-{rack:02d}"} if rng.random() < 0.5 else {ZONE_LABEL: zone_of(rack)}
    return [_pod(name, queue, priority, container, annotations=annotations, node_selector=selector)]


def _gang_job(
    rng: random.Random,
    index: int,
    size: int,
    min_member: int,
    queue: str,
    gpus_per_pod: Mapping[int, float] = GANG_GPUS_PER_POD,
) -> list[dict[str, Any]]:
    name = f"gang-{index:04d}"
    gpus = rng.choices(list(gpus_per_pod), weights=list(gpus_per_pod.values()))[0]
    priority = _priority(rng, "gang")
    container = _container(gpus, gpus * rng.choice((4, 8, 12)), gpus * rng.choice((32, 64, 96)))
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": queue, "labels": {QUEUE_LABEL: queue}},
        "spec": {"minMember": min_member, "queue": queue, "priorityClassName": priority},
    }
    pods = [
        _pod(
            f"{name}-{i:02d}",
            queue,
            priority,
            container,
            annotations={POD_GROUP_ANNOTATION: name},
        )
        for i in range(size)
    ]
    return [group, *pods]


def _gang_sizes(rng: random.Random, budget: int) -> list[tuple[int, int]]:
    """(pods, minMember) per gang, adding up to exactly `budget` pods (budget >= the smallest gang)."""
    low, high = GANG_MIN_MEMBER
    sizes: list[tuple[int, int]] = []
    left = budget
    while left > 0:
        min_member = rng.randint(low, high)
        size = min_member + (rng.randint(1, 2) if rng.random() < ELASTIC_EXTRA_PODS else 0)
        if left - size < low:  # what would be left is too small for a gang: this one takes it all
            size, min_member = left, min(min_member, left)
        sizes.append((size, min_member))
        left -= size
    return sizes


def workload_docs(seed: int = SEED) -> list[dict[str, Any]]:
    """Every object of the workload as a Kubernetes-style dict, in creation order."""
    rng = random.Random(seed)
    queues = queue_docs(rng)
    leaves = [q["metadata"]["name"] for q in queues if q["spec"].get("parentQueue")]
    leaf_weights = [q["spec"]["resources"]["gpu"]["quota"] for q in queues if q["spec"].get("parentQueue")]

    single_counts = {shape: round(share * PENDING_PODS) for shape, share in SINGLE_SHARES.items()}
    gang_budget = PENDING_PODS - sum(single_counts.values())
    jobs: list[tuple[str, Any]] = [(shape, None) for shape, n in single_counts.items() for _ in range(n)]
    jobs += [("gang", size) for size in _gang_sizes(rng, gang_budget)]
    rng.shuffle(jobs)  # creation order interleaves every kind of job

    groups: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    for index, (shape, size) in enumerate(jobs):
        # Demand follows quota roughly, with noise: some queues ask for far more than their share.
        queue = rng.choices(leaves, weights=[w * rng.uniform(0.5, 1.5) for w in leaf_weights])[0]
        if shape == "gang":
            group, *members = _gang_job(rng, index, size[0], size[1], queue)
            groups.append(group)
            pods.extend(members)
        else:
            pods.extend(_single_job(rng, index, shape, queue))
    return [*node_docs(), *queues, *groups, *pods]


_MODELS: dict[str, Callable[[dict[str, Any]], ApiObject]] = {
    "Node": Node.model_validate,
    "Pod": Pod.model_validate,
    "Queue": Queue.model_validate,
    "PodGroup": PodGroup.model_validate,
}


def to_objects(docs: list[dict[str, Any]]) -> list[ApiObject]:
    return [_MODELS[doc["kind"]](doc) for doc in docs]


def describe_workload(docs: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    kinds = Counter(doc["kind"] for doc in docs)
    pods = [doc for doc in docs if doc["kind"] == "Pod"]
    gpu_demand = 0.0
    shapes: Counter[str] = Counter()
    for pod in pods:
        annotations = pod["metadata"].get("annotations", {})
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        if "gpu-fraction" in annotations:
            gpu_demand += float(annotations["gpu-fraction"])
            shape = f"fraction {annotations['gpu-fraction']}"
        elif "nvidia.com/gpu" in requests:
            gpu_demand += int(requests["nvidia.com/gpu"])
            shape = f"{requests['nvidia.com/gpu']} GPU"
        else:
            shape = "cpu only"
        if POD_GROUP_ANNOTATION in annotations:
            shape = "gang pod, " + shape
        shapes[shape] += 1
    capacity = NODES * GPUS_PER_NODE
    return {
        "seed": seed,
        "nodes": kinds["Node"],
        "gpus": capacity,
        "queues": kinds["Queue"],
        "leafQueues": sum(1 for d in docs if d["kind"] == "Queue" and d["spec"].get("parentQueue")),
        "podGroups": kinds["PodGroup"],
        "pendingPods": len(pods),
        "gpuDemand": gpu_demand,
        "demandOverCapacity": round(gpu_demand / capacity, 3),
        "podShapes": dict(sorted(shapes.items())),
        "withNodeSelector": sum(1 for p in pods if p["spec"].get("nodeSelector")),
    }


# --- measuring ----------------------------------------------------------------------------------


def run_in_memory(
    objects: list[ApiObject], cycles: int, budget: float | None, quiet: int = 3
) -> dict[str, Any]:
    """Run the in-memory objects until they settle, timing each cycle's snapshot build and session.

    The run stops before the next cycle once `quiet` cycles in a row (after the first) decided nothing,
    once `cycles` cycles ran, or once `budget` seconds have passed (and at least two cycles ran). When it
    is stopped between cycles, the cycle times come from the same two timers the simulator's own cycle
    timing spans (snapshot build + session).
    """
    measured = instrument.measure(objects, SchedulerConfig(), cycles, budget, quiet)
    if measured.result is not None:
        records = measured.result.cycles
    else:
        records = [
            CycleRecord(i + 1, measured.clock[i], measured.decisions[i], seconds)
            for i, seconds in enumerate(measured.cycle_seconds)
        ]
    stopped = measured.stopped_by
    summary = _summarise(
        records,
        measured.simulation.cluster,
        measured.build_times,
        measured.session_times,
        measured.action_times,
        quiet,
    )
    summary.update(
        setupSeconds=measured.setup_seconds,
        runSeconds=measured.run_seconds,
        cycleCap=cycles,
        budgetSeconds=budget,
        stoppedBy=stopped,
        stoppedAtBudget=stopped == "time budget",
        cycleTiming="simulator cycleSeconds" if stopped == "cycle cap" else "build+session timers",
        gcSeconds=measured.gc_seconds,
        gcCollections=measured.gc_collections,
    )
    return summary


def _summarise(
    records: list[CycleRecord],
    cluster: SimCluster,
    build_times: list[float],
    session_times: list[float],
    action_times: list[dict[str, float]],
    quiet: int,
) -> dict[str, Any]:
    first = records[0]
    first_placed = instrument.placed(first.decisions)
    kinds = Counter(d.type for d in first.decisions)
    # Steady: the decision-free cycles the run ended with, if there were at least `quiet` of them (one
    # if `quiet` is 0). If the cluster did not settle (it was still deciding when the cycle cap or the
    # budget stopped it), every cycle after the first stands in, and the report says so.
    later = records[1:]
    tail = instrument.quiet_tail([r.decisions for r in records])
    settled = tail >= max(quiet, 1)
    steady_records = later[len(later) - tail :] if settled else later
    deciding = [r.cycle for r in records if r.decisions]
    steady = [r.seconds for r in steady_records]
    steady_builds = [build_times[r.cycle - 1] for r in steady_records]
    steady_actions = [action_times[r.cycle - 1] for r in steady_records]
    action_names = list(action_times[0])
    later_kinds = Counter(d.type for r in later for d in r.decisions)
    pending = sum(1 for p in cluster.arrived_pods() if p.phase == "Pending")
    return {
        "firstCycle": {
            "seconds": first.seconds,
            "placed": first_placed,
            "binds": kinds.get("bind", 0),
            "pipelines": kinds.get("pipeline", 0),
            "evictions": kinds.get("evict", 0),
            "podsPerSecond": first_placed / first.seconds if first.seconds > 0 else None,
            "snapshotSeconds": build_times[0],
            "sessionSeconds": session_times[0],
            "snapshotShare": build_times[0] / first.seconds,
            "actionSeconds": action_times[0],
        },
        "steady": {
            "settled": settled,
            "lastDecisionCycle": deciding[-1] if deciding else None,
            "quietCyclesRequired": quiet,
            "cycles": len(steady),
            "medianSeconds": statistics.median(steady) if steady else None,
            "minSeconds": min(steady) if steady else None,
            "maxSeconds": max(steady) if steady else None,
            "snapshotMedianSeconds": statistics.median(steady_builds) if steady else None,
            "actionMedianSeconds": {
                name: statistics.median(entry.get(name, 0.0) for entry in steady_actions)
                for name in action_names
            }
            if steady
            else {},
        },
        "afterFirstCycle": {
            "cycles": len(later),
            "binds": later_kinds.get("bind", 0),
            "pipelines": later_kinds.get("pipeline", 0),
            "evictions": later_kinds.get("evict", 0),
            "decisionsPerCycle": [len(r.decisions) for r in later],
            "decisionKindsPerCycle": [
                dict(Counter(f"{d.action} {d.type}" for d in r.decisions)) for r in later
            ],
        },
        "pendingAtEnd": pending,
        "cycles": len(records),
        "cycleSeconds": [r.seconds for r in records],
        "snapshotSeconds": build_times[: len(records)],
        "actionSeconds": action_times[: len(records)],
    }


def write_yaml(docs: list[dict[str, Any]], folder: Path) -> list[Path]:
    """One file per kind, named so that the loader's sorted order is the in-memory creation order."""
    folder.mkdir(parents=True, exist_ok=True)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    files = []
    for position, kind in enumerate(("Node", "Queue", "PodGroup", "Pod"), start=1):
        path = folder / f"{position:02d}-{kind.lower()}s.yaml"
        with path.open("w", encoding="utf-8") as handle:
            yaml.dump_all(
                (doc for doc in docs if doc["kind"] == kind),
                handle,
                Dumper=dumper,
                sort_keys=False,
                default_flow_style=False,
            )
        files.append(path)
    return files


def run_yaml(docs: list[dict[str, Any]], cycles: int, cli: bool) -> dict[str, Any]:
    """The YAML path once: write the workload, load it as `kai-scheduler simulate` does, simulate `cycles`."""
    folder = Path(tempfile.mkdtemp(prefix="kai-bench-yaml-"))
    try:
        started = time.perf_counter()
        files = write_yaml(docs, folder)
        write_seconds = time.perf_counter() - started
        size = sum(f.stat().st_size for f in files)
        started = time.perf_counter()
        objects = [loaded.obj for loaded in load_manifests([str(folder)])]
        load_seconds = time.perf_counter() - started
        started = time.perf_counter()
        options = SimulationOptions(start=instrument.START, cycles=cycles)
        result = Simulation(objects, SchedulerConfig(), options).run()
        simulate_seconds = time.perf_counter() - started
        summary: dict[str, Any] = {
            "bytes": size,
            "objects": len(objects),
            "writeSeconds": write_seconds,
            "loadSeconds": load_seconds,
            "cycles": len(result.cycles),
            "simulateSeconds": simulate_seconds,
            "loadAndSimulateSeconds": load_seconds + simulate_seconds,
            "firstCyclePlaced": instrument.placed(result.cycles[0].decisions),
            "firstCycleSeconds": result.cycles[0].seconds,
        }
        del objects, result
        if cli:
            summary["cli"] = _run_cli(folder, cycles)
        return summary
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_cli(folder: Path, cycles: int) -> dict[str, Any]:
    """`kai-scheduler simulate DIR --cycles N --output json` as a user runs it: process start to exit."""
    executable = Path(sys.executable).with_name("kai-scheduler")
    command = [str(executable)] if executable.exists() else [sys.executable, "-m", "kai_scheduler"]
    out = folder / "result.json"
    started = time.perf_counter()
    completed = subprocess.run(
        [*command, "simulate", str(folder), "--cycles", str(cycles), "--output", "json", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        return {"seconds": seconds, "error": completed.stderr.strip()[-500:]}
    document = json.loads(out.read_text(encoding="utf-8"))
    return {
        "seconds": seconds,
        "cycles": document["summary"]["cycles"],
        "pods": document["summary"]["pods"],
        "cycleSeconds": document["cycleSeconds"],
    }


# --- reporting ----------------------------------------------------------------------------------


def render(report: dict[str, Any], console: Console) -> None:
    workload, memory = report["workload"], report["inMemory"]
    first, steady, later = memory["firstCycle"], memory["steady"], memory["afterFirstCycle"]
    rate = first["podsPerSecond"]

    table = Table(title="kai-scheduler benchmark", show_header=True, header_style="bold")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("nodes", f"{workload['nodes']:,}")
    table.add_row("GPUs", f"{workload['gpus']:,}")
    table.add_row("pending pods", f"{workload['pendingPods']:,} ({workload['podGroups']} gangs)")
    table.add_row("queues (leaf)", f"{workload['queues']} ({workload['leafQueues']})")
    table.add_row("GPU demand / capacity", f"{workload['demandOverCapacity']:.2f}x")
    table.add_section()
    table.add_row("first cycle wall time", fmt_s(first["seconds"]))
    table.add_row("  snapshot build", f"{fmt_s(first['snapshotSeconds'])} ({first['snapshotShare']:.0%})")
    table.add_row("  scheduling session", fmt_s(first["sessionSeconds"]))
    table.add_row("  by action", fmt_actions(first["actionSeconds"]))
    table.add_row("pods placed in first cycle", f"{first['placed']:,} ({first['pipelines']:,} pipelined)")
    table.add_row("placement rate", "n/a" if rate is None else f"{rate:,.0f} pods/s")
    table.add_section()
    if steady["settled"]:
        last = steady["lastDecisionCycle"]
        table.add_row(
            "settled",
            f"after cycle {last} (the last with decisions), then {steady['cycles']} quiet cycles"
            if last
            else f"nothing decided at all; {steady['cycles']} quiet cycles",
        )
        label = "steady cycle time (median)"
    else:
        table.add_row(
            "settled",
            f"[red]NO[/red]: still deciding in cycle {steady['lastDecisionCycle']} of {memory['cycles']} "
            f"(stopped by the {memory['stoppedBy']})",
        )
        label = "later cycle time (median, NOT settled)"
    table.add_row(
        label,
        f"{fmt_ms(steady['medianSeconds'])} (of {steady['cycles']}: "
        f"{fmt_ms(steady['minSeconds'])}..{fmt_ms(steady['maxSeconds'])})",
    )
    table.add_row("  snapshot build (median)", fmt_ms(steady["snapshotMedianSeconds"]))
    table.add_row("  by action (median)", fmt_actions(steady["actionMedianSeconds"]))
    table.add_row(
        "decisions after the first cycle",
        f"{later['binds']:,} bind, {later['pipelines']:,} pipeline, {later['evictions']:,} evict "
        f"in {later['cycles']} cycles",
    )
    table.add_row("pods still pending", f"{memory['pendingAtEnd']:,}")
    table.add_row("GC time, all cycles", f"{fmt_s(memory['gcSeconds'])} ({memory['gcCollections']:,} runs)")
    if memory["stoppedAtBudget"]:
        table.add_row("stopped at the time budget", f"after {memory['cycles']} cycles")
    table.add_row("cycle times", fmt_cycles(memory["cycleSeconds"]))
    yaml_path = report.get("yaml")
    if yaml_path:
        table.add_section()
        table.add_row(
            "YAML: size", f"{yaml_path['bytes'] / 2**20:,.1f} MiB ({yaml_path['objects']:,} objects)"
        )
        table.add_row("YAML: load (parse + validate)", fmt_s(yaml_path["loadSeconds"]))
        table.add_row(f"YAML: simulate {yaml_path['cycles']} cycle(s)", fmt_s(yaml_path["simulateSeconds"]))
        table.add_row("YAML: load + simulate", fmt_s(yaml_path["loadAndSimulateSeconds"]))
        cli = yaml_path.get("cli")
        if cli:
            table.add_row("CLI process: simulate --output json", cli.get("error") or fmt_s(cli["seconds"]))
    table.add_section()
    table.add_row(
        f"goal: >= {GOAL_PODS_PER_SECOND:,.0f} pods/s",
        "[green]yes[/green]" if report["goal"]["met"] else "[red]no[/red]",
    )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write-yaml", metavar="DIR", help="write the workload as YAML to DIR and exit")
    parser.add_argument("--seed", type=int, default=SEED, help=f"workload seed (default {SEED})")
    parser.add_argument("--no-yaml", action="store_true", help="skip the YAML end-to-end figure")
    parser.add_argument("--yaml-cycles", type=int, default=1, help="cycles for the YAML figure (default 1)")
    parser.add_argument("--cli", action="store_true", help="also time `kai-scheduler simulate` as a process")
    instrument.add_run_options(parser, cycles=15, quiet=3, budget=90.0, out=RESULTS / "latest.json")
    args = parser.parse_args(argv)
    console = Console(width=120)
    host = instrument.machine()

    started = time.perf_counter()
    docs = workload_docs(args.seed)
    generate_seconds = time.perf_counter() - started

    if args.write_yaml:
        files = write_yaml(docs, Path(args.write_yaml))
        console.print(f"wrote {len(docs):,} objects to {', '.join(str(f) for f in files)}")
        console.print(f"run it with: .venv/bin/kai-scheduler simulate {args.write_yaml} --cycles 2")
        return 0

    started = time.perf_counter()
    objects = to_objects(docs)
    validate_seconds = time.perf_counter() - started

    if args.profile is not None:
        instrument.print_profile(console, objects, args.profile, RESULTS, args.top, "cycle")
        return 0

    workload = describe_workload(docs, args.seed)
    console.print(
        f"workload: seed {args.seed}, {workload['pendingPods']:,} pods, "
        f"generated in {generate_seconds:.1f}s, validated in {validate_seconds:.1f}s; "
        f"running in memory until {args.quiet} quiet cycles (at most {args.cycles}) ..."
    )
    in_memory = run_in_memory(objects, args.cycles, args.budget or None, args.quiet)
    del objects
    gc.collect()
    report: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": host,
        "workload": workload,
        "setup": {"generateSeconds": generate_seconds, "validateSeconds": validate_seconds},
        "inMemory": in_memory,
        "goal": {
            "podsPerSecond": GOAL_PODS_PER_SECOND,
            "met": (in_memory["firstCycle"]["podsPerSecond"] or 0) >= GOAL_PODS_PER_SECOND,
        },
    }
    if not args.no_yaml:
        console.print(f"YAML path: write, load, simulate {args.yaml_cycles} cycle(s) ...")
        report["yaml"] = run_yaml(docs, args.yaml_cycles, args.cli)
    render(report, console)
    instrument.finish(report, args.out, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
