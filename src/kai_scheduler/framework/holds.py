"""Capacity held for jobs that cannot start now (reservation and backfill, issue #24): what the allocate
action tells a holder of capacity as it goes (`ExtensionPoints.holds`, registered by the `reservation`
plugin; None, the default, and allocate is exactly KAI's).

Holds are made only within allocate, in its order: a job taken up after a hold was made may not take the
held capacity unless it is expected to end before the hold starts, and neither may any placement of the
actions after allocate (a preemptor's, a consolidated pod's): they would delay the holder just as much. A
job allocate took up before the hold was made keeps what KAI's order gave it."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import BoolArray


@dataclass(frozen=True, slots=True)
class Plan:
    """Where each pod of an attempt would start (node index), and when (session clock)."""

    start: float
    placements: tuple[tuple[TaskInfo, int], ...]

    def nodes(self) -> frozenset[int]:
        return frozenset(node for _, node in self.placements)


class StartPlanner(Protocol):
    """The earliest start of `tasks` of `job` once pods end at `end_of` (None: no expected end), on nodes
    outside `avoid`, on the nodes of `prefer` when they give the same start; None: not even once every pod
    with an expected end has ended (`actions.start_planner.plan_start`, handed in by allocate, which owns
    how pods are placed)."""

    def __call__(
        self,
        job: JobInfo,
        tasks: list[TaskInfo],
        end_of: Callable[[TaskInfo], float | None],
        *,
        avoid: BoolArray | None = None,
        prefer: BoolArray | None = None,
    ) -> Plan | None: ...


class CapacityHolds(Protocol):
    def start_action(self) -> None:
        """Allocate begins: holds made from here on bind the jobs taken up after them."""

    def job_unplaced(self, job: JobInfo, tasks: list[TaskInfo], plan: StartPlanner) -> None:
        """`tasks` of `job` (its next attempt, which its queue may run) found no room: it may hold
        capacity from here on, where and from when `plan` says."""

    def job_placed(self, job: JobInfo, tasks: list[TaskInfo]) -> None:
        """`tasks` of `job` were placed."""

    def signature(self, job: JobInfo, tasks: list[TaskInfo]) -> Hashable:
        """What the holds made so far make of the attempt: attempts alike in it (and in their scheduling
        signature) fare alike."""

    def end_action(self) -> None:
        """Allocate is done: no hold binds any more in this cycle."""


__all__ = ["CapacityHolds", "Plan", "StartPlanner"]
