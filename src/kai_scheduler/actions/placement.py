"""Placing one attempt's pods together, within the job's topology constraints.

Every action that places a job's pods (allocate, and the preemptor in reclaim, preempt and consolidation)
goes through `place_job`: the whole job in one of its node subsets (topology domains, the preferred ones
first), and within it each pod set that has a constraint of its own in one of its subsets. An action
supplies how one pod is placed (`PlaceOne`); what is placed stays on the statement on success, and
nothing of the attempt stays on failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import JobInfo, PodSet, TaskInfo

# Places one pod on the statement, or says why it does not fit.
PlaceOne = Callable[[TaskInfo], str | None]


@dataclass(frozen=True, slots=True)
class _Failure:
    reason: str
    topology: bool  # a pod set's own topology constraint could not be met (the sharper reason)


def place_job(
    session: Session, statement: Statement, job: JobInfo, tasks: Sequence[TaskInfo], place_one: PlaceOne
) -> str | None:
    """Place `tasks` with `place_one`; None on success, else why not (with nothing left placed)."""
    subsets = session.node_subsets(job, None, tasks)
    if subsets is None:
        failure = _place_podsets(session, statement, job, tasks, place_one)
        return None if failure is None else failure.reason
    sharper: str | None = None
    for mask in subsets.masks:
        with session.confined_to(mask):
            failure = _place_podsets(session, statement, job, tasks, place_one)
        if failure is None:
            return None
        if failure.topology:
            sharper = failure.reason
    # When the job's domains had room but a pod set's own constraint failed in each, say that.
    return sharper or subsets.failure


def _place_podsets(
    session: Session, statement: Statement, job: JobInfo, tasks: Sequence[TaskInfo], place_one: PlaceOne
) -> _Failure | None:
    start = statement.checkpoint()
    for podset, members in _by_podset(tasks):
        subsets = session.node_subsets(job, podset, members) if podset.topology is not None else None
        failure: _Failure | None
        if subsets is None:
            reason = _place_each(members, place_one)
            failure = None if reason is None else _Failure(reason, topology=False)
        else:
            failure = _Failure(subsets.failure, topology=True)
            before = statement.checkpoint()
            for mask in subsets.masks:
                with session.confined_to(mask):
                    if _place_each(members, place_one) is None:
                        failure = None
                        break
                statement.rollback(before)
        if failure is not None:
            statement.rollback(start)
            return failure
    return None


def _place_each(members: list[TaskInfo], place_one: PlaceOne) -> str | None:
    for task in members:
        failure = place_one(task)
        if failure is not None:
            return failure
    return None


def _by_podset(tasks: Sequence[TaskInfo]) -> list[tuple[PodSet, list[TaskInfo]]]:
    groups: dict[int, tuple[PodSet, list[TaskInfo]]] = {}
    for task in tasks:
        groups.setdefault(id(task.podset), (task.podset, []))[1].append(task)
    return list(groups.values())
