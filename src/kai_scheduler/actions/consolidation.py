"""consolidation: make room for a pending job by moving running pods, never by stopping them.

When a preemptible job does not fit anywhere although the cluster has enough free GPUs in total (the free
GPUs are scattered), consolidation looks for preemptible running jobs to move: each scenario evicts
victims, places the pending job, and re-places every victim on another node (pipelined there); a
scenario in which any victim would have to stop is invalid. At most `maxConsolidationPreemptees` pods
move for one job (0 turns consolidation off).
"""

from __future__ import annotations

from collections.abc import Sequence

from kai_scheduler.actions.victims import (
    Relocation,
    Scenario,
    VictimAction,
    VictimJob,
    order_victims,
    solve,
)
from kai_scheduler.framework.gang import scheduling_signature
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import EPSILON, Resources


class Consolidation(VictimAction):
    name = "consolidation"
    gave_up = "moving running pods (at most maxConsolidationPreemptees) does not make room"

    def __init__(self) -> None:
        # The victims in the order to try them, by the preemptor's usable nodes: the same for every
        # pending job until a scenario is committed (consolidation protects no victim by runtime, so the
        # order does not depend on the preemptor otherwise). Ordering every running job for each of
        # thousands of pending jobs was most of a busy cycle.
        self._victims: dict[bytes, list[VictimJob]] = {}

    def execute(self, session: Session) -> None:
        if session.config.max_consolidation_preemptees == 0:
            return
        self._victims.clear()
        super().execute(session)

    def signature(self, job: JobInfo, tasks: list[TaskInfo]) -> tuple[object, ...]:
        # Whether moving pods makes room does not depend on the preemptor's queue (its limits are
        # checked in `blocked`, for every job), so a shape that failed fails for every queue.
        return scheduling_signature(job, tasks, by_queue=False)

    def blocked(self, session: Session, job: JobInfo, request: Resources) -> bool:
        if not job.preemptible or session.check_job_capacity(job, request) is not None:
            return True
        nodes = session.snapshot.nodes
        # Moving pods only helps when the GPUs exist, just not together.
        free = float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
        return free + EPSILON < request.gpu

    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo], running: list[JobInfo]) -> bool:
        # Only while no plugin protects victims from consolidation by preemptor (none does today).
        cacheable = not session.points.victim_protection.get(self.name)
        key = session.usable_nodes(tasks).tobytes()
        ordered = self._victims.get(key) if cacheable else None
        if ordered is None:
            ordered = _closest_to_room_first(
                session, list(order_victims(session, self.name, job, tasks, running))
            )
            if cacheable:
                self._victims[key] = ordered
        victims = [victim for victim in ordered if victim.job is not job]
        if not victims:
            return False

        def reason(victim: TaskInfo) -> str:
            return f"consolidated to make room for {job.key} (queue {job.queue})"

        scenario = Scenario(
            self.name,
            job,
            tasks,
            _all_moved,
            reason,
            Relocation.ALL,
            session.config.max_consolidation_preemptees,
        )
        if not solve(session, scenario, victims):
            return False
        self._victims.clear()  # pods moved: the running jobs and the free GPUs are different now
        return True


def _all_moved(preemptor: JobInfo, stopped: Sequence[TaskInfo]) -> bool:
    """Valid only if no victim stops (relocation ALL already guarantees it; this states the rule)."""
    return not stopped


def _closest_to_room_first(session: Session, victims: list[VictimJob]) -> list[VictimJob]:
    """Victims on the nodes with the most free GPUs first: moving them frees a whole node soonest."""
    free = session.snapshot.nodes.idle_gpus_total()

    def room(victim: VictimJob) -> float:
        return max(float(free[t.node]) for t in victim.running)

    return sorted(victims, key=room, reverse=True)
