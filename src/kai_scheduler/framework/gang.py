"""Which pods of a job the next allocation attempt is about: a gang's missing members, or one more.

KAI allocates a job in passes down its sub-group tree (`JobInfo.tree`): while a group is below its
minimum (`minSubGroup` of its children, unset all), the attempt takes exactly the missing pods of the
children it needs (all or nothing); once it is satisfied, an elastic job grows by one pod of its first
child in sub-group order that has any, per pass.
The pods an attempt may take are the pending ones and, while a victim scenario is simulated, the ones it
evicted virtually: the simulation places its victims again as it places any job.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Final

from kai_scheduler.model.jobs import JobInfo, PodSet, SubGroupSet, TaskInfo, TaskStatus
from kai_scheduler.model.resources import Resources

# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup of the class's attributes (~10x a global's cost), and these are asked of every pod placed.
_PENDING: Final = TaskStatus.PENDING
_RELEASING: Final = TaskStatus.RELEASING

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session, SignatureRead


def tasks_to_allocate(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The pods of the job's next attempt, in placement order. Every action asks this of every pending
    job, and queue order asks it again, so the answer is kept until one of the job's pods changes status
    (the orders it depends on are fixed for the scheduler: it is carried to later cycles, `job_memos`)."""
    return list(kept_tasks(session, job))


def kept_tasks(session: Session, job: JobInfo) -> list[TaskInfo]:
    """`tasks_to_allocate` as kept (not to be changed: callers that only read it are spared a copy). A bare
    pod's plain job (`JobInfo.lone_task`: most jobs) is answered from its pod's status, as
    `fresh_tasks_to_allocate` would, unless a victim scenario evicted pods virtually: as cheap as a
    look-up, and no memo holds thousands of such jobs."""
    lone = job.lone_task
    if lone is not None and not session.state.virtually_evicted:
        return [lone] if lone.status is _PENDING else []
    cached = session.next_tasks.get(job)
    if cached is None or cached[0] != job.version:
        cached = (job.version, fresh_tasks_to_allocate(session, job))
        session.next_tasks[job] = cached
    return cached[1]


def lone_next_pod(session: Session, job: JobInfo) -> TaskInfo | None:
    """The pod of a bare pod's plain job (`JobInfo.lone_task`) when it is all of the job's next pods
    (`kept_tasks`): pending, and no pod evicted virtually. None: otherwise (any other job)."""
    lone = job.lone_task
    if lone is not None and lone.status is _PENDING and not session.state.virtually_evicted:
        return lone
    return None


def next_request(session: Session, job: JobInfo) -> Resources:
    """`request_of` the pods of the job's next attempt: what queue order adds to the job's queue when it
    ranks the queue by the job it would hand out. Kept with the pods (by the job's version) and the
    cluster's smallest GPU memory it converts with, and carried to later cycles like them (`job_memos`);
    a bare pod's plain job's from its pod's status, as `kept_tasks` gives its pods."""
    smallest = session.snapshot.min_gpu_memory_mib
    lone = job.lone_task
    if lone is not None and not session.state.virtually_evicted:
        return shared_request(session, lone, smallest) if lone.status is _PENDING else Resources()
    cached = session.next_requests.get(job)
    if cached is None or cached[0] != job.version or cached[1] != smallest:
        tasks = kept_tasks(session, job)
        request = (
            shared_request(session, tasks[0], smallest) if len(tasks) == 1 else request_of(session, tasks)
        )
        cached = (job.version, smallest, request)
        session.next_requests[job] = cached
    return cached[2]


def shared_request(session: Session, task: TaskInfo, gpu_memory_mib: float) -> Resources:
    """`_requested` of the one pod `task` (gpu-memory converted with `gpu_memory_mib`), one object for
    the pods that ask alike (`Session.pod_requests`): not to be changed."""
    key = (task.request, gpu_memory_mib)
    request = session.pod_requests.get(key)
    if request is None:
        request = session.pod_requests[key] = _requested([task], gpu_memory_mib)
    return request


def fresh_tasks_to_allocate(session: Session, job: JobInfo) -> list[TaskInfo]:
    """`tasks_to_allocate` worked out now, whatever is kept."""
    evicted = session.state.virtually_evicted
    if evicted and any(task.key in evicted for task in job.tasks):

        def placeable(tasks: list[TaskInfo]) -> list[TaskInfo]:
            return [t for t in tasks if t.status is _PENDING or (t.status is _RELEASING and t.key in evicted)]

        return _choose(session, job, placeable)
    only = _only_pod(job)
    if only is not None:
        return [only] if only.status is _PENDING else []
    return _choose(session, job, _pending)


def _only_pod(job: JobInfo) -> TaskInfo | None:
    """The job's pod when it has one, in its one pod set, under no sub-group and with no more than one of
    the root's children required (None: otherwise). `_choose` then takes that pod whenever it is pending:
    below its minimum or satisfied, the pod set gives its one pending pod, and no other pod can make up
    the job's shortfall. Why: most jobs are one pod, and each is asked once a version (a bare pod's plain
    job's is its `lone_task`)."""
    lone = job.lone_task
    if lone is not None:
        return lone
    tasks = job.tasks
    if len(tasks) != 1 or job.subgroups or len(job.podsets) != 1 or (job.min_sub_group or 0) > 1:
        return None
    (podset,) = job.podsets.values()
    task = tasks[0]
    return task if podset.parent is None and len(podset.tasks) == 1 and podset.tasks[0] is task else None


def lone_whole_gang(job: JobInfo, tasks: list[TaskInfo]) -> bool:
    """Whether `tasks` are the job's one pod (`_only_pod`), pending, of a job and pod set that ask for no
    more than it (minMember at most 1): then they are a whole gang, ready to be tried (admission asks this
    first of every job it checks, and most jobs are one pod: their sub-group tree is never made). A bare
    pod's plain job (`lone_task`) is one whose pod, pending, is all of `tasks`."""
    lone = job.lone_task
    if lone is not None:
        return len(tasks) == 1 and tasks[0] is lone and lone.status is _PENDING
    if len(tasks) != 1 or job.min_member > 1:
        return False
    task = tasks[0]
    if task.status is not _PENDING or _only_pod(job) is not task:
        return False
    (podset,) = job.podsets.values()
    return podset.min_member <= 1


def _pending(tasks: list[TaskInfo]) -> list[TaskInfo]:
    return [t for t in tasks if t.status is _PENDING]


def _choose(
    session: Session, job: JobInfo, placeable: Callable[[list[TaskInfo]], list[TaskInfo]]
) -> list[TaskInfo]:
    chosen = _from_group(session, job.tree(), placeable)
    if job.min_member and not job.is_gang_satisfied():
        # The PodGroup's own minMember may ask for more pods than its pod sets do.
        shortfall = job.min_member - job.active_allocated() - len(chosen)
        if shortfall > 0:
            taken = {task.key for task in chosen}
            rest = sorted((t for t in placeable(job.tasks) if t.key not in taken), key=session.task_order_key)
            chosen.extend(rest[:shortfall])
    return chosen


def _from_group(
    session: Session, group: SubGroupSet, placeable: Callable[[list[TaskInfo]], list[TaskInfo]]
) -> list[TaskInfo]:
    """KAI's collectTasksFromSubGroupSet: below its minimum, the missing pods of its first
    `min_to_satisfy` children in sub-group order (children already satisfied give none); satisfied, the
    next pods of its first child that has any."""
    children = group.children
    if len(children) > 1:
        children = sorted(children, key=session.podset_order_key)
    if not group.is_satisfied():
        chosen: list[TaskInfo] = []
        for child in children[: group.min_to_satisfy()]:
            if child.satisfied_members() < child.min_to_satisfy():
                chosen.extend(_from_member(session, child, placeable))
        return chosen
    for child in children:
        found = _from_member(session, child, placeable)
        if found:
            return found
    return []


def _from_member(
    session: Session, member: PodSet | SubGroupSet, placeable: Callable[[list[TaskInfo]], list[TaskInfo]]
) -> list[TaskInfo]:
    if isinstance(member, SubGroupSet):
        return _from_group(session, member, placeable)
    pending = placeable(member.tasks)
    if not pending:
        return []
    missing = member.min_member - member.active_allocated()
    if missing <= 0:  # satisfied: one pod more
        return [min(pending, key=session.task_order_key) if len(pending) > 1 else pending[0]]
    if len(pending) > 1:
        pending.sort(key=session.task_order_key)
    return pending[:missing]


def allocation_rank(count: int, threshold: int) -> tuple[int, int, float]:
    """KAI's SubGroupOrderFn as a key, for a member with `count` satisfied children (or active pods) of
    the `threshold` it needs: below it first (all alike), then required members by their allocation
    ratio, then optional ones (threshold 0) by how many they have."""
    if count < threshold:
        return (0, 0, 0.0)
    if threshold == 0:
        return (1, 1, float(count))
    return (1, 0, count / threshold)


def request_of(session: Session, tasks: list[TaskInfo]) -> Resources:
    """Queue-accounting resources of pending tasks, gpu-memory converted with the cluster's smallest GPU
    (KAI's init resource vector: queue order, reclaim, what a job asks)."""
    return _requested(tasks, session.snapshot.min_gpu_memory_mib)


def kept_quota_request(session: Session, tasks: list[TaskInfo]) -> Resources:
    """`quota_request_of`, one object for the attempts of one pod alike (`shared_request`): not to be
    changed."""
    if len(tasks) == 1:
        return shared_request(session, tasks[0], session.snapshot.max_gpu_memory_mib)
    return quota_request_of(session, tasks)


def quota_request_of(session: Session, tasks: list[TaskInfo]) -> Resources:
    """What pending tasks take of their queue's quota and limit before nodes are chosen, gpu-memory
    converted with the cluster's largest GPU: the least the job can take, so a job this refuses is over
    on every node (KAI v0.17's capacity policy); each node's own GPUs are checked as pods are placed."""
    return _requested(tasks, session.snapshot.max_gpu_memory_mib)


def _requested(tasks: list[TaskInfo], gpu_memory_mib: float) -> Resources:
    total = Resources()
    for task in tasks:
        total.add(task.request.queue_resources(None, gpu_memory_mib))
    return total


def next_signature(session: Session, job: JobInfo, *, by_queue: bool = True) -> tuple[Any, ...]:
    """`scheduling_signature` of the pods of the job's next attempt (`tasks_to_allocate`), with its queue
    or (`by_queue` False) without. Kept with the pods, by the job's version (which a change of its pods'
    nominations moves too), and carried to later cycles like them (`job_memos`): allocate asks it of
    every job it hands out, both ways for most, so one made keeps the other too (they differ only in
    the queue's part). A bare pod's plain job's is made from its pod (`_lone_signature`)."""
    kept = session.signatures if by_queue else session.shapes
    cached = kept.get(job)
    reads = session.points.signature_reads
    # What is read may change from one cycle to the next with no change of the job (an AccountedResource
    # counting an annotation made): a signature carried from a cycle that read otherwise is not this one's.
    # (Most sessions read nothing: then any name kept is one too many, seen without a call.)
    if cached is not None and cached[0] == job.version:
        names = cached[1][-1]
        if _named(names, reads) if reads else not names:
            return cached[1]
    lone = job.lone_task
    if lone is not None and not reads and not session.state.virtually_evicted:
        unqueued = _lone_signature(session, job, lone)
    else:
        unqueued = scheduling_signature(job, kept_tasks(session, job), by_queue=False, reads=reads)
    version = job.version
    session.shapes[job] = (version, unqueued)
    session.signatures[job] = (version, (_queue_part(job, by_queue=True), *unqueued[1:]))
    return kept[job][1]


def _lone_signature(session: Session, job: JobInfo, lone: TaskInfo) -> tuple[Any, ...]:
    """`scheduling_signature` without the queue of a bare pod's plain job (`JobInfo.lone_task`), while no
    pod is evicted virtually and node filters read nothing of the pods: its next pods are its pod if
    pending (as `kept_tasks` gives them), and it has no topology constraint. Why: made in one go, without
    the list, the calls and the sort the general form makes for any job, it costs a fraction of it, and
    a deep backlog's victim actions make it first for thousands of jobs (9,000 at 5,000 nodes in a first
    cycle). With `verify_carried` it is compared with the general form (`CarriedMismatch`)."""
    pending = lone.status is _PENDING
    pods = ((lone.request.shape(), lone.placement.key, lone.nominated_node),) if pending else ()
    signature = (None, job.tally().gang_satisfied, pods, None, None, ())
    if session.verify_carried:
        from kai_scheduler.framework.job_memos import CarriedMismatch  # (job_memos imports this module)

        fresh = scheduling_signature(job, kept_tasks(session, job), by_queue=False)
        if fresh != signature:
            raise CarriedMismatch(f"{job.key}'s signature made from its pod {signature} differs from {fresh}")
    return signature


def _queue_part(job: JobInfo, *, by_queue: bool) -> tuple[Any, ...] | None:
    """`scheduling_signature`'s first item: the job's queue, preemptibility and priority, or None."""
    return (job.queue, job.preemptible, job.priority) if by_queue else None


def _read_names(reads: Sequence[SignatureRead]) -> tuple[Hashable, ...]:
    return tuple(name for name, _ in reads)


def _named(names: tuple[Hashable, ...], reads: Sequence[SignatureRead]) -> bool:
    """Whether `names` are those of `reads` (asked for every job allocate hands out: most sessions read
    nothing, and no tuple of names is made to say so)."""
    if not reads:
        return not names
    return len(names) == len(reads) and all(name == read[0] for name, read in zip(names, reads, strict=True))


def scheduling_signature(
    job: JobInfo, tasks: list[TaskInfo], *, by_queue: bool = True, reads: Sequence[SignatureRead] = ()
) -> tuple[Any, ...]:
    """Attempts with equal signatures succeed or fail alike within one action of a cycle (same queue,
    same preemptibility and priority, same pods to place, same topology constraints, the same of what
    node filters read of the pods: `reads`, the session's `ExtensionPoints.signature_reads`), so a failed one
    need not be tried again. `by_queue=False` leaves the queue, preemptibility and priority out, for an
    action whose outcome does not depend on them (consolidation: no queue may lose resources to it). The
    last item names what was read."""
    constrained = job.has_topology()
    constraints = job.topology_constraints() if constrained else ()
    pods = [
        (t.request.shape(), t.placement.key, t.nominated_node, *[read(t) for _, read in reads]) for t in tasks
    ]
    if len(pods) > 1:
        pods.sort()
    return (
        _queue_part(job, by_queue=by_queue),
        job.is_gang_satisfied(),
        tuple(pods),
        # Topology: jobs with other constraints place differently, and running pods pin a job to their
        # domain, so a constrained job that already runs shares its signature with no other job.
        constraints if constrained else None,
        job.key if constrained and job.active_allocated() > 0 else None,
        _read_names(reads),
    )
