"""The result document of `simulate --output json` (see the simulate contract), built from the final state.

Units: cpu in cores, memory in bytes, gpu in GPU units, times in simulated seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kai_scheduler.api.constants import SCHEDULER_NAME
from kai_scheduler.api.objects import AllocationResult, ResourceClaim
from kai_scheduler.api.reasons import code_of
from kai_scheduler.controlplane.status import Numbers, PodFacts, pod_group_numbers, queue_numbers
from kai_scheduler.framework.decisions import ClaimAllocation
from kai_scheduler.model.accounted import queue_report
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.resources import PodRequest, Resources
from kai_scheduler.model.snapshot import ClusterSnapshot
from kai_scheduler.sim.engine import SimulationResult
from kai_scheduler.sim.in_memory_cluster import SimPod

PHASES = ("Running", "Pending", "Succeeded", "Failed")


def final_snapshot(result: SimulationResult) -> ClusterSnapshot:
    """The cluster after the last cycle's effects."""
    return result.cluster.cache.snapshot()


def resources_json(resources: Resources | tuple[float, float, float]) -> dict[str, float]:
    gpu, cpu, memory = resources.values() if isinstance(resources, Resources) else resources
    return {"gpu": _clean(gpu), "cpu": _clean(cpu / 1000.0), "memory": _clean(memory)}


def _clean(value: float) -> float:
    """Round away float noise (0.30000000000000004) without hiding real fractions."""
    rounded = round(value, 9)
    return 0.0 if rounded == 0 else rounded


def result_document(
    result: SimulationResult, estimates: Mapping[str, float | None] | None = None
) -> dict[str, Any]:
    """The document; with `estimates` (`sim.estimates.start_estimates`, as `simulate` passes them), each
    pod group's `estimatedStart`."""
    snapshot = final_snapshot(result)
    cluster = result.cluster
    ours, others = _our_pods(result, snapshot)
    numbers = _status_numbers(result, snapshot, ours)
    # A list of Python floats: indexing the array gave a numpy scalar per pod.
    gpu_memory = snapshot.nodes.gpu_memory_mib.tolist()
    min_gpu_memory = snapshot.min_gpu_memory_mib
    claims = list(cluster.claims.claims.values())
    pods = []
    phases = dict.fromkeys(PHASES, 0)
    gpu_allocated = 0.0
    gpu_by_node: dict[str, float] = {}
    for sim_pod, key, job_key, task in ours:
        job = snapshot.jobs.get(job_key)
        running = sim_pod.phase == "Running" and sim_pod.node is not None
        gpu = 0.0
        if task is not None:
            node_memory = float(gpu_memory[task.node]) if task.node >= 0 else None
            gpu = task.request.queue_gpus(node_memory, min_gpu_memory)
        if running:
            gpu_allocated += gpu
            if sim_pod.node is not None:
                gpu_by_node[sim_pod.node] = gpu_by_node.get(sim_pod.node, 0.0) + gpu
        phases[sim_pod.phase] = phases.get(sim_pod.phase, 0) + 1
        entry: dict[str, Any] = {
            "namespace": sim_pod.pod.namespace,
            "name": sim_pod.pod.metadata.name,
            "podGroup": job_key,
            "queue": job.queue if job else None,
            "phase": sim_pod.phase,
            # A pod that ended keeps the node it ran on (a pending one has none).
            "node": sim_pod.node if running or sim_pod.phase in ("Succeeded", "Failed") else None,
            "gpuGroups": list(sim_pod.gpu_groups) if running else [],
            "gpu": _clean(gpu),
            "scheduledAt": sim_pod.scheduled_at,
            "evictions": sim_pod.evictions,
        }
        if job and job.stray and key in job.stray:
            # A pod naming a sub-group its PodGroup does not have: left out of its job, as KAI does.
            entry["unschedulableReason"] = job.stray[key]
        pods.append(entry)
    shards = _Shards(result) if result.shards is not None else None
    group_keys, groups = _pod_groups(result, snapshot, numbers, shards)
    _add_estimates(group_keys, groups, estimates)
    _add_reservations(result, group_keys, groups)
    document = {
        "summary": {
            "cycles": len(result.cycles),
            "time": result.time,
            "steady": result.steady,
            # (Only with a run that went on after it was steady: --until or --cycles past that point.)
            **({"steadySince": result.steady_since} if _steady_before_end(result) else {}),
            "pods": phases,
            "gpu": {"capacity": _clean(snapshot.nodes.gpu_units()), "allocated": _clean(gpu_allocated)},
            # Only where the input has pods for other schedulers, as `otherSchedulerPods` below.
            **({"otherSchedulers": len(others)} if others else {}),
        },
        "pods": pods,
        **({"otherSchedulerPods": others} if others else {}),
        "podGroups": groups,
        "queues": _queues(result, snapshot, numbers, shards),
        "decisions": [
            {
                "cycle": record.cycle,
                "time": record.time,
                "action": d.action,
                "type": d.type,
                "pod": d.pod,
                "node": d.node,
                "gpuGroups": list(d.gpu_groups),
                "reason": d.reason,
                **({"for": d.for_job} if d.for_job else {}),
                **({"resourceClaims": [_claim_allocation(a) for a in d.claims]} if d.claims else {}),
            }
            for record in result.cycles
            for d in record.decisions
        ],
        # Only where queue admission gating removed a gate: the document of any other input is as it was.
        **({"ungates": ungates} if (ungates := _ungates(result)) else {}),
        # Only where the configuration reserves capacity (the `reservation` plugin), as each pod group's
        # `reservation`: the document of any other configuration is as it was.
        **({"backfilled": _backfilled(result)} if result.reserving else {}),
        "cycleSeconds": [record.seconds for record in result.cycles],
        # Only where there are DRA claims: the document of any other input is as it always was.
        **({"resourceClaims": [_claim(claim) for claim in claims]} if claims else {}),
    }
    if shards is not None:
        # Only where the cluster is partitioned: the document of any other input is as it always was.
        document["shards"] = shards.summaries(snapshot, gpu_by_node)
    return document


def _ungates(result: SimulationResult) -> list[dict[str, Any]]:
    return [
        {
            "cycle": record.cycle,
            "time": record.time,
            "podGroup": ungating.job,
            "queue": ungating.queue,
            "pods": list(ungating.pods),
            "reason": ungating.reason,
        }
        for record in result.cycles
        for ungating in record.ungates
    ]


class _Shards:
    """Which shard holds each node, queue and job (see `model.partition`)."""

    def __init__(self, result: SimulationResult) -> None:
        assert result.shards is not None
        self.partitions: dict[str, Partition] = result.shards
        cluster = result.cluster
        key = next(iter(self.partitions.values())).label_key
        self.label_key = key
        self.node_shard = {n.metadata.name: self.shard_of(n.metadata.labels) for n in cluster.nodes}
        self.queue_shard = {q.metadata.name: self.shard_of(q.metadata.labels) for q in cluster.queues}
        # A job's pool is its PodGroup's label; a pod without a PodGroup speaks for itself.
        self.job_labels: dict[str, dict[str, str]] = {
            pg.key: pg.metadata.labels for pg, _, _ in cluster.pod_groups
        }
        for sim_pod in cluster.pods:
            self.job_labels.setdefault(sim_pod.job_key, sim_pod.pod.metadata.labels)

    def shard_of(self, labels: dict[str, str]) -> str | None:
        return next((name for name, p in self.partitions.items() if p.holds(labels)), None)

    def job_shard(self, job: str) -> str | None:
        return self.shard_of(self.job_labels.get(job, {}))

    def unserved(self, job: str) -> str:
        """Why a job no shard holds waits."""
        pool = self.job_labels.get(job, {}).get(self.label_key)
        which = f"node pool {pool!r}" if pool else "the default node pool (no node-pool label)"
        return f"no scheduling shard serves {which}"

    def summaries(self, snapshot: ClusterSnapshot, gpu_by_node: dict[str, float]) -> list[dict[str, Any]]:
        nodes = snapshot.nodes
        out = []
        for name, partition in self.partitions.items():
            mine = [node for node, shard in self.node_shard.items() if shard == name]
            among = np.zeros(nodes.size, dtype=np.bool_)
            among[[nodes.index[node] for node in mine if node in nodes.index]] = True
            capacity = nodes.gpu_units(among)
            out.append(
                {
                    "name": name,
                    "nodePool": partition.pool,
                    "nodes": len(mine),
                    "queues": [queue for queue, shard in self.queue_shard.items() if shard == name],
                    "gpu": {
                        "capacity": _clean(capacity),
                        "allocated": _clean(sum(gpu_by_node.get(node, 0.0) for node in mine)),
                    },
                }
            )
        return out


def _other_scheduler_pod(sim_pod: SimPod) -> dict[str, Any]:
    """A pod left to another scheduler: where it is (a bound one holds its node's resources; an unbound one
    is never placed here)."""
    return {
        "namespace": sim_pod.pod.namespace,
        "name": sim_pod.pod.metadata.name,
        "schedulerName": sim_pod.pod.spec.scheduler_name,
        "phase": sim_pod.phase,
        "node": sim_pod.node,
    }


def _devices(allocation: AllocationResult | None) -> list[dict[str, str]]:
    if allocation is None:
        return []
    return [
        {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        for r in allocation.devices.results
    ]


def _claim_allocation(allocation: ClaimAllocation) -> dict[str, Any]:
    """A bind decision's claim: the pod's name for it, the ResourceClaim, the devices it gets."""
    return {"name": allocation.name, "claim": allocation.claim, "devices": _devices(allocation.allocation)}


def _claim(claim: ResourceClaim) -> dict[str, Any]:
    """A ResourceClaim as the run leaves it: its devices (none: unallocated) and the pods it is reserved
    for."""
    return {
        "namespace": claim.namespace,
        "name": claim.metadata.name,
        "allocated": claim.status.allocation is not None,
        "devices": _devices(claim.status.allocation),
        "reservedFor": [r.name for r in claim.status.reserved_for if r.resource == "pods"],
    }


_OurPod = tuple[SimPod, str, str, TaskInfo | None]
"""A pod of this scheduler, its key, its job's key and its task in the final snapshot (None: none)."""


def _our_pods(
    result: SimulationResult, snapshot: ClusterSnapshot
) -> tuple[list[_OurPod], list[dict[str, Any]]]:
    """The arrived pods of this scheduler, each with what both the pods and their PodGroups' numbers read
    (found once per pod), and the other schedulers' pods as the document lists them."""
    tasks = snapshot.tasks
    ours: list[_OurPod] = []
    others = []
    for sim_pod in result.cluster.arrived_pods():
        if sim_pod.pod.spec.scheduler_name != SCHEDULER_NAME:
            others.append(_other_scheduler_pod(sim_pod))
            continue
        key = sim_pod.key
        ours.append((sim_pod, key, sim_pod.job_key, tasks.get(key)))
    return ours, others


_Facts = tuple[str, bool, float, PodRequest]
"""A pod's phase, whether it is bound, its node's GPU memory and its request: its `PodFacts`."""


def _status_numbers(
    result: SimulationResult, snapshot: ClusterSnapshot, ours: list[_OurPod]
) -> dict[str, Numbers]:
    """Each job's PodGroup status numbers (`controlplane.status`, as live mode writes them), by job key.

    Most jobs of a large cluster are one bare pod's, and most of those pods alike (the same phase, node
    memory and request object), so a one-pod job's numbers are worked out once per kind of pod and the
    jobs of that kind share them (the document only reads them)."""
    nodes = snapshot.nodes
    node_index = nodes.index
    gpu_memory = nodes.gpu_memory_mib.tolist()
    derivations = result.cluster.cache.derivations
    min_memory = snapshot.min_gpu_memory_mib
    facts: dict[str, list[_Facts]] = {}
    for sim_pod, _, job_key, task in ours:
        node = node_index.get(sim_pod.node) if sim_pod.node is not None else None
        memory = float(gpu_memory[node]) if node is not None else 0.0
        # The task's request has what the pod's DRA claims ask for; a pod without a task has no claims
        # that could count (it is not scheduled).
        request = task.request if task is not None else derivations.of(sim_pod.pod)[0]
        pod = (sim_pod.phase, node is not None, memory, request)
        pods = facts.get(job_key)
        if pods is None:
            facts[job_key] = [pod]
        else:
            pods.append(pod)
    # (The request itself is in the kind's key by identity, and kept alive by its entry's facts.)
    kinds: dict[tuple[str, bool, float, int, bool], tuple[Numbers, _Facts]] = {}
    numbers = {}
    for key, job in snapshot.jobs.items():
        pods = facts.get(key, [])
        if len(pods) != 1:
            numbers[key] = _job_numbers(pods, job.preemptible, min_memory)
            continue
        (pod,) = pods
        kind = (pod[0], pod[1], pod[2], id(pod[3]), job.preemptible)
        known = kinds.get(kind)
        if known is None:
            known = kinds[kind] = (_job_numbers(pods, job.preemptible, min_memory), pod)
        numbers[key] = known[0]
    return numbers


def _job_numbers(pods: list[_Facts], preemptible: bool, min_gpu_memory_mib: float) -> Numbers:
    return pod_group_numbers(
        [PodFacts(*pod) for pod in pods], preemptible=preemptible, min_gpu_memory_mib=min_gpu_memory_mib
    )


def _pod_groups(
    result: SimulationResult, snapshot: ClusterSnapshot, numbers: dict[str, Numbers], shards: _Shards | None
) -> tuple[list[str], list[dict[str, Any]]]:
    """The document's pod groups, and their keys in the same order."""
    keys = []
    groups = []
    reasons = result.reasons
    for key, job in snapshot.jobs.items():
        counts = numbers[key]
        pending = counts.pending
        reason = reasons.get(key) if pending else None
        shard = shards.job_shard(key) if shards is not None else None
        if pending and reason is None and shards is not None and shard is None:
            reason = shards.unserved(key)
        if pending and reason is None and job.invalid_reason:
            reason = job.invalid_reason
        group: dict[str, Any] = {
            "namespace": job.namespace,
            "name": job.name,
            "queue": job.queue,
            "minMember": job.min_member,
            "running": counts.running,
            "pending": pending,
            "unschedulableReason": reason,
        }
        if reason:
            # KAI's code for it, from the core (OverLimit, QueueDoesNotExist, ...; else Unschedulable).
            group["unschedulableCode"] = code_of(reason)
        if shards is not None:
            group["shard"] = shard
        keys.append(key)
        groups.append(group)
    for key, group in _backed_off_groups(result, shards):
        keys.append(key)
        groups.append(group)
    return keys, groups


def _add_estimates(
    keys: list[str], groups: list[dict[str, Any]], estimates: Mapping[str, float | None] | None
) -> None:
    """Each group's `estimatedStart` (`keys`: the groups' keys): the look-ahead's estimate for one that
    waits to start when the run ends, its actual start for one that started; null when neither is known."""
    if estimates is None:
        return
    for key, group in zip(keys, groups, strict=True):
        group["estimatedStart"] = estimates.get(key)


def _add_reservations(result: SimulationResult, keys: list[str], groups: list[dict[str, Any]]) -> None:
    """With the `reservation` plugin configured, each group's `reservation` as the run leaves it: the nodes
    held for it, their GPUs and when it is expected to start there (simulated seconds, as `estimatedStart`);
    null when it holds none."""
    if not result.reserving:
        return
    times = result.cluster.cache.job_times
    for key, group in zip(keys, groups, strict=True):
        held = times.get(key)
        reservation = held.reservation if held is not None else None
        group["reservation"] = (
            None
            if reservation is None
            else {
                "nodes": list(reservation.nodes),
                "gpus": _clean(reservation.gpus),
                "expectedStart": _clean(reservation.start),
            }
        )


def _backfilled(result: SimulationResult) -> list[dict[str, Any]]:
    """The jobs each cycle placed on reserved capacity because they were expected to end before the
    reservation started, in order."""
    return [
        {"cycle": record.cycle, "time": record.time, "podGroup": job}
        for record in result.cycles
        for job in record.backfilled
    ]


def _backed_off_groups(result: SimulationResult, shards: _Shards | None) -> list[tuple[str, dict[str, Any]]]:
    """The PodGroups their `schedulingBackoff` took out of scheduling (no session sees them), with their
    keys: their pods and the scheduling condition written on them."""
    backed_off = result.cluster.cache.backed_off
    if not backed_off:
        return []
    phases: dict[str, list[str]] = {}
    for sim_pod in result.cluster.arrived_pods():
        if sim_pod.job_key in backed_off:
            phases.setdefault(sim_pod.job_key, []).append(sim_pod.phase)
    groups = []
    for key, state in sorted(backed_off.items(), key=lambda item: item[1].rank):
        group = state.pod_group
        pods = phases.get(key, [])
        entry: dict[str, Any] = {
            "namespace": group.namespace,
            "name": group.metadata.name,
            "queue": group.spec.queue,
            "minMember": group.spec.gang_min_member,
            "running": pods.count("Running"),
            "pending": pods.count("Pending"),
            "unschedulableReason": result.cluster.conditions.get(key),
        }
        if key in result.cluster.conditions:
            entry["unschedulableCode"] = code_of(result.cluster.conditions[key])
        if shards is not None:
            entry["shard"] = shards.job_shard(key)
        groups.append((key, entry))
    return groups


def _queues(
    result: SimulationResult, snapshot: ClusterSnapshot, numbers: dict[str, Numbers], shards: _Shards | None
) -> list[dict[str, Any]]:
    parents = {queue.name: queue.parent for queue in snapshot.queues}
    totals = queue_numbers(parents, ((snapshot.jobs[key].queue, n) for key, n in numbers.items()))
    accounted = queue_report(snapshot)
    queues = []
    for queue in result.cluster.queues:
        name = queue.metadata.name
        total = totals.get(name, Numbers())
        entry: dict[str, Any] = {
            "name": name,
            "parent": queue.spec.parent_queue or None,
            "fairShare": resources_json(result.fair_share.get(name, (0.0, 0.0, 0.0))),
            "allocated": resources_json(total.allocated),
            "requested": resources_json(total.requested),
        }
        if shards is not None:
            entry["shard"] = shards.queue_shard.get(name)
        if name in accounted:
            # Only where there are AccountedResources: the document of any other input is as it was.
            entry["accountedResources"] = {
                resource: {"used": _clean(used), "limit": limit}
                for resource, (used, limit) in accounted[name].items()
            }
        queues.append(entry)
    return queues


def _steady_before_end(result: SimulationResult) -> bool:
    return result.steady_since is not None and result.steady_since < result.time - 1e-9
