"""What a cycle leaves behind, as the numbers a dashboard shows: the jobs that wait, by queue and KAI's
reason code, and the cluster's GPUs, how many are allocated and where the idle ones are.

Both read the session's snapshot after the cycle, so they include its own decisions (a pod bound in the
cycle holds its GPUs; a pod pipelined onto GPUs being released holds them too, as it takes them over).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kai_scheduler.api.reasons import code_of
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.snapshot import ClusterSnapshot

# Where idle GPUs are, the `placement` label of `kai_cluster_idle_gpus`: on a node none of whose GPUs is
# in use, as whole GPUs on a node that has some in use, or as the unused part of a shared GPU. The last two
# are the fragmented ones: the first serve no pod that wants a whole node, the second no pod that wants a
# whole GPU.
IDLE_NODE = "idle_node"
PARTIAL_NODE = "partial_node"
SHARED_GPU = "shared_gpu"
IDLE_PLACEMENTS = (IDLE_NODE, PARTIAL_NODE, SHARED_GPU)


@dataclass(frozen=True, slots=True)
class Waiting:
    pod_groups: int
    pods: int


def waiting_by_queue(
    snapshot: ClusterSnapshot, unschedulable: Mapping[str, str]
) -> dict[tuple[str, str], Waiting]:
    """(queue, reason code) -> the pod groups that end the cycle unschedulable and their pending pods
    (gated ones included: they wait as well)."""
    counts: dict[tuple[str, str], list[int]] = {}
    jobs = snapshot.jobs
    for job_key, reason in unschedulable.items():
        job = jobs.get(job_key)
        if job is None:
            continue
        key = (job.queue, code_of(reason))
        count = counts.get(key)
        if count is None:
            count = counts[key] = [0, 0]
        count[0] += 1
        # The job's tally (cached across the actions' questions) has its pending pods already counted.
        count[1] += job.tally().pending + job.gated
    return {key: Waiting(groups, pods) for key, (groups, pods) in counts.items()}


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    capacity: float  # whole GPUs of every node (device-plugin GPUs and DRA GPUs)
    allocated: float  # whole GPUs held plus the held portions of shared GPUs
    shared: int  # physical GPUs shared by fractional pods
    idle: dict[str, float]  # placement -> idle GPUs (IDLE_PLACEMENTS)


def gpu_allocation(nodes: NodeTable) -> GpuAllocation:
    """Numpy over the node columns; a Python loop only over the nodes with shared GPUs."""
    gpus = nodes.cap_gpus
    free_whole = np.clip(nodes.free_gpus, 0.0, None)
    unused_shared = np.zeros_like(gpus)
    shared = 0
    for node, groups in nodes.groups.items():
        unused_shared[node] = sum(max(0.0, 1.0 - group.used) for group in groups)
        shared += len(groups)  # a shared GPU is closed when its last pod leaves
    has_gpus = gpus > 0
    idle_node = has_gpus & (free_whole >= gpus)
    allocated = np.clip(gpus - free_whole - unused_shared, 0.0, None)
    idle = {
        IDLE_NODE: float(free_whole[idle_node].sum()),
        PARTIAL_NODE: float(free_whole[has_gpus & ~idle_node].sum()),
        SHARED_GPU: float(unused_shared.sum()),
    }
    return GpuAllocation(float(gpus.sum()), float(allocated[has_gpus].sum()), shared, idle)


__all__ = ["IDLE_PLACEMENTS", "GpuAllocation", "Waiting", "gpu_allocation", "waiting_by_queue"]


def admission_gating(
    snapshot: ClusterSnapshot, result: SessionResult
) -> tuple[dict[str, int], dict[str, int]]:
    """Queue -> pods at the queue-admission gate after the cycle (those it ungated left out), and queue ->
    the pods it ungated."""
    ungated: dict[str, int] = {}
    for ungating in result.ungates:
        ungated[ungating.queue] = ungated.get(ungating.queue, 0) + len(ungating.pods)
    gated: dict[str, int] = {}
    for job in snapshot.jobs.values():
        facts = job.admission
        if facts is not None and (facts.gated or facts.also_foreign):
            gated[job.queue] = gated.get(job.queue, 0) + len(facts.gated) + len(facts.also_foreign)
    for queue, count in ungated.items():
        gated[queue] = gated.get(queue, 0) - count
    return {queue: count for queue, count in gated.items() if count > 0}, ungated
