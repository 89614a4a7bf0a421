"""consolidation: make room for a pending job by moving running pods, never by stopping them.

When a preemptible job does not fit anywhere although the cluster has enough free GPUs in total (the free
GPUs are scattered), consolidation looks for preemptible running jobs to move: each scenario evicts
victims and places the pending job and the victims again, in queue order, with the allocation routine (a
victim may land back where it was, or move); a scenario in which any victim would have to stop is
invalid. At most `maxConsolidationPreemptees` pods are evicted for one job (0 turns consolidation off).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kai_scheduler.actions.victims import (
    Scenario,
    VictimAction,
    VictimUnit,
    active_tasks,
    order_victims,
    solve,
    stays_evicted,
)
from kai_scheduler.framework.gang import scheduling_signature
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import EPSILON, Resources


class Consolidation(VictimAction):
    name = "consolidation"
    gave_up = "moving running pods (at most maxConsolidationPreemptees) does not make room"

    def execute(self, session: Session) -> None:
        if session.config.max_consolidation_preemptees == 0:
            return
        super().execute(session)

    def signature(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> tuple[object, ...]:
        # Whether moving pods makes room does not depend on the preemptor's queue (no queue may lose
        # resources to it), except through a limit on the queue's path, checked when the job is placed.
        path = session.snapshot.queues.ancestry(job.queue)
        limited = any(limit >= 0 for queue in path for limit in queue.limit.values())
        return (scheduling_signature(job, tasks, by_queue=False), job.queue if limited else None)

    def blocked(self, session: Session, job: JobInfo, request: Resources) -> bool:
        if not job.preemptible:
            return True
        nodes = session.snapshot.nodes
        # Moving pods only helps when the GPUs exist, just not together.
        free = float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
        return free + EPSILON < request.gpu

    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo], running: list[JobInfo]) -> bool:
        candidates = [victim for victim in running if victim is not job]
        if not candidates:
            return False
        victims = _closest_to_room_first(session, job, tasks, candidates)

        def reason(victim: TaskInfo) -> str:
            return f"consolidated to make room for {job.key} (queue {job.queue})"

        scenario = Scenario(
            self.name, job, tasks, _all_placed, reason, session.config.max_consolidation_preemptees
        )
        return solve(session, scenario, victims)


def _closest_to_room_first(
    session: Session, job: JobInfo, tasks: list[TaskInfo], candidates: list[JobInfo]
) -> Iterator[VictimUnit]:
    """Victims on the nodes with the most free GPUs first (moving them frees room soonest), in victim
    order among jobs alike. KAI looks at a bounded subset of the preemptible jobs only (the first
    maxConsolidationPreemptees + 1 its job map hands out, in no particular order); this chooses that
    subset deterministically, and usefully, by room."""
    free = session.snapshot.nodes.idle_gpus_total()
    tiers: dict[float, list[JobInfo]] = {}
    for victim in candidates:
        room = max((float(free[t.node]) for t in active_tasks(victim)), default=0.0)
        tiers.setdefault(room, []).append(victim)
    for room in sorted(tiers, reverse=True):
        # Each tier is ordered once the one before it is used up (as its evictions left the queues).
        yield from order_victims(session, Consolidation.name, job, tasks, tiers[room])


def _all_placed(preemptor: JobInfo, victims: Sequence[TaskInfo]) -> bool:
    """Valid only if every victim was placed again (moved, or back where it was): none stops."""
    return not any(stays_evicted(task) for task in victims)
