"""Which pods of a job the next allocation attempt is about: a gang's missing members, or one more.

KAI allocates a job in passes: while a pod set is below its minMember, the attempt takes exactly the
missing members (all or nothing); once every pod set is satisfied, an elastic job grows one pod per pass.
The pods an attempt may take are the pending ones and, while a victim scenario is simulated, the ones it
evicted virtually: the simulation places its victims again as it places any job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.resources import Resources

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session


def tasks_to_allocate(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The pods of the job's next attempt, in placement order. Every action asks this of every pending
    job, and queue order asks it again, so the answer is kept until one of the job's pods changes status
    (the orders it depends on are fixed for the session)."""
    cached = session.next_tasks.get(job)
    if cached is None or cached[0] != job.version:
        cached = (job.version, _tasks_to_allocate(session, job))
        session.next_tasks[job] = cached
    return list(cached[1])


def _tasks_to_allocate(session: Session, job: JobInfo) -> list[TaskInfo]:
    evicted = session.state.virtually_evicted
    if evicted and any(task.key in evicted for task in job.tasks):

        def placeable(tasks: list[TaskInfo]) -> list[TaskInfo]:
            return [
                t
                for t in tasks
                if t.status is TaskStatus.PENDING or (t.status is TaskStatus.RELEASING and t.key in evicted)
            ]

        return _choose(session, job, placeable)
    return _choose(session, job, _pending)


def _pending(tasks: list[TaskInfo]) -> list[TaskInfo]:
    return [t for t in tasks if t.status is TaskStatus.PENDING]


def _choose(
    session: Session, job: JobInfo, placeable: Callable[[list[TaskInfo]], list[TaskInfo]]
) -> list[TaskInfo]:
    podsets = list(job.podsets.values())
    if len(podsets) > 1:
        podsets.sort(key=session.podset_order_key)
    if not job.is_gang_satisfied():
        chosen: list[TaskInfo] = []
        for podset in podsets:
            missing = podset.min_member - podset.active_allocated()
            if missing > 0:
                pending = placeable(podset.tasks)
                if len(pending) > 1:
                    pending.sort(key=session.task_order_key)
                chosen.extend(pending[:missing])
        # The group-level minMember may ask for more pods than the pod sets do.
        shortfall = job.min_member - job.active_allocated() - len(chosen)
        if shortfall > 0:
            taken = {task.key for task in chosen}
            rest = sorted((t for t in placeable(job.tasks) if t.key not in taken), key=session.task_order_key)
            chosen.extend(rest[:shortfall])
        return chosen
    for podset in podsets:
        pending = placeable(podset.tasks)
        if pending:
            return [min(pending, key=session.task_order_key) if len(pending) > 1 else pending[0]]
    return []


def request_of(session: Session, tasks: list[TaskInfo]) -> Resources:
    """Queue-accounting resources of pending tasks, gpu-memory converted with the cluster's smallest GPU
    (KAI's init resource vector: queue order, reclaim, what a job asks)."""
    return _requested(tasks, session.snapshot.min_gpu_memory_mib)


def quota_request_of(session: Session, tasks: list[TaskInfo]) -> Resources:
    """What pending tasks take of their queue's quota and limit before nodes are chosen, gpu-memory
    converted with the cluster's largest GPU: the least the job can take, so a job this refuses is over
    on every node (KAI v0.17's capacity policy); each node's own GPUs are checked as pods are placed."""
    return _requested(tasks, session.snapshot.max_gpu_memory_mib)


def _requested(tasks: list[TaskInfo], gpu_memory_mib: float) -> Resources:
    total = Resources()
    for task in tasks:
        total.add(task.request.requested_resources(gpu_memory_mib))
    return total


def scheduling_signature(job: JobInfo, tasks: list[TaskInfo], *, by_queue: bool = True) -> tuple[Any, ...]:
    """Attempts with equal signatures succeed or fail alike within one action of a cycle (same queue,
    same preemptibility and priority, same pods to place, same topology constraints), so a failed one
    need not be tried again. `by_queue=False` leaves the queue, preemptibility and priority out, for an
    action whose outcome does not depend on them (consolidation: no queue may lose resources to it)."""
    constrained = job.has_topology()
    constraints = job.topology_constraints() if constrained else ()
    pods = [(t.request.shape(), t.placement.key, t.nominated_node) for t in tasks]
    if len(pods) > 1:
        pods.sort()
    return (
        (job.queue, job.preemptible, job.priority) if by_queue else None,
        job.is_gang_satisfied(),
        tuple(pods),
        # Topology: jobs with other constraints place differently, and running pods pin a job to their
        # domain, so a constrained job that already runs shares its signature with no other job.
        constraints if constrained else None,
        job.key if constrained and job.active_allocated() > 0 else None,
    )
