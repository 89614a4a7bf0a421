"""Topology benchmark: gangs that must (or would rather) stay in one rack or zone, with and without the
topology plugin.

`make bench` runs this file after `run.py` and `reclaim.py`. It builds, in memory and deterministically
(fixed by SEED below):

* 1,000 nodes (`node-0000`..`node-0999`) x 8 GPUs, cpu 128, memory 1Ti, as in `run.py`, labelled into
  10 zones (`topology.kubernetes.io/zone`: zone-a..zone-j) x 25 racks (`example.com/rack`: rack-00..rack-24,
  the same values in every zone: the topology tree joins them as zone.rack) x 4 nodes;
* one Topology `dc` (`kai.scheduler/v1alpha1`) with the levels zone, rack (widest first);
* 4 team queues, GPU quotas adding up to the cluster (8,000 GPUs), CPU and memory not rationed;
* running filler pods (priorityClassName `inference`, non-preemptible, bound with `spec.nodeName`): about
  a third of the nodes run one of 2, 4 or 6 GPUs (1,400 GPUs with the default seed), so most racks are
  partly used (42 of the 250 are whole);
* a seeded mix of pending jobs (priorityClassName `train`), GPU demand 1.2x the cluster in these shares:
  - rack gangs: `topologyConstraint {topology: dc, requiredTopologyLevel: example.com/rack}`, 2-4 pods x
    8 GPUs or 4-8 pods x 4 GPUs (at most 32 GPUs: a 4-node rack);
  - zone gangs: `requiredTopologyLevel: topology.kubernetes.io/zone`, `preferredTopologyLevel:
    example.com/rack`; most of rack size (as above), some of 8, 12 or 16 pods x 8 GPUs that no rack holds;
  - unconstrained jobs: the same rack-sized gangs without a constraint, and single pods of 1/2/4/8 GPUs.

The same workload runs twice (`Simulation(...).run()`, period 1 s), each until --quiet (3) cycles in a
row decided nothing, at most --cycles (15) cycles or --budget (25) wall seconds: once with the default
configuration, and once, as a control, with the `topology` plugin removed from it (the constraints are
then ignored). For each it reports:

* the first cycle's wall time (snapshot build + session, the simulator's `cycleSeconds`), the pods placed
  (bound or pipelined) in it and the placement rate (pods / second);
* the steady cycle time: the median of the decision-free cycles the run ended with;
* placement quality at the end, over the gangs whose pods all run: the share of rack gangs in one rack
  (with the plugin it must be 100%), of zone gangs in one zone (must be 100%) and of the rack-sized zone
  gangs in one rack (the preferred level: as many as possible), the racks the larger zone gangs span, and,
  as a baseline, the share of unconstrained rack-sized gangs that binpack happened to put in one rack;
* GPU utilisation at the end, the pods still pending, and the constrained gangs still pending, with how
  many of them wait for a reason that names the topology (unconstrained gangs whose reason names the
  topology are counted too: the scheduler must not hold them back for another job's constraint).

Results are printed as a table, side by side, and written to `benchmarks/results/topology.json`. The goal:
with the plugin, a first-cycle placement rate of at least 1,000 pods/s on the 2-core reference machine and
every rack gang in one rack.

Usage:

    .venv/bin/python benchmarks/topology.py               # the benchmark (what `make bench` runs)
    .venv/bin/python benchmarks/topology.py --no-control  # only the run with the topology plugin
    .venv/bin/python benchmarks/topology.py --profile [N] # cProfile cycle N (default 1) to results/
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from kai_scheduler.api.objects import ApiObject, Topology
from kai_scheduler.framework.config import PluginOption, SchedulerConfig
from kai_scheduler.sim.engine import Simulation

sys.path.insert(0, str(Path(__file__).resolve().parent))
import instrument  # the measured run, profiling, options and report plumbing
import run  # the sibling benchmark: pod documents and models

# --- workload parameters ------------------------------------------------------------------------

SEED = 20260301
"""The one random seed: same seed, same workload, byte for byte."""

ZONES = 10
RACKS_PER_ZONE = 25
NODES_PER_RACK = 4
NODES = ZONES * RACKS_PER_ZONE * NODES_PER_RACK  # 1,000, as run.py
GPUS_PER_NODE = run.GPUS_PER_NODE
GPUS = NODES * GPUS_PER_NODE
RACK_GPUS = NODES_PER_RACK * GPUS_PER_NODE
DEMAND_OVER_CAPACITY = 1.2
GOAL_PODS_PER_SECOND = 1_000.0

TOPOLOGY = "dc"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "example.com/rack"

# Team -> GPU quota; the quotas add up to GPUS. Demand follows quota, with noise.
TEAMS = {"team-a": 2800, "team-b": 2400, "team-c": 1600, "team-d": 1200}

FILLER_NODE_SHARE = 0.35  # of nodes run one filler pod ...
FILLER_GPUS = (2, 4, 6)  # ... of this many GPUs

# Shares of the pending GPU demand, by kind of job.
DEMAND_SHARES = {"rack": 0.35, "zone": 0.30, "free-gang": 0.175, "single": 0.175}
# (pods, GPUs per pod) of a rack-sized gang: at most RACK_GPUS, whole nodes or half nodes.
RACK_SIZED = ((2, 8), (3, 8), (4, 8), (4, 4), (6, 4), (8, 4))
# Zone gangs larger than a rack: pods x 8 GPUs (64..128 GPUs, 2..4 racks).
ZONE_LARGE_PODS = (8, 12, 16)
ZONE_LARGE_SHARE = 0.3  # of zone gangs
SINGLE_GPUS = {1: 0.5, 2: 0.25, 4: 0.15, 8: 0.1}

RESULTS = run.RESULTS

# --- workload -----------------------------------------------------------------------------------


def zone_of(node: int) -> str:
    return f"zone-{chr(ord('a') + node // (RACKS_PER_ZONE * NODES_PER_RACK))}"


def rack_of(node: int) -> str:
    """The rack label's value: unique only within a zone."""
    return f"rack-{node // NODES_PER_RACK % RACKS_PER_ZONE:02d}"


def node_docs() -> list[dict[str, Any]]:
    return [run.node_doc(i, {ZONE_LABEL: zone_of(i), RACK_LABEL: rack_of(i)}) for i in range(NODES)]


def topology_doc() -> dict[str, Any]:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": ZONE_LABEL}, {"nodeLabel": RACK_LABEL}]},
    }


def queue_docs() -> list[dict[str, Any]]:
    return [run.queue_doc(team, quota) for team, quota in TEAMS.items()]


def _team(rng: random.Random) -> str:
    return rng.choices(list(TEAMS), weights=[q * rng.uniform(0.5, 1.5) for q in TEAMS.values()])[0]


def _container(gpus: int) -> dict[str, Any]:
    return run._container(gpus, gpus * 8, gpus * 64)


def filler_docs(rng: random.Random) -> list[dict[str, Any]]:
    """Running, non-preemptible pods on about a third of the nodes."""
    docs = []
    for node in range(NODES):
        if rng.random() >= FILLER_NODE_SHARE:
            continue
        team = _team(rng)
        pod = run._pod(f"filler-{node:04d}", team, "inference", _container(rng.choice(FILLER_GPUS)))
        pod["spec"]["nodeName"] = f"node-{node:04d}"
        pod["status"]["phase"] = "Running"
        docs.append(pod)
    return docs


def _gang(
    name: str, team: str, pods: int, gpus: int, constraint: dict[str, str] | None
) -> list[dict[str, Any]]:
    spec: dict[str, Any] = {"minMember": pods, "queue": team, "priorityClassName": "train"}
    if constraint:
        spec["topologyConstraint"] = {"topology": TOPOLOGY, **constraint}
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": team, "labels": {run.QUEUE_LABEL: team}},
        "spec": spec,
    }
    container = _container(gpus)
    members = [
        run._pod(f"{name}-{i}", team, "train", container, annotations={run.POD_GROUP_ANNOTATION: name})
        for i in range(pods)
    ]
    return [group, *members]


def _jobs(rng: random.Random) -> list[tuple[str, int, int]]:
    """(kind, pods, GPUs per pod) for every pending job, each kind up to its share of the demand."""
    jobs: list[tuple[str, int, int]] = []
    for kind, share in DEMAND_SHARES.items():
        budget = round(share * DEMAND_OVER_CAPACITY * GPUS)
        while budget > 0:
            job_kind = kind
            if kind == "single":
                pods, gpus = 1, rng.choices(list(SINGLE_GPUS), weights=list(SINGLE_GPUS.values()))[0]
            elif kind == "zone" and rng.random() < ZONE_LARGE_SHARE:
                job_kind, pods, gpus = "zone-large", rng.choice(ZONE_LARGE_PODS), 8
            else:
                pods, gpus = rng.choice(RACK_SIZED)
            jobs.append((job_kind, pods, gpus))
            budget -= pods * gpus
    rng.shuffle(jobs)  # creation order interleaves every kind of job
    return jobs


CONSTRAINTS: dict[str, dict[str, str] | None] = {
    "rack": {"requiredTopologyLevel": RACK_LABEL},
    "zone": {"requiredTopologyLevel": ZONE_LABEL, "preferredTopologyLevel": RACK_LABEL},
    "zone-large": {"requiredTopologyLevel": ZONE_LABEL, "preferredTopologyLevel": RACK_LABEL},
    "free-gang": None,
}


def workload_docs(seed: int = SEED) -> list[dict[str, Any]]:
    """Every object as a Kubernetes-style dict, in creation order: nodes, the topology, queues, the
    running fillers, then the pending jobs (each gang's PodGroup before its pods)."""
    rng = random.Random(seed)
    docs = [*node_docs(), topology_doc(), *queue_docs(), *filler_docs(rng)]
    for index, (kind, pods, gpus) in enumerate(_jobs(rng)):
        team = _team(rng)
        if kind == "single":
            docs.append(run._pod(f"single-{index:04d}", team, "train", _container(gpus)))
        else:
            docs.extend(_gang(f"{kind}-{index:04d}", team, pods, gpus, CONSTRAINTS[kind]))
    return docs


_MODELS: dict[str, Callable[[dict[str, Any]], ApiObject]] = {
    **run._MODELS,
    "Topology": Topology.model_validate,
}


def to_objects(docs: list[dict[str, Any]]) -> list[ApiObject]:
    return [_MODELS[doc["kind"]](doc) for doc in docs]


def _gpus(doc: dict[str, Any]) -> int:
    return int(doc["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu", 0))


def describe_workload(docs: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    pods = [d for d in docs if d["kind"] == "Pod"]
    running = [p for p in pods if p["status"]["phase"] == "Running"]
    pending = [p for p in pods if p["status"]["phase"] == "Pending"]
    groups = [d for d in docs if d["kind"] == "PodGroup"]
    gangs = Counter(g["metadata"]["name"].rsplit("-", 1)[0] for g in groups)
    gang_pods = Counter(
        p["metadata"]["annotations"][run.POD_GROUP_ANNOTATION].rsplit("-", 1)[0]
        for p in pending
        if run.POD_GROUP_ANNOTATION in p["metadata"].get("annotations", {})
    )
    filler_gpus = sum(_gpus(p) for p in running)
    per_rack = Counter((zone_of(i), rack_of(i)) for i in range(NODES))
    used_racks = {
        (zone_of(int(p["spec"]["nodeName"][5:])), rack_of(int(p["spec"]["nodeName"][5:]))) for p in running
    }
    pending_gpus = sum(_gpus(p) for p in pending)
    return {
        "seed": seed,
        "nodes": NODES,
        "gpus": GPUS,
        "zones": ZONES,
        "racks": len(per_rack),
        "nodesPerRack": NODES_PER_RACK,
        "queues": len(TEAMS),
        "fillerPods": len(running),
        "fillerGpus": filler_gpus,
        "wholeRacks": len(per_rack) - len(used_racks),
        "pendingPods": len(pending),
        "pendingGpus": pending_gpus,
        "demandOverCapacity": round(pending_gpus / GPUS, 3),
        "gangs": dict(sorted(gangs.items())),
        "gangPods": dict(sorted(gang_pods.items())),
        "singlePods": len(pending) - sum(gang_pods.values()),
    }


# --- configurations -----------------------------------------------------------------------------


def without_plugin(config: SchedulerConfig, name: str) -> SchedulerConfig:
    tiers = tuple(tuple(p for p in tier if p.name != name) for tier in config.tiers)
    return replace(config, tiers=tiers)


def configurations() -> dict[str, SchedulerConfig]:
    default = SchedulerConfig()
    assert default.plugin("topology") == PluginOption("topology"), "the default configuration has topology"
    return {"topology": default, "control": without_plugin(default, "topology")}


# --- measuring ----------------------------------------------------------------------------------


def run_config(
    objects: list[ApiObject],
    config: SchedulerConfig,
    gpus_of: dict[str, int],
    cycles: int,
    budget: float | None,
    quiet: int,
) -> dict[str, Any]:
    """Simulate until `quiet` decision-free cycles in a row, `cycles` cycles or `budget` wall seconds."""
    measured = instrument.measure(objects, config, cycles, budget, quiet)
    decisions, action_times = measured.decisions, measured.action_times
    cycle_seconds = measured.cycle_seconds
    first = decisions[0]
    first_placed = instrument.placed(first)
    tail = instrument.quiet_tail(decisions)
    settled = tail >= max(quiet, 1)
    steady = cycle_seconds[len(cycle_seconds) - tail :] if settled else cycle_seconds[1:]
    deciding = [i for i, d in enumerate(decisions, start=1) if d]
    later = Counter(f"{d.action} {d.type}" for cycle in decisions[1:] for d in cycle)
    summary = {
        "firstCycle": {
            "seconds": cycle_seconds[0],
            "snapshotSeconds": measured.build_times[0],
            "sessionSeconds": measured.session_times[0],
            "actionSeconds": action_times[0],
            "placed": first_placed,
            "pipelines": sum(1 for d in first if d.type == "pipeline"),
            "evictions": sum(1 for d in first if d.type == "evict"),
            "podsPerSecond": first_placed / cycle_seconds[0] if cycle_seconds[0] > 0 else None,
        },
        "steady": {
            "settled": settled,
            "lastDecisionCycle": deciding[-1] if deciding else None,
            "cycles": len(steady),
            "medianSeconds": statistics.median(steady) if steady else None,
            "actionMedianSeconds": {
                name: statistics.median(entry.get(name, 0.0) for entry in action_times[-len(steady) :])
                for name in action_times[0]
            }
            if steady
            else {},
        },
        "afterFirstCycle": dict(sorted(later.items())),
        "cycles": len(decisions),
        "cycleSeconds": cycle_seconds,
        "snapshotSeconds": measured.build_times,
        "actionSeconds": action_times,
        "setupSeconds": measured.setup_seconds,
        "runSeconds": measured.run_seconds,
        "stoppedBy": measured.stopped_by,
        "quietCyclesRequired": quiet,
        "gcSeconds": measured.gc_seconds,
    }
    summary.update(quality(measured.simulation, gpus_of, measured.last))
    return summary


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def quality(simulation: Simulation, gpus_of: dict[str, int], last: Any) -> dict[str, Any]:
    """Where the gangs ended up: per kind, how many run whole, in how many racks and zones."""
    cluster = simulation.cluster
    node_index = {node.metadata.name: i for i, node in enumerate(cluster.nodes)}
    labels = [node.metadata.labels for node in cluster.nodes]
    # Every gang of this workload sets its minMember (a PodGroup without one is a single pod).
    sizes = {group.key: group.spec.min_member or 1 for group, _, _ in cluster.pod_groups}
    nodes_of: dict[str, list[int]] = {key: [] for key in sizes}
    used_gpus = 0
    pending_pods = 0
    for pod in cluster.pods:
        if pod.phase == "Running" and pod.node is not None:
            used_gpus += gpus_of[pod.key]
            if pod.job_key in nodes_of:
                nodes_of[pod.job_key].append(node_index[pod.node])
        elif pod.phase == "Pending":
            pending_pods += 1
    reasons = last.unschedulable if last is not None else {}
    kinds: dict[str, dict[str, Any]] = {}
    for key, size in sizes.items():
        kind = key.split("/", 1)[1].rsplit("-", 1)[0]
        entry = kinds.setdefault(
            kind,
            {"gangs": 0, "running": 0, "oneRack": 0, "oneZone": 0, "racksSpanned": 0, "minimumRacks": 0}
            | {"pending": 0, "pendingTopologyReason": 0, "topologyReasonExamples": []},
        )
        entry["gangs"] += 1
        placed = nodes_of[key]
        if len(placed) >= size:
            racks = {(labels[n][ZONE_LABEL], labels[n][RACK_LABEL]) for n in placed}
            entry["running"] += 1
            entry["oneRack"] += len(racks) == 1
            entry["oneZone"] += len({zone for zone, _ in racks}) == 1
            entry["racksSpanned"] += len(racks)
            entry["minimumRacks"] += -(-size * gpus_of[f"{key}-0"] // RACK_GPUS)
        else:
            entry["pending"] += 1
            reason = reasons.get(key, "")
            if "topology" in reason:
                entry["pendingTopologyReason"] += 1
                if len(entry["topologyReasonExamples"]) < 2:
                    entry["topologyReasonExamples"].append(f"{key}: {reason}")
    for entry in kinds.values():
        entry["oneRackShare"] = _share(entry["oneRack"], entry["running"])
        entry["oneZoneShare"] = _share(entry["oneZone"], entry["running"])
    return {
        "gangsByKind": dict(sorted(kinds.items())),
        "gpuUtilisation": used_gpus / GPUS,
        "usedGpus": used_gpus,
        "pendingPodsAtEnd": pending_pods,
    }


# --- reporting ----------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _value(result: dict[str, Any], row: str) -> str:
    first, steady, kinds = result["firstCycle"], result["steady"], result["gangsByKind"]
    rack, zone, large, free = (kinds.get(k, {}) for k in ("rack", "zone", "zone-large", "free-gang"))
    if row == "first cycle wall time":
        return f"{instrument.fmt_s(first['seconds'])} (snapshot {instrument.fmt_s(first['snapshotSeconds'])})"
    if row == "  by action":
        return instrument.fmt_actions(first["actionSeconds"])
    if row == "pods placed in first cycle":
        return f"{first['placed']:,} ({first['pipelines']:,} pipelined)"
    if row == "placement rate":
        rate = first["podsPerSecond"]
        return "n/a" if rate is None else f"{rate:,.0f} pods/s"
    if row == "settled":
        if steady["settled"]:
            return f"after cycle {steady['lastDecisionCycle']}, then {steady['cycles']} quiet"
        return f"[red]NO[/red] (stopped by the {result['stoppedBy']} after {result['cycles']} cycles)"
    if row == "steady cycle time (median)":
        label = "" if steady["settled"] else " (NOT settled)"
        return f"{instrument.fmt_ms(steady['medianSeconds'])}{label}"
    if row == "  by action (median)":
        return instrument.fmt_actions(steady["actionMedianSeconds"])
    if row == "decisions after the first cycle":
        return ", ".join(f"{n:,} {k}" for k, n in result["afterFirstCycle"].items()) or "none"
    if row == "cycle times":
        return instrument.fmt_cycles(result["cycleSeconds"])
    if row == "rack gangs (required rack): in one rack":
        return f"{_pct(rack.get('oneRackShare'))} of {rack.get('running', 0)} running"
    if row == "zone gangs: in one zone":
        running = zone.get("running", 0) + large.get("running", 0)
        one = zone.get("oneZone", 0) + large.get("oneZone", 0)
        return f"{_pct(_share(one, running))} of {running} running"
    if row == "  rack-sized: in one rack (preferred)":
        return f"{_pct(zone.get('oneRackShare'))} of {zone.get('running', 0)}"
    if row == "  larger: racks spanned (minimum)":
        return (
            f"{large.get('racksSpanned', 0)} ({large.get('minimumRacks', 0)}) for {large.get('running', 0)}"
        )
    if row == "unconstrained rack-sized gangs: in one rack":
        return f"{_pct(free.get('oneRackShare'))} of {free.get('running', 0)} running"
    if row == "GPU utilisation at end":
        return f"{result['gpuUtilisation']:.1%} ({result['usedGpus']:,} GPUs)"
    if row == "pods pending at end":
        return f"{result['pendingPodsAtEnd']:,}"
    if row == "constrained gangs pending (topology reason)":
        pending = sum(kinds.get(k, {}).get("pending", 0) for k in ("rack", "zone", "zone-large"))
        topo = sum(kinds.get(k, {}).get("pendingTopologyReason", 0) for k in ("rack", "zone", "zone-large"))
        gangs = sum(kinds.get(k, {}).get("gangs", 0) for k in ("rack", "zone", "zone-large"))
        return f"{pending} of {gangs} ({topo})"
    if row == "unconstrained gangs pending (topology reason)":
        return f"{free.get('pending', 0)} of {free.get('gangs', 0)} ({free.get('pendingTopologyReason', 0)})"
    raise KeyError(row)


SECTIONS = (
    (
        "first cycle wall time",
        "  by action",
        "pods placed in first cycle",
        "placement rate",
    ),
    (
        "settled",
        "steady cycle time (median)",
        "  by action (median)",
        "decisions after the first cycle",
        "cycle times",
    ),
    (
        "rack gangs (required rack): in one rack",
        "zone gangs: in one zone",
        "  rack-sized: in one rack (preferred)",
        "  larger: racks spanned (minimum)",
        "unconstrained rack-sized gangs: in one rack",
    ),
    (
        "GPU utilisation at end",
        "pods pending at end",
        "constrained gangs pending (topology reason)",
        "unconstrained gangs pending (topology reason)",
        instrument.STOPPED_BY,
    ),
)
COLUMNS = {"topology": "with topology", "control": "without the topology plugin"}


def render(report: dict[str, Any], console: Console) -> None:
    workload, runs = report["workload"], report["runs"]
    gangs = ", ".join(f"{n} {k}" for k, n in workload["gangs"].items())
    title = (
        f"kai-scheduler topology benchmark: {workload['nodes']:,} nodes x {GPUS_PER_NODE} GPUs in "
        f"{workload['zones']} zones x {workload['racks'] // workload['zones']} racks x "
        f"{workload['nodesPerRack']} nodes ({workload['wholeRacks']} racks whole, {workload['fillerGpus']:,} "
        f"GPUs of filler); {workload['pendingPods']:,} pending pods, {workload['demandOverCapacity']:.2f}x "
        f"the GPUs ({gangs}, {workload['singlePods']} single pods)"
    )
    headers = [COLUMNS[name] for name in runs]
    table = instrument.side_by_side(title, headers, SECTIONS, _value, list(runs.values()))
    goal = report["goal"]
    table.add_row(
        f"goal: >= {GOAL_PODS_PER_SECOND:,.0f} pods/s with topology, every rack gang in one rack",
        "[green]yes[/green]" if goal["met"] else "[red]no[/red]",
        *["" for _ in list(runs)[1:]],
    )
    console.print(table)
    for name, result in runs.items():
        for kind, entry in result["gangsByKind"].items():
            for example in entry["topologyReasonExamples"][:1]:
                # An unconstrained gang should never wait because of a topology.
                style = "yellow" if kind == "free-gang" else "default"
                console.print(
                    f"{COLUMNS[name]}, a pending {kind} gang: {example}", style=style, highlight=False
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=SEED, help=f"workload seed (default {SEED})")
    parser.add_argument("--no-control", action="store_true", help="skip the run without the topology plugin")
    instrument.add_run_options(
        parser, cycles=15, quiet=3, budget=25.0, out=RESULTS / "topology.json", each=" per run"
    )
    args = parser.parse_args(argv)
    console = Console(width=140)
    host = instrument.machine()

    started = time.perf_counter()
    docs = workload_docs(args.seed)
    objects = to_objects(docs)
    setup_seconds = time.perf_counter() - started
    workload = describe_workload(docs, args.seed)

    if args.profile is not None:
        instrument.print_profile(console, objects, args.profile, RESULTS, args.top, "topology-cycle")
        return 0

    gpus_of = {
        f"{d['metadata']['namespace']}/{d['metadata']['name']}": _gpus(d) for d in docs if d["kind"] == "Pod"
    }
    del docs
    configs = configurations()
    if args.no_control:
        del configs["control"]
    console.print(
        f"workload: seed {args.seed}, {workload['pendingPods']:,} pending pods, {workload['fillerPods']} "
        f"filler pods, built and validated in {setup_seconds:.1f}s; running {', '.join(configs)} until "
        f"{args.quiet} quiet cycles (at most {args.cycles}) ..."
    )
    runs: dict[str, Any] = {}
    for name, config in configs.items():
        runs[name] = run_config(objects, config, gpus_of, args.cycles, args.budget or None, args.quiet)
        gc.collect()
    del objects
    with_topology = runs["topology"]
    rack = with_topology["gangsByKind"].get("rack", {})
    report: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": host,
        "workload": workload,
        "setupSeconds": setup_seconds,
        "runs": runs,
        "goal": {
            "podsPerSecond": GOAL_PODS_PER_SECOND,
            "met": (with_topology["firstCycle"]["podsPerSecond"] or 0) >= GOAL_PODS_PER_SECOND
            and rack.get("oneRackShare") == 1.0,
        },
    }
    render(report, console)
    instrument.finish(report, args.out, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
