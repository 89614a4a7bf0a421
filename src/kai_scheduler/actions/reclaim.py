"""reclaim: a queue below its fair share takes back resources that other queues borrowed.

Each pending job whose queue would stay within its fair share (and, if non-preemptible, within its quota)
looks for victims among the preemptible jobs of other queues; the victim solver evicts them in victim
order until the job fits (pipelined onto the releasing capacity), placing the victims again where they
still fit, and proportion's reclaim rules decide whether that scenario is fair. The queue's limit is
checked when the job is placed, with the victims already gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kai_scheduler.actions.solvers.victim_order import SharedVictims, VictimUnit, order_victims
from kai_scheduler.actions.solvers.victim_scenarios import Scenario
from kai_scheduler.actions.solvers.victims import VictimAction
from kai_scheduler.framework.gang import next_request, request_of
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import Resources


class Reclaim(VictimAction):
    name = "reclaim"
    gave_up = "no fair choice of victims in queues above their fair share makes room"

    def blocked(self, session: Session, job: JobInfo) -> bool:
        request = next_request(session, job)
        for check in session.points.reclaim_eligibility:
            reason = check(job, request)
            if reason is not None:
                session.add_reason(job.key, f"reclaim: {reason}")
                return True
        return False

    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        request = request_of(session, tasks)
        allowed = _allowed(job, request, self.by_queue, session.points.reclaim_victim_filters)
        if not allowed:
            return False

        def victims() -> Iterable[VictimUnit]:
            if len(tasks) > 1:
                return order_victims(session, self.name, job, tasks, self.heaps(session, allowed, tasks))
            # The order depends on the preemptor only through its queue (minimum runtimes), the nodes it
            # may use and the queues it may take from: jobs alike share it (see SharedVictims).
            key = (job.queue, session.usable_nodes(tasks).tobytes(), tuple(allowed))
            shared = self.shared_orders.get(key)
            if shared is None:
                order = order_victims(session, self.name, job, tasks, self.heaps(session, allowed, tasks))
                shared = self.shared_orders[key] = SharedVictims(order)
            return shared

        def fair(preemptor: JobInfo, taken: Sequence[TaskInfo]) -> bool:
            return all(check(preemptor, request, taken) for check in session.points.reclaim_validators)

        def reason(victim: TaskInfo) -> str:
            return f"reclaimed for {job.key} (queue {job.queue} below fair share)"

        scenario = Scenario(self.name, job, tasks, fair, reason, invalid_is_final=True, replays=self.replays)
        return self.solve(session, scenario, victims)


def _allowed(
    job: JobInfo,
    request: Resources,
    by_queue: dict[str, dict[JobInfo, None]],
    filters: list[Callable[[JobInfo, Resources, str], bool]],
) -> list[str]:
    """The other queues with candidates that every filter lets the job take from, in `by_queue` order. With
    one filter (proportion's, the usual case) it is called directly: most attempts ask it of every queue
    and find none, and a generator per queue was a fifth of each attempt."""
    if len(filters) == 1:
        (may,) = filters
        mine = job.queue
        return [name for name, jobs in by_queue.items() if name != mine and jobs and may(job, request, name)]
    return [
        name
        for name, jobs in by_queue.items()
        if name != job.queue and jobs and all(may(job, request, name) for may in filters)
    ]
