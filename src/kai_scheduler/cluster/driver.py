"""One scheduling cycle on a `ClusterCache`, the same for the simulator and live mode: queue usage in
(time-based fairness), snapshot, `Scheduler.run`, the cache told what the cycle decided, usage out."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import ClusterSnapshot
from kai_scheduler.scheduler import Scheduler


class UsageSource(Protocol):
    """Where time-based fairness gets each queue's recent usage (`model.usage.UsageRecorder`, or
    Prometheus in live mode)."""

    def before_cycle(self, now: float) -> Mapping[str, Resources]: ...

    def after_cycle(self, now: float, queues: Iterable[QueueInfo], capacity: Resources) -> None: ...


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    snapshot: ClusterSnapshot  # as the session left it (queues accounted, decisions applied)
    result: SessionResult
    running_before: frozenset[str]  # jobs that had a running pod when the cycle started
    seconds: float  # wall time from the snapshot to the decisions (what `cycleSeconds` reports)
    usage_seconds: float  # of which: asking for the queues' usage


class CycleDriver:
    def __init__(self, scheduler: Scheduler, cache: ClusterCache, usage: UsageSource | None = None) -> None:
        self.scheduler = scheduler
        self.cache = cache
        self.usage = usage

    def run(self, cycle: int, now: float) -> CycleOutcome:
        started = time.perf_counter()
        queue_usage = self.usage.before_cycle(now) if self.usage is not None else None
        usage_seconds = time.perf_counter() - started
        snapshot = self.cache.snapshot(queue_usage)
        running_before = self.cache.running_jobs
        result = self.scheduler.run(snapshot, cycle=cycle, now=now)
        self.cache.after_cycle(decision.pod for decision in result.decisions)
        seconds = time.perf_counter() - started
        if self.usage is not None:
            self.usage.after_cycle(now, snapshot.queues, snapshot.capacity)
        return CycleOutcome(snapshot, result, running_before, seconds, usage_seconds)
