"""Placing one attempt's pods together, within the job's topology constraints.

Every action that places a job's pods (allocate, and the preemptor in reclaim, preempt and consolidation)
goes through `place_job`. A job's sub-groups form a tree (`spec.subGroups[].parent`): the job at the
root, non-leaf sub-groups (`SubGroupSet`) inside, pod sets (leaves) holding the pods. Placement descends
it: a job or sub-group with a topology constraint is placed in one of its node subsets (topology
domains, the preferred ones first), and within that subset each of its children in turn, so the pods of
a sub-group's descendants end up together in one of its domains. An action supplies how one pod is
placed (`PlaceOne`); what is placed stays on the statement on success, and nothing of the attempt stays
on failure.

`place_pipelined` is the allocation routine of the victim actions' simulations (KAI's AllocateJob with
pipelining only): the queue's capacity checked against the allocations as they are in the scenario, then
every pod pipelined onto idle or releasing capacity, the preemptor and the victims alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kai_scheduler.framework.gang import quota_request_of
from kai_scheduler.framework.session import NodeSubsets, Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import JobInfo, PodSet, SubGroupSet, TaskInfo

# Off, every attempt descends its job's sub-group tree (the tests compare the two ways).
ONE_POD_SET_SHORTCUT = True

# Places one pod on the statement, or says why it does not fit.
PlaceOne = Callable[[TaskInfo], str | None]

# A node of a job's sub-group tree below the job itself: a non-leaf sub-group or a leaf's pod set.
Group = PodSet | SubGroupSet


@dataclass(frozen=True, slots=True)
class _Failure:
    reason: str
    topology: bool  # a sub-group's own topology constraint could not be met (the sharper reason)


def place_job(
    session: Session, statement: Statement, job: JobInfo, tasks: Sequence[TaskInfo], place_one: PlaceOne
) -> str | None:
    """Place `tasks` with `place_one`; None on success, else why not (with nothing left placed)."""
    subsets = session.node_subsets(job, None, tasks)
    if subsets is None and ONE_POD_SET_SHORTCUT and _one_plain_pod_set(tasks):
        # What the descent does for such pods (one pod set, nothing to confine it to), without its layers:
        # most jobs are one pod.
        start = statement.checkpoint()
        reason = _place_each(tasks, place_one)
        if reason is not None:
            statement.rollback(start)
        return reason
    failure = _Attempt(session, statement, job, place_one).place_in(None, tasks, subsets)
    return None if failure is None else failure.reason


def _one_plain_pod_set(tasks: Sequence[TaskInfo]) -> bool:
    """Whether `tasks` all belong to one pod set at the top of their job's tree (the job is its parent)
    without a topology constraint of its own."""
    if not tasks:
        return False
    podset = tasks[0].podset
    return podset.parent is None and podset.topology is None and all(task.podset is podset for task in tasks)


def place_pipelined(
    session: Session,
    statement: Statement,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    reason: Callable[[TaskInfo, str], str],
) -> str | None:
    """Place `tasks` of `job` as allocate would, but pipelined (`reason(task, node name)` says why):
    None on success, else why not, with nothing left placed. A virtually evicted pod placed back where it
    was keeps running (see `Statement.pipeline`)."""
    if not tasks:
        return "no pod to place"
    refusal = session.check_job_capacity(job, quota_request_of(session, list(tasks)))
    if refusal is not None:
        return refusal
    return pipeline_within_capacity(session, statement, job, tasks, reason)


def pipeline_within_capacity(
    session: Session,
    statement: Statement,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    reason: Callable[[TaskInfo, str], str],
) -> str | None:
    """`place_pipelined` once the caller found that the queue's capacity takes `tasks` (some)."""
    names = session.snapshot.nodes.names

    def place_one(task: TaskInfo) -> str | None:
        placed = session.choose_node(task)
        if placed is None:
            return f"pod {task.name} does not fit"
        statement.pipeline(task, placed.node, placed.gpu_groups, reason(task, names[placed.node]))
        return None

    return place_job(session, statement, job, tasks, place_one)


@dataclass(frozen=True, slots=True)
class _Attempt:
    """One job's placement attempt: what each level of its sub-group tree is placed with."""

    session: Session
    statement: Statement
    job: JobInfo
    place_one: PlaceOne

    def place_group(self, group: Group | None, tasks: Sequence[TaskInfo]) -> _Failure | None:
        """Place the pods `tasks` of `group` (None: the whole job) in one of its node subsets, if it has
        any. When none holds them, the reason is a narrower sub-group's unmet constraint if one failed
        within a subset (the subset had room, that sub-group's domains did not), else the group's own."""
        return self.place_in(group, tasks, self.session.node_subsets(self.job, group, tasks))

    def place_in(
        self, group: Group | None, tasks: Sequence[TaskInfo], subsets: NodeSubsets | None
    ) -> _Failure | None:
        """`place_group` with the group's node subsets (`Session.node_subsets`) asked."""
        if subsets is None:
            return self.place_members(group, tasks)
        sharper: str | None = None
        for mask in subsets.masks:
            with self.session.confined_to(mask):
                failure = self.place_members(group, tasks)
            if failure is None:
                return None
            if failure.topology:
                sharper = failure.reason
        return _Failure(sharper or subsets.failure, topology=True)

    def place_members(self, group: Group | None, tasks: Sequence[TaskInfo]) -> _Failure | None:
        """Place the pods of each child of `group` (its own pods, for a pod set); nothing stays on
        failure."""
        start = self.statement.checkpoint()
        if isinstance(group, PodSet):
            reason = _place_each(tasks, self.place_one)
            if reason is None:
                return None
            self.statement.rollback(start)
            return _Failure(reason, topology=False)
        for child, members in _by_child(group, tasks):
            failure: _Failure | None
            if child.topology is None:  # nothing to confine it to: straight to its own children or pods
                failure = self.place_members(child, members)
            else:
                failure = self.place_group(child, members)
            if failure is not None:
                self.statement.rollback(start)
                return failure
        return None


def _place_each(members: Sequence[TaskInfo], place_one: PlaceOne) -> str | None:
    for task in members:
        failure = place_one(task)
        if failure is not None:
            return failure
    return None


def _by_child(group: SubGroupSet | None, tasks: Sequence[TaskInfo]) -> list[tuple[Group, list[TaskInfo]]]:
    """`tasks` (all below `group`) by the child of `group` they belong to, in the order they come."""
    children: dict[int, tuple[Group, list[TaskInfo]]] = {}
    for task in tasks:
        child: Group = task.podset
        while child.parent is not group:
            assert child.parent is not None, "a task outside the group being placed"
            child = child.parent
        children.setdefault(id(child), (child, []))[1].append(task)
    return list(children.values())
