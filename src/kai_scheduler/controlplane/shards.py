"""Every scheduling shard of one cluster, one cycle each (the simulator's view of KAI's scale-out).

KAI runs one scheduler per `SchedulingShard`; each sees its own node pool (`model.partition`) and knows
nothing of the others. `ShardedDriver` runs them one after the other on the same instant: each shard's
`CycleDriver` on its own cache (`model.shard_caches.ShardedCache.shards`), with its own configuration and
its own time-based-fairness history. Shards share no node, queue or job, so the order in which they run
changes nothing, and their decisions are simply put together.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kai_scheduler.controlplane.bookkeeping import next_job_times
from kai_scheduler.controlplane.driver import CycleDriver, CycleOutcome, UsageSource
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.shard_caches import ShardedCache
from kai_scheduler.model.snapshot import JobTimes


@dataclass(frozen=True, slots=True)
class ShardRun:
    """One shard as the simulator runs it."""

    name: str
    partition: Partition
    driver: CycleDriver


@dataclass(frozen=True, slots=True)
class ShardedOutcome:
    """One cycle of every shard: each shard's outcome, in shard order, and their results put together."""

    outcomes: dict[str, CycleOutcome]
    result: SessionResult
    seconds: float


class ShardedDriver:
    """Runs each shard's scheduler on `cache.shards`, one cycle per `run`."""

    def __init__(
        self,
        cache: ShardedCache,
        shards: list[tuple[str, Partition, SchedulerConfig, UsageSource | None]],
    ) -> None:
        self.cache = cache
        self.shards = [
            ShardRun(name, partition, CycleDriver(config, cache.shards[name], usage))
            for name, partition, config, usage in shards
        ]

    def run(self, cycle: int, now: float) -> ShardedOutcome:
        started = time.perf_counter()
        outcomes = {shard.name: shard.driver.run(cycle, now) for shard in self.shards}
        return ShardedOutcome(outcomes, merged_result(list(outcomes.values())), time.perf_counter() - started)

    def job_times_after(self, outcome: ShardedOutcome, now: float) -> dict[str, JobTimes]:
        """Every job's times after the cycle: each shard's jobs by that shard's cycle (as each of KAI's
        schedulers keeps the times of its own PodGroups); jobs no shard holds keep theirs."""
        times = dict(self.cache.job_times)
        for shard in self.shards:
            shard_outcome = outcome.outcomes[shard.name]
            cache = shard.driver.cache
            running_after = cache.running_jobs
            jobs = shard_outcome.snapshot.jobs.keys() | running_after
            own = {job: t for job, t in times.items() if job in jobs}
            for job in own:
                del times[job]
            times.update(
                next_job_times(
                    own,
                    shard_outcome.running_before,
                    running_after,
                    shard_outcome.result.stale_since,
                    now,
                    shard_outcome.evicted_jobs(),
                    shard_outcome.result.reservations,
                )
            )
        return times


def merged_result(results: list[CycleOutcome]) -> SessionResult:
    """The shards' results as one: decisions, ungates and backfilled jobs in shard order; reasons, fair
    shares, staleness and reservations by job or queue (no two shards share one); the earliest wake-up."""
    decisions = []
    ungates = []
    unschedulable: dict[str, str] = {}
    fair_share: dict[str, tuple[float, float, float]] = {}
    stale_since: dict[str, float | None] = {}
    reservations: dict[str, Reservation | None] = {}
    backfilled: list[str] = []
    wakes = []
    for outcome in results:
        result = outcome.result
        decisions.extend(result.decisions)
        ungates.extend(result.ungates)
        unschedulable.update(result.unschedulable)
        fair_share.update(result.fair_share)
        stale_since.update(result.stale_since)
        reservations.update(result.reservations)
        backfilled.extend(result.backfilled)
        if result.wake_at is not None:
            wakes.append(result.wake_at)
    return SessionResult(
        decisions,
        unschedulable,
        fair_share,
        stale_since,
        wake_at=min(wakes) if wakes else None,
        ungates=ungates,
        reservations=reservations,
        backfilled=backfilled,
    )
