"""The queue's capacity checks for one gpu-memory pod on each node (KAI's IsTaskAllocationOnNodeOverCapacity).

A gpu-memory request is a different fraction of a GPU on each node: `devices * memory / the node's GPU
memory`, rounded up to a hundredth as KAI rounds it. The job-level checks weigh it with the cluster's
largest GPU, the least it can take; here each node's own GPUs decide, so a pod that would take its queue
over its limit or (non-preemptible) quota on a node with small GPUs goes to one with larger GPUs or waits.
Every other request takes the same on any node, and the job-level checks already cover it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.resources import Resources

REJECTION = "node(s) would take the queue over its quota or limit with their GPUs' memory"

CapacityCheck = Callable[[JobInfo, Resources], str | None]


def gpu_memory_capacity(session: Session, checks: Sequence[CapacityCheck]) -> NamedPredicate:
    everywhere = np.ones(session.snapshot.nodes.size, dtype=np.bool_)
    everywhere.flags.writeable = False  # handed out to every other pod

    def nodes_passing(task: TaskInfo) -> BoolArray:
        nodes = session.snapshot.nodes
        request = task.request
        shared = request.shared_gpu
        if shared is None or not shared.by_memory:
            return everywhere
        passing = np.ones(nodes.size, dtype=np.bool_)
        memories = nodes.gpu_memory_mib
        for memory in np.unique(memories[memories > 0]).tolist():
            # KAI's getGpuMemoryFractionalOnNode: the share of one of the node's GPUs (the one rule),
            # rounded up to 0.01 for this check.
            portion = math.ceil(shared.held_portion(memory) * 100) / 100
            amount = Resources(shared.devices * portion, request.cpu, request.memory)
            if any(check(task.job, amount) is not None for check in checks):
                passing[memories == memory] = False
        return passing

    def depends_on(task: TaskInfo) -> str | None:
        # The answer reads the job's queue (and its allocation, which moves with the nodes' usage).
        return task.job.queue if task.request.gpu_memory_mib and not task.request.gpu_portion else None

    # So gpu-memory pods of different queues are not alike for allocate: one without room in its queue
    # may find it in another's.
    session.points.signature_reads.append(("gpu-memory-queue", depends_on))
    return NamedPredicate("proportion", REJECTION, nodes_passing, depends_on)
