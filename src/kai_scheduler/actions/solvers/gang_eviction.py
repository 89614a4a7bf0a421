"""Which of a victim job's pods the next eviction takes, without breaking its sub-group tree more than it
must (KAI v0.17's hierarchical `GetTasksToEvict`).

The walk starts at the job's root (`JobInfo.tree`) and looks at the members in reverse sub-group order
(the member sub-group order would serve last goes first). Elastic first: a pod of a pod set above its
minMember, found by descending into any group that has such a surplus below it; then a whole member of a
group that has more satisfied members than its minimum (`minSubGroup`). Only when neither exists is the
job taken whole (the gang), which a job protected by its minimum runtime never gives.

Counts come from the pods the caller still counts as running (`left`): the victim order takes units one
after the other from the same job without changing its pods' statuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai_scheduler.framework.gang import allocation_rank
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, PodSet, SubGroupSet, TaskInfo

Member = PodSet | SubGroupSet


class _Tree:
    """The job's tree with the pods of `left` counted per pod set."""

    def __init__(self, session: Session, left: Sequence[TaskInfo]) -> None:
        self.session = session
        self.pods: dict[int, list[TaskInfo]] = {}
        for task in left:
            self.pods.setdefault(id(task.podset), []).append(task)

    def count(self, member: Member) -> int:
        """Satisfied children of a group, active pods of a pod set."""
        if isinstance(member, PodSet):
            return len(self.pods.get(id(member), ()))
        return sum(1 for child in member.children if self.count(child) >= child.min_to_satisfy())

    def members(self, group: SubGroupSet) -> list[Member]:
        if not self.session.points.podset_order or len(group.children) < 2:
            return list(group.children)
        # Stable: equal members keep their order, as KAI's sort of a few members does.
        return sorted(
            group.children,
            key=lambda member: allocation_rank(self.count(member), member.min_to_satisfy()),
            reverse=True,
        )

    def has_surplus(self, member: Member) -> bool:
        if isinstance(member, PodSet):
            return self.count(member) > member.min_member
        return self.count(member) > member.min_to_satisfy() or any(
            self.has_surplus(child) for child in member.children
        )

    def elastic(self, member: Member) -> list[TaskInfo]:
        """Phases 1 and 2 of KAI's walk: a surplus pod, or a surplus member whole; [] when none."""
        if isinstance(member, PodSet):
            if self.count(member) <= member.min_member:
                return []
            return [max(self.pods[id(member)], key=self.session.task_order_key)]
        satisfied = self.count(member)
        if satisfied == 0:
            return []
        members = self.members(member)
        if self.has_surplus(member):
            for child in members:
                found = self.elastic(child)
                if found:
                    return found
        if member.min_to_satisfy() < satisfied:
            for child in members:
                found = self.all_of(child)
                if found:
                    return found
        return []

    def all_of(self, member: Member) -> list[TaskInfo]:
        podsets = [member] if isinstance(member, PodSet) else member.podsets
        found = [task for podset in podsets for task in self.pods.get(id(podset), ())]
        return sorted(found, key=self.session.task_order_key, reverse=True)


def tasks_to_evict(
    session: Session, job: JobInfo, left: Sequence[TaskInfo], protected: bool
) -> list[TaskInfo]:
    """The next unit to evict of `job`, whose pods still running are `left`: an elastic unit if there is
    one, else all of `left` (nothing when the job is `protected`).

    One pod left of a job not protected is the unit whichever way the walk goes (an elastic unit is some
    of `left`, and all of it otherwise): most victims are bare pods, and walking a job's tree for its one
    pod cost more than anything else the victim order does for it."""
    if len(left) == 1 and not protected:
        return list(left)
    return walked_tasks_to_evict(session, job, left, protected)


def walked_tasks_to_evict(
    session: Session, job: JobInfo, left: Sequence[TaskInfo], protected: bool
) -> list[TaskInfo]:
    """`tasks_to_evict` found by the walk of the job's tree, whatever is left."""
    tree = _Tree(session, left)
    found = tree.elastic(job.tree())
    if found or protected:
        return found
    return sorted(left, key=session.task_order_key, reverse=True)


def has_elastic_surplus(session: Session, job: JobInfo, left: Sequence[TaskInfo]) -> bool:
    """Whether the job could give a pod or a sub-group of `left` and stay satisfied."""
    return _Tree(session, left).has_surplus(job.tree())
