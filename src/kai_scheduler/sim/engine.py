"""The simulation loop: cycles on a simulated clock, the cluster's effects between them, and when to stop."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from kai_scheduler.api.objects import ApiObject
from kai_scheduler.cluster.bookkeeping import next_job_times
from kai_scheduler.cluster.driver import CycleDriver
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import Decision, SessionResult
from kai_scheduler.model.usage import UsageRecorder
from kai_scheduler.sim import gc_policy
from kai_scheduler.sim.cluster import SimCluster, build_cluster


@dataclass(frozen=True, slots=True)
class SimulationOptions:
    start: datetime
    cycles: int | None = None
    until: float | None = None
    max_cycles: int = 1000


@dataclass(frozen=True, slots=True)
class CycleRecord:
    cycle: int
    time: float
    decisions: list[Decision]
    seconds: float


@dataclass(eq=False)
class SimulationResult:
    cluster: SimCluster
    cycles: list[CycleRecord]
    steady: bool
    time: float
    fair_share: dict[str, tuple[float, float, float]]
    # Why each job that still has pending pods waits, as of the last cycle that considered it.
    reasons: dict[str, str]


class Simulation:
    def __init__(
        self, objects: Sequence[ApiObject], config: SchedulerConfig, options: SimulationOptions
    ) -> None:
        self.config = config
        self.options = options
        self.cluster = build_cluster(objects, options.start)
        self.cluster.stale_grace = config.default_staleness_grace_period
        # Time-based fairness: the queues' usage, recorded after each cycle until the next one.
        self.usage = UsageRecorder(config.usage_db.params(options.start)) if config.usage_db else None
        self.driver = CycleDriver(config, self.cluster.cache, self.usage)

    def run(self) -> SimulationResult:
        cluster = self.cluster
        records: list[CycleRecord] = []
        fair_share: dict[str, tuple[float, float, float]] = {}
        reasons: dict[str, str] = {}
        steady = False
        now = 0.0
        while not self._out_of_cycles(now, len(records)):
            if records:
                record, result = self._cycle(now, len(records) + 1)
            else:
                with gc_policy.collector_paused():
                    record, result = self._cycle(now, 1)
                    # It made the cluster's jobs and pods, which live as long as the run.
                    gc_policy.keep_survivors()
            records.append(record)
            fair_share = result.fair_share
            reasons = {**reasons, **result.unschedulable}
            # Steady: nothing was decided (a pipeline promises a bind later) and nothing can change.
            if not result.decisions and not cluster.has_future_events():
                steady = True
                if self.options.cycles is None:
                    # Nothing can change any more; with --until the clock simply runs out at D.
                    break
            now = self._next_time(now, self.config.period, idle=not result.decisions)
        gc_policy.release_survivors()
        pending_jobs = {p.job_key for p in cluster.arrived_pods() if p.phase == "Pending"}
        return SimulationResult(
            cluster=cluster,
            cycles=records,
            steady=steady,
            time=self._final_time(records),
            fair_share=fair_share,
            reasons={job: reason for job, reason in reasons.items() if job in pending_jobs},
        )

    def _out_of_cycles(self, now: float, cycles: int) -> bool:
        options = self.options
        if options.cycles is not None and cycles >= options.cycles:
            return True
        if options.until is not None and now > options.until + 1e-9:
            return True
        return options.cycles is None and options.until is None and cycles >= options.max_cycles

    def _cycle(self, now: float, number: int) -> tuple[CycleRecord, SessionResult]:
        """One scheduling cycle at `now`, then the cluster's effects (timed: snapshot to decisions)."""
        cluster = self.cluster
        cluster.now = now
        cluster.complete_due()
        cluster.admit_arrivals()
        outcome = self.driver.run(number, now)
        result = outcome.result
        cluster.apply(result.decisions)
        cache = cluster.cache
        times = next_job_times(
            cache.job_times, outcome.running_before, cache.running_jobs, result.stale_since, now
        )
        cache.replace_job_times(times)
        cluster.wake_at = result.wake_at
        if self.usage is not None and any(p.phase == "Pending" for p in cluster.arrived_pods()):
            # Time-based fairness: fair shares drift as usage ages, so pending pods are looked at again
            # once per usage bucket even when nothing else happens.
            drift = now + self.usage.history.params.resolution
            cluster.wake_at = drift if result.wake_at is None else min(result.wake_at, drift)
        cluster.remove_terminated()
        return CycleRecord(number, now, result.decisions, outcome.seconds), result

    def _final_time(self, records: list[CycleRecord]) -> float:
        last = records[-1].time if records else 0.0
        if self.options.until is not None and self.options.cycles is None:
            # The clock ran to D (possibly through idle time with nothing left to do).
            return max(last, self.options.until)
        return last

    def _next_time(self, now: float, period: float, *, idle: bool) -> float:
        """The next cycle's time; after a cycle that decided nothing, skip to the next event (on the
        period grid), since nothing can change before it."""
        following = now + period
        if idle:
            event = self.cluster.next_event_after(now)
            if event is not None:
                following = max(following, math.ceil(event / period - 1e-9) * period)
        return following
