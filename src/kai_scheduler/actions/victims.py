"""The victim solver that reclaim and preempt share.

For a pending job (the preemptor) it grows candidate victim sets job by job, in victim order, and
simulates each scenario on a Statement: evict the victims, then place the preemptor's pods (on releasing
capacity they are pipelined). A scenario that places the preemptor and passes the action's validator is
kept; anything else is rolled back. Elastic victims shrink one pod above their minMember at a time before
the gang itself is taken, and gangs are taken whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from kai_scheduler.framework.gang import request_of
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES, Resources

# Checks a scenario (victims already evicted, preemptor placed) before it is committed.
ScenarioValidator = Callable[[JobInfo, Sequence[TaskInfo]], bool]


@dataclass(frozen=True, slots=True)
class VictimJob:
    job: JobInfo
    running: list[TaskInfo]  # its running pods, newest first


def victim_steps(victim: VictimJob) -> Iterator[list[TaskInfo]]:
    """The pods to take from one victim job, step by step: first the pods above minMember, one at a
    time (newest first), then the rest of the gang at once."""
    above = len(victim.running) - victim.job.min_member
    for i in range(max(above, 0)):
        yield [victim.running[i]]
    rest = victim.running[max(above, 0) :]
    if rest:
        yield rest


def running_tasks(job: JobInfo) -> list[TaskInfo]:
    return sorted((t for t in job.tasks if t.status is TaskStatus.RUNNING), key=lambda t: -t.rank)


def order_victims(session: Session, jobs: Sequence[JobInfo]) -> list[VictimJob]:
    """Victim order: repeatedly the queue furthest above its fair share, and within it the lowest
    priority, newest job (the reverse of the order jobs are scheduled in)."""
    by_queue: dict[str, list[JobInfo]] = {}
    for job in jobs:
        by_queue.setdefault(job.queue, []).append(job)
    for queue_jobs in by_queue.values():
        queue_jobs.sort(key=lambda j: (j.priority, -j.rank), reverse=True)
    remaining = {name: session.snapshot.queues[name].allocated.copy() for name in by_queue}
    ordered: list[VictimJob] = []
    while any(by_queue.values()):
        name = max(
            (n for n, js in by_queue.items() if js),
            key=lambda n: (_over_share(session, n, remaining[n]), -session.snapshot.queues[n].rank),
        )
        job = by_queue[name].pop()
        tasks = running_tasks(job)
        ordered.append(VictimJob(job, tasks))
        remaining[name].sub(request_of(session, tasks))
    return ordered


def _over_share(session: Session, queue_name: str, allocated: Resources) -> float:
    fair = session.snapshot.queues[queue_name].fair_share
    ratios = [
        allocated.get(r) / fair.get(r) if fair.get(r) > EPSILON else allocated.get(r) * 1000.0
        for r in RESOURCE_NAMES
        if allocated.get(r) > EPSILON
    ]
    return max(ratios, default=0.0)


def solve(
    session: Session,
    action: str,
    preemptor: JobInfo,
    tasks: list[TaskInfo],
    victims: Sequence[VictimJob],
    validate: ScenarioValidator,
    reason: Callable[[TaskInfo], str],
) -> bool:
    """Find and commit the smallest prefix of victims (in order) that lets `tasks` of `preemptor` run."""
    statement = session.statement(action)
    evicted: list[TaskInfo] = []
    for victim in victims:
        for step in victim_steps(victim):
            for task in step:
                statement.evict(task, reason(task))
            evicted.extend(step)
            if _try_place(session, statement, preemptor, tasks, evicted, validate):
                statement.commit()
                return True
    statement.discard()
    return False


def _try_place(
    session: Session,
    statement: Statement,
    preemptor: JobInfo,
    tasks: list[TaskInfo],
    evicted: list[TaskInfo],
    validate: ScenarioValidator,
) -> bool:
    checkpoint = statement.checkpoint()
    for task in tasks:
        placed = session.choose_node(task)
        if placed is None:
            statement.rollback(checkpoint)
            return False
        node = session.snapshot.nodes.names[placed.node]
        message = f"{preemptor.key} (queue {preemptor.queue}) takes resources being released on {node}"
        statement.pipeline(task, placed.node, placed.gpu_groups, message)
    if not validate(preemptor, evicted):
        statement.rollback(checkpoint)
        return False
    return True
