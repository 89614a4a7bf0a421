"""When and where a job that cannot start now could start (reservation and backfill, `framework.holds`):
the earliest time its pods fit once the pods that run end at their expected ends, and the nodes they would
take then.

How: the pods that hold resources on nodes the job may use (its static predicates) and have an expected
end are evicted, virtually, on a statement, in order of their ends; after each group of ends the job's pods
are placed as the victim actions place a preemptor (`actions.placement.place_pipelined`: onto idle or
releasing capacity, within its queue's limits and quota, with every predicate, topology constraint and
scorer). The first time at which they fit is found by doubling the number of ends taken into account, then
halving back (more ends mean more room); nothing of the search stays on the session. Pods with no expected
end never end here, so a job that only fits once one of them is gone gets no plan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from kai_scheduler.actions.placement import place_pipelined
from kai_scheduler.framework.holds import Plan, StartPlanner
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import BoolArray

# The statuses of pods that hold a node's resources until they end (releasing ones are already leaving).
_HOLDING = (TaskStatus.RUNNING, TaskStatus.ALLOCATED)


def plan_start(
    session: Session,
    job: JobInfo,
    tasks: list[TaskInfo],
    end_of: Callable[[TaskInfo], float | None],
    *,
    avoid: BoolArray | None = None,
    prefer: BoolArray | None = None,
) -> Plan | None:
    """The earliest start of `tasks` of `job` on nodes outside `avoid` (held for other jobs), with the
    nodes of `prefer` (where it was planned before) when they give the same start; None when it does not
    fit even once every pod with an expected end (`end_of`) has ended."""
    usable = session.usable_nodes(tasks)
    if avoid is not None:
        usable = usable & ~avoid
    ends = _ends_by_time(session, job, usable, end_of)
    first = _fewest_possible(session, tasks, ends, usable)
    if first is None:
        return None
    search = _Search(session, job, tasks, ends)
    with session.confined_to(usable):
        found = search.earliest(first)
        if found is None:
            search.statement.discard()
            return None
        steps, placements = found
        if prefer is not None and frozenset(node for _, node in placements) != _nodes_of(prefer):
            kept = search.probe(steps, within=prefer)
            if kept is not None:
                placements = kept
    search.statement.discard()
    start = max(session.now, ends[steps - 1][0]) if steps else session.now
    return Plan(start, placements)


def planner_for(session: Session) -> StartPlanner:
    """`plan_start` on `session`, as the capacity holder asks it."""
    return functools.partial(plan_start, session)


def _fewest_possible(
    session: Session, tasks: list[TaskInfo], ends: list[tuple[float, list[TaskInfo]]], usable: BoolArray
) -> int | None:
    """The fewest end times after which the pods could fit by their whole GPUs alone (None: not even
    after all): each pod needs a node with its GPUs free, so the nodes' free GPUs must give a place to
    every pod and hold their sum. A cheap bound below the placement probes (a gang of 16 x 8 GPUs needs
    16 emptied nodes long after the freed GPUs add up to 128). Freed GPUs are counted generously (a
    shared pod as all its devices), so the bound never passes over a time at which the pods do fit."""
    asks = [task.request.whole_gpus for task in tasks]
    if not asks or min(asks) <= 0 or any(task.request.is_shared_gpu for task in tasks):
        return 0
    smallest, total = min(asks), sum(asks)
    nodes = session.snapshot.nodes
    free = {int(n): float(nodes.free_gpus[n] + nodes.rel_gpus[n]) for n in np.flatnonzero(usable)}
    places = sum(int(gpus // smallest) for gpus in free.values())
    free_total = sum(free.values())
    for steps in range(len(ends) + 1):
        if steps:
            for task in ends[steps - 1][1]:
                request = task.request
                freed = request.whole_gpus + request.gpu_devices
                before = free[task.node]
                free[task.node] = before + freed
                places += int(free[task.node] // smallest) - int(before // smallest)
                free_total += freed
        if places >= len(asks) and free_total >= total:
            return steps
    return None


def _nodes_of(mask: BoolArray) -> frozenset[int]:
    return frozenset(int(node) for node in np.flatnonzero(mask))


def _ends_by_time(
    session: Session, job: JobInfo, usable: BoolArray, end_of: Callable[[TaskInfo], float | None]
) -> list[tuple[float, list[TaskInfo]]]:
    """The pods on `usable` nodes that have an expected end, grouped by it, earliest first; the job's
    own running pods are not among them (its start does not wait for them to end)."""
    by_time: dict[float, list[TaskInfo]] = {}
    for task in session.snapshot.tasks.values():
        if task.status not in _HOLDING or task.node < 0 or not usable[task.node] or task.job is job:
            continue
        end = end_of(task)
        if end is not None:
            by_time.setdefault(end, []).append(task)
    return sorted(by_time.items(), key=lambda entry: entry[0])


class _Search:
    """The virtual evictions of the first `steps` end times, on one statement, and placement probes on
    top of them (each probe is rolled back; the evictions stay until the number of steps goes down)."""

    def __init__(
        self, session: Session, job: JobInfo, tasks: list[TaskInfo], ends: list[tuple[float, list[TaskInfo]]]
    ) -> None:
        self.session = session
        self.job = job
        self.tasks = tasks
        self.ends = ends
        self.statement: Statement = session.statement("reservation")
        # The statement's position once the first `i` end times are evicted (index i).
        self._positions = [self.statement.checkpoint()]

    def earliest(self, first: int) -> tuple[int, tuple[tuple[TaskInfo, int], ...]] | None:
        """The fewest end times after which the pods fit, and where they go then; fewer than `first` are
        known not to do."""
        placed = self.probe(first)
        if placed is not None:
            return first, placed
        failed, gap = first, 1
        most = len(self.ends)
        while True:
            steps = first + gap
            if steps > most:
                if failed == most:
                    return None
                steps = most
            placed = self.probe(steps)
            if placed is not None:
                break
            failed, gap = steps, gap * 2
        # Between `failed` (no fit) and `steps` (a fit): halve down to the first that fits.
        best = (steps, placed)
        low, high = failed, steps
        while high - low > 1:
            middle = (low + high) // 2
            found = self.probe(middle)
            if found is None:
                low = middle
            else:
                high, best = middle, (middle, found)
        return best

    def probe(self, steps: int, within: BoolArray | None = None) -> tuple[tuple[TaskInfo, int], ...] | None:
        """Where the pods go once the first `steps` end times have passed (None: they do not fit)."""
        self._evict_through(steps)
        statement = self.statement
        mark = statement.checkpoint()
        if within is None:
            failure = place_pipelined(self.session, statement, self.job, self.tasks, _no_reason)
        else:
            with self.session.confined_to(within):
                failure = place_pipelined(self.session, statement, self.job, self.tasks, _no_reason)
        placed = tuple((task, node) for task, node, _ in statement.placements_since(mark))
        statement.rollback(mark)
        return placed if failure is None else None

    def _evict_through(self, steps: int) -> None:
        positions = self._positions
        if steps < len(positions):
            self.statement.rollback(positions[steps])
            del positions[steps + 1 :]
            return
        for _, tasks in self.ends[len(positions) - 1 : steps]:
            for task in tasks:
                self.statement.evict(task, "")
            positions.append(self.statement.checkpoint())


def _no_reason(task: TaskInfo, node: str) -> str:
    return ""


__all__ = ["plan_start", "planner_for"]
