"""The holds of one cycle: which jobs hold capacity, where and from when, and which nodes a pod may use
because of them (`framework.holds.CapacityHolds`, registered by the `reservation` plugin).

A hold keeps, per reserved node, the room left there at the hold's start: what is free once the pods
ending by then are gone and releasing pods are gone, less what the holder's pods take. A pod expected to
end after the start (or never) may go on a reserved node only within that room, and placing it there
takes from it; a pod expected to end by the start goes anywhere (backfill). Resources counted: whole GPUs
(a shared pod as its portion of one), CPU and memory.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

import numpy as np

from kai_scheduler.framework.holds import Plan, StartPlanner
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.reservations import Reservation, RunEstimates

REJECTION: Final = "held for a job with a reservation"
_EPSILON: Final = 1e-6
# A start that moved by less than this is the same start (estimates are sums of floats).
_SAME_START: Final = 1.0
_HOLDING: Final = (TaskStatus.RUNNING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED)
# A job that cannot hold capacity (it would not fit even once every pod with an expected end ended) lets
# the next job in order try, up to this many plans per reservation allowed in a cycle.
_PLANS_PER_HOLD: Final = 4
# Reserved nodes named in a job's reason; the rest are counted.
_NODES_NAMED: Final = 3

Amounts = tuple[float, float, float]  # GPUs, CPU millicores, memory bytes


@dataclass(slots=True)
class _Hold:
    job: JobInfo
    start: float
    room: dict[int, list[float]]  # reserved node -> [GPUs, CPU, memory] left at the start
    gpus: float


class HoldBook:
    """What the `reservation` plugin holds in one session (see the module doc)."""

    def __init__(self, session: Session, estimates: RunEstimates, max_reservations: int) -> None:
        self.session = session
        self.estimates = estimates
        self.max_reservations = max_reservations
        nodes = session.snapshot.nodes
        self._everywhere = np.ones(nodes.size, dtype=np.bool_)
        self._everywhere.flags.writeable = False
        self.holds: list[_Hold] = []
        # While allocate runs: holds are made then only (the eviction actions' placements come later and
        # keep off held capacity all the same).
        self._allocating = False
        self._generation = 0
        self._holders: set[str] = set()
        # The earliest later time at which a pod found to end by a hold's start no longer would (it would
        # start later): the reasons worded now change then by the clock alone (`Session.wake_at`).
        self._flips: float | None = None
        self._plans = 0  # how many jobs' starts were planned in this cycle
        self._backfilled: list[str] = []
        # The jobs that held capacity when the cycle began (each waits: one that started lost it).
        self._before = {
            job.key: job.reservation
            for job in session.snapshot.jobs_at_open().waiting
            if job.reservation is not None
        }

    # --- what allocate tells ------------------------------------------------------------------------

    def start_action(self) -> None:
        self._allocating = True

    def end_action(self) -> None:
        self._allocating = False

    def job_placed(self, job: JobInfo, tasks: list[TaskInfo]) -> None:
        if not self._allocating or not self.holds or job.key in self._backfilled:
            return
        for task in tasks:
            end = self.end_of(task)
            for hold in self.holds:
                if task.node in hold.room and end is not None and end <= hold.start + _EPSILON:
                    self._backfilled.append(job.key)
                    return

    def job_unplaced(self, job: JobInfo, tasks: list[TaskInfo], plan: StartPlanner) -> None:
        if not self._allocating or len(self.holds) >= self.max_reservations or job.key in self._holders:
            return
        if job.is_gang_satisfied():
            return  # it runs (an elastic job growing): what it waits for is more, not to start
        if self._plans >= _PLANS_PER_HOLD * self.max_reservations:
            return  # the jobs ahead could not hold anything: a deep backlog is not planned job by job
        self._plans += 1
        avoid = self._held_nodes() if self.holds else None
        before = self._before.get(job.key)
        prefer = self._mask_of(before.nodes) if before is not None else None
        planned = plan(job, tasks, self.end_of, avoid=avoid, prefer=prefer)
        if planned is None:
            self.session.add_reason(
                job.key,
                "no reservation: it would not fit even once every pod with an expected end has ended",
            )
            return
        self._hold(job, planned)

    def signature(self, job: JobInfo, tasks: list[TaskInfo]) -> Hashable:
        if not self.holds:
            return None
        return (self._generation, job.key in self._holders, tuple(self._classes(task) for task in tasks))

    # --- the node filter ----------------------------------------------------------------------------

    def nodes_passing(self, task: TaskInfo) -> BoolArray:
        if not self.holds or task.job.key in self._holders:
            return self._everywhere
        end = self.end_of(task)
        passing: BoolArray | None = None
        need: Amounts | None = None
        for hold in self.holds:
            if self._in_time(end, hold):
                continue
            for node, room in hold.room.items():
                if need is None:
                    need = self._amounts(task, node)
                if any(amount > left + _EPSILON for amount, left in zip(need, room, strict=True)):
                    if passing is None:
                        passing = self._everywhere.copy()
                    passing[node] = False
        return self._everywhere if passing is None else passing

    def depends_on(self, task: TaskInfo) -> Hashable:
        """What the filter reads of the pod besides its request: whether it ends by each hold's start."""
        if not self.holds or task.job.key in self._holders:
            return None
        return (self._generation, self._classes(task))

    def on_allocate(self, task: TaskInfo) -> None:
        self._take(task, 1.0)

    def on_deallocate(self, task: TaskInfo) -> None:
        self._take(task, -1.0)

    # --- results ------------------------------------------------------------------------------------

    def updates(self) -> dict[str, Reservation | None]:
        """The jobs whose reservation changed in this cycle: made or moved (the new one), let go (None)."""
        names = self.session.snapshot.nodes.names
        now: dict[str, Reservation] = {}
        for hold in self.holds:
            nodes = tuple(sorted(names[node] for node in hold.room))
            before = self._before.get(hold.job.key)
            if before is not None and before.nodes == nodes and abs(before.start - hold.start) < _SAME_START:
                now[hold.job.key] = before
            else:
                now[hold.job.key] = Reservation(nodes, hold.start, hold.gpus)
        changes: dict[str, Reservation | None] = {key: None for key in self._before if key not in now}
        changes.update((key, value) for key, value in now.items() if self._before.get(key) != value)
        return changes

    def backfilled(self) -> list[str]:
        return list(self._backfilled)

    # --- inside ---------------------------------------------------------------------------------------

    def end_of(self, task: TaskInfo) -> float | None:
        """When the pod is expected to end: one that runs by the estimates; one placed now (a pending pod,
        or a running one evicted to be placed again: it starts over) after its whole duration; None: no
        expected end."""
        if task.status is TaskStatus.RUNNING:
            return self.estimates.ends.get(task.key)
        duration = self.estimates.durations.get(task.key)
        return None if duration is None else self.session.now + duration

    def _classes(self, task: TaskInfo) -> tuple[bool, ...]:
        end = self.end_of(task)
        return tuple(self._in_time(end, hold) for hold in self.holds)

    def _in_time(self, end: float | None, hold: _Hold) -> bool:
        """Whether a pod placed now and ending at `end` ends by `hold`'s start (backfill)."""
        if end is None or end > hold.start + _EPSILON:
            return False
        # From `flip` on, placed then, it would end after the start (at once, when it ends just in time).
        flip = max(self.session.now + hold.start - end, self.session.now + _EPSILON)
        if self._flips is None or flip < self._flips:
            self._flips = flip
        return True

    def wake_times(self) -> list[float]:
        """When what this cycle worked out changes by the clock alone (see `_flips`, and the estimates')."""
        times = [self._flips] if self._flips is not None else []
        if self._plans and self.estimates.changes_at is not None:
            times.append(self.estimates.changes_at)
        return times

    def _hold(self, job: JobInfo, plan: Plan) -> None:
        session = self.session
        nodes = session.snapshot.nodes
        free_cpu, free_memory, _ = nodes.free_soon()
        room: dict[int, list[float]] = {}
        for node in plan.nodes():
            gpus = float(nodes.free_gpus[node] + nodes.rel_gpus[node])
            room[node] = [gpus, float(free_cpu[node]), float(free_memory[node])]
        # What the pods on those nodes that end by the start give back.
        for task in session.snapshot.tasks.values():
            if task.node in room and task.status in _HOLDING:
                end = self.end_of(task)
                if end is not None and end <= plan.start + _EPSILON:
                    _add(room[task.node], self._amounts(task, task.node), 1.0)
        gpus = 0.0
        for task, node in plan.placements:
            amounts = self._amounts(task, node)
            _add(room[node], amounts, -1.0)
            gpus += amounts[0]
        self.holds.append(_Hold(job, plan.start, room, gpus))
        self._holders.add(job.key)
        self._generation += 1
        # Worded without the time left, so that a reason that stays the same reads the same each cycle.
        names = sorted(session.snapshot.nodes.names[node] for node in room)
        shown = ", ".join(names[:_NODES_NAMED]) + (
            f" and {len(names) - _NODES_NAMED} more" if len(names) > _NODES_NAMED else ""
        )
        session.add_reason(
            job.key, f"holds a reservation of {_count(gpus)} GPUs on {_plural(len(names), 'node')} ({shown})"
        )

    def _take(self, task: TaskInfo, sign: float) -> None:
        """A pod placed on (sign 1) or leaving (-1) a reserved node takes from (gives back to) the room
        left at each start it runs past."""
        if not self.holds or task.job.key in self._holders:
            return
        end = self.end_of(task)
        for hold in self.holds:
            room = hold.room.get(task.node)
            if room is not None and (end is None or end > hold.start + _EPSILON):
                _add(room, self._amounts(task, task.node), -sign)

    def _amounts(self, task: TaskInfo, node: int) -> Amounts:
        request = task.request
        gpus = float(request.whole_gpus)
        if request.is_shared_gpu:
            gpus += request.gpu_devices * self.session.snapshot.nodes.portion_on(request, node)
        return (gpus, request.cpu, request.memory)

    def _held_nodes(self) -> BoolArray:
        held = np.zeros(self.session.snapshot.nodes.size, dtype=np.bool_)
        for hold in self.holds:
            held[list(hold.room)] = True
        return held

    def _mask_of(self, names: tuple[str, ...]) -> BoolArray | None:
        index = self.session.snapshot.nodes.index
        rows = [index[name] for name in names if name in index]
        if not rows:
            return None
        mask = np.zeros(self.session.snapshot.nodes.size, dtype=np.bool_)
        mask[rows] = True
        return mask


def _add(room: list[float], amounts: Amounts, sign: float) -> None:
    for i, amount in enumerate(amounts):
        room[i] += sign * amount


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _count(gpus: float) -> str:
    return str(int(gpus)) if float(gpus).is_integer() else f"{gpus:g}"


__all__ = ["REJECTION", "HoldBook"]
