"""preempt: within one queue, a pending job evicts preemptible jobs of strictly lower priority.

E.g. build (100) and inference (125) jobs preempt train (50) jobs of their own queue; non-preemptible
jobs are never victims. Before looking for victims only the non-preemptible quota is checked; the queue's
limit is checked when the job is placed, with its victims already gone (so a job may preempt in a queue
at its limit). The victim solver does the search (see `victims`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from kai_scheduler.actions.solvers.victim_order import VictimEntry, VictimUnit, active_nodes, order_victims
from kai_scheduler.actions.solvers.victim_scenarios import Scenario
from kai_scheduler.actions.solvers.victims import VictimAction
from kai_scheduler.framework.gang import kept_quota_request, kept_tasks
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import IntArray


class Preempt(VictimAction):
    name = "preempt"
    gave_up = "evicting lower-priority preemptible jobs of its queue does not make room"
    blocks_quietly = True  # (the quota check only answers)

    def __init__(self) -> None:
        super().__init__()
        # Each queue's candidates by priority, and the nodes of the active pods of those of one priority
        # (worked out when an attempt first asks), until a commit changes that queue's.
        self._by_priority: dict[str, dict[int, list[JobInfo]]] = {}
        self._nodes_by_priority: dict[str, dict[int, IntArray]] = {}

    def blocked(self, session: Session, job: JobInfo) -> bool:
        # KAI's capacity policy weighs gpu-memory with the largest GPU, not the smallest `request` has.
        quota_request = kept_quota_request(session, kept_tasks(session, job))
        return session.check_quota(job, quota_request) is not None

    def started(self, session: Session, candidates: list[JobInfo]) -> None:
        self._by_priority.clear()
        self._nodes_by_priority.clear()

    def committed(self, session: Session, touched: list[JobInfo]) -> None:
        for job in touched:
            self._by_priority.pop(job.queue, None)
            self._nodes_by_priority.pop(job.queue, None)

    def refused_unsearched(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        return not self._lower_within_reach(session, job, tasks)

    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        heap = self._lower_within_reach(session, job, tasks)
        if not heap:
            return False

        def victims() -> Iterator[VictimUnit]:
            return order_victims(session, self.name, job, tasks, {job.queue: heap})

        def reason(victim: TaskInfo) -> str:
            return f"preempted by {job.key} (priority {job.priority}) in queue {job.queue}"

        return self.solve(session, Scenario(self.name, job, tasks, _no_rule, reason), victims)

    def _lower_within_reach(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> list[VictimEntry]:
        """The candidates of the job's queue of a lower priority with a pod on a node its pods may use, as
        a heap (none: the attempt searches for nothing)."""
        if (
            not self.by_queue.get(job.queue)
            or self._none_lower(job)
            or self._none_lower_within_reach(session, job, tasks)
        ):
            return []
        # Only jobs of lower priority may go: cut them out of the heap (sorted, so still a heap) before
        # ordering, rather than pass over every job of equal or higher priority in each attempt.
        return [
            entry
            for entry in self.heaps(session, [job.queue], tasks)[job.queue]
            if entry[2].priority < job.priority
        ]

    def _none_lower(self, job: JobInfo) -> bool:
        """Whether no candidate of the job's queue has a lower priority (then none on the nodes the job may
        use has, and the heap `attempt` cuts would be empty). Why: in a first cycle at 20,000 nodes most
        of the 663 attempts end so, and each made the queue's heap for its own nodes first."""
        return min(self._candidates_by_priority(job.queue)) >= job.priority

    def _candidates_by_priority(self, queue: str) -> dict[int, list[JobInfo]]:
        by_priority = self._by_priority.get(queue)
        if by_priority is None:
            by_priority = self._by_priority[queue] = {}
            for victim in self.by_queue[queue]:
                found = by_priority.get(victim.priority)
                if found is None:
                    by_priority[victim.priority] = [victim]
                else:
                    found.append(victim)
        return by_priority

    def _none_lower_within_reach(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        """Whether no candidate of the job's queue with a lower priority has an active pod on a node the
        job's pods may use (then the heap `attempt` cuts would be empty). Why: in a first cycle at 20,000
        nodes, 78 of the 82 attempts past `_none_lower` ordered the queue's candidates (600 jobs each) only
        to find none of them within reach. The nodes of one priority's candidates are worked out when
        first asked, none of those at or above the job's: a walk over the queue's candidates, 700 jobs
        for each of 37 queues at 20,000 nodes."""
        nodes_of = self._nodes_by_priority.setdefault(job.queue, {})
        usable = session.usable_nodes(tasks)
        for priority, victims in self._candidates_by_priority(job.queue).items():
            if priority >= job.priority:
                continue
            nodes = nodes_of.get(priority)
            if nodes is None:
                nodes = nodes_of[priority] = np.array(active_nodes(session, victims), dtype=np.intp)
            if usable[nodes].any():
                return False
        return True


def _no_rule(preemptor: JobInfo, victims: Sequence[TaskInfo]) -> bool:
    """Preempt has no fairness rule of its own: priority already decided who may go."""
    return True
