"""Reservation and backfill's data (issue #24, `plugins/reservation`): what a job holds across cycles and
what the scheduler expects of how long pods run. Pure values: the edges fill in `RunEstimates` from their
records by the rule of `controlplane.run_times`, and keep each job's `Reservation` with its other times
(`JobTimes.reservation`, on the PodGroup in live mode)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Reservation:
    """Capacity held for a job that cannot start now: the nodes its pods are expected to start on (sorted
    by name), when (session-clock seconds) and how many GPUs it holds there. No other job is placed on
    that capacity unless it is expected to end by `start`."""

    nodes: tuple[str, ...]
    start: float
    gpus: float = 0.0


@dataclass(frozen=True, slots=True)
class RunEstimates:
    """When the pods of ours are expected to end: `ends` (session-clock seconds) for the pods that run now,
    `durations` (seconds) of every pod that has one, what it runs once placed, or placed again after an
    eviction or a move (a pod starts over). A pod left out has no estimate: it is taken to run for good."""

    ends: Mapping[str, float] = field(default_factory=dict)
    durations: Mapping[str, float] = field(default_factory=dict)
    # The earliest later time at which these change by the clock alone: a running pod outruns the
    # duration estimated for it, and then has no expected end (None: never).
    changes_at: float | None = None


__all__ = ["Reservation", "RunEstimates"]
