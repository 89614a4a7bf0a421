"""The simulation loop: cycles on a simulated clock, the cluster's effects between them, and when to stop."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kai_scheduler.api.objects import ApiObject, Node, Pod, PodGroup, Queue
from kai_scheduler.controlplane.bookkeeping import next_job_times
from kai_scheduler.controlplane.driver import CycleDriver, UsageSource
from kai_scheduler.controlplane.run_times import wants_run_estimates
from kai_scheduler.controlplane.shards import ShardedDriver
from kai_scheduler.framework.config import SchedulerConfig, shard_config
from kai_scheduler.framework.decisions import Decision, SessionResult, Ungating
from kai_scheduler.framework.shard_config import DEFAULT_SHARD
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.shard_caches import ShardedCache
from kai_scheduler.model.snapshot import JobTimes
from kai_scheduler.model.usage import UsageRecorder
from kai_scheduler.sim import gc_policy
from kai_scheduler.sim.in_memory_cluster import SimCluster, build_cluster
from kai_scheduler.sim.run_estimates import estimates_of
from kai_scheduler.sim.workloads import Workload


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
    # The pod groups whose queue-admission gate the cycle removed (`ungate`).
    ungates: list[Ungating] = field(default_factory=list)
    # The jobs the cycle placed on capacity reserved for another, expected to end before it starts
    # (reservation and backfill, `SessionResult.backfilled`).
    backfilled: list[str] = field(default_factory=list)


# Called after every cycle with its record and result (the report's recorder, the progress bar): nothing is
# recorded for a run that has no observer.
CycleObserver = Callable[[CycleRecord, SessionResult], None]


@dataclass(eq=False)
class SimulationResult:
    cluster: SimCluster
    cycles: list[CycleRecord]
    steady: bool
    time: float
    fair_share: dict[str, tuple[float, float, float]]
    # Why each job that still has pending pods waits, as of the last cycle that considered it.
    reasons: dict[str, str]
    # The scheduling shards, by name (None: one scheduler for every node, no partition).
    shards: dict[str, Partition] | None = None
    # When the run became steady (the time of its first cycle that found nothing to do or wait for).
    steady_since: float | None = None
    # Whether the configuration holds capacity for jobs that cannot start (the `reservation` plugin): the
    # result document then shows each pod group's reservation and the jobs backfilled.
    reserving: bool = False


@dataclass(frozen=True, slots=True)
class ShardPlan:
    name: str
    partition: Partition
    config: SchedulerConfig


def shard_plans(config: SchedulerConfig, objects: Sequence[ApiObject | Workload]) -> list[ShardPlan] | None:
    """The shards to schedule: the configured ones; none configured, KAI's default shard (the objects
    without the node-pool label) when some node, queue, PodGroup or pod carries the label; else None: one
    scheduler that sees everything, which is the default shard when nothing is labelled (and costs
    nothing)."""
    key = config.node_pool_label_key
    if config.shards:
        return [ShardPlan(s.name, s.partition(key), shard_config(config, s.name)) for s in config.shards]
    kinds = (Node, Queue, PodGroup, Pod)
    if any(
        (isinstance(o, kinds) and key in o.metadata.labels) or (isinstance(o, Workload) and o.has_label(key))
        for o in objects
    ):
        return [ShardPlan(DEFAULT_SHARD, Partition(key, None), config)]
    return None


class Simulation:
    def __init__(
        self, objects: Sequence[ApiObject | Workload], config: SchedulerConfig, options: SimulationOptions
    ) -> None:
        self.config = config
        self.options = options
        self.observers: list[CycleObserver] = []
        # Asked after every cycle (after the observers): True ends the run there, steady or not (the
        # start-time look-ahead stops once every job it watches has started). None: never.
        self.done: Callable[[], bool] | None = None
        plans = shard_plans(config, objects)
        self.shards = {plan.name: plan.partition for plan in plans} if plans is not None else None
        cache = ShardedCache(self.shards) if self.shards is not None else None
        self.cluster = build_cluster(objects, options.start, cache)
        self.cluster.stale_grace = config.default_staleness_grace_period
        self.cluster.evicted_unowned = config.evicted_unowned_pods
        self.cluster.admission_gating = config.admission_gating.enabled
        # Time-based fairness: the queues' usage, recorded after each cycle until the next one.
        self.usage = UsageRecorder(config.usage_db.params(options.start)) if config.usage_db else None
        self.driver = CycleDriver(config, self.cluster.cache, self.usage)
        self.usage_resolution: float | None = self.usage.history.params.resolution if self.usage else None
        # Node pools: every shard's scheduler on its own cache, each with its own usage history (as each
        # of KAI's schedulers keeps its own); `driver` and `usage` above are then not used.
        self.sharded: ShardedDriver | None = None
        if plans is not None and isinstance(cache, ShardedCache):
            usages = [
                UsageRecorder(p.config.usage_db.params(options.start)) if p.config.usage_db else None
                for p in plans
            ]
            resolutions = [u.history.params.resolution for u in usages if u is not None]
            self.usage_resolution = min(resolutions) if resolutions else None
            shards: list[tuple[str, Partition, SchedulerConfig, UsageSource | None]] = [
                (p.name, p.partition, p.config, u) for p, u in zip(plans, usages, strict=True)
            ]
            self.sharded = ShardedDriver(cache, shards)
        self.reserving = wants_run_estimates(config)
        if self.reserving:
            estimate = estimates_of(self.cluster)
            self.driver.estimates = estimate
            for shard in self.sharded.shards if self.sharded is not None else ():
                shard.driver.estimates = estimate

    def run(self) -> SimulationResult:
        cluster = self.cluster
        records: list[CycleRecord] = []
        fair_share: dict[str, tuple[float, float, float]] = {}
        reasons: dict[str, str] = {}
        steady = False
        steady_since: float | None = None
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
            for observe in self.observers:
                observe(record, result)
            fair_share = result.fair_share
            # In place: a copy of every job's reason each cycle costs as many entries as jobs wait (10,000
            # at 5,000 nodes), and updating keeps each job where it first came, as the copies did.
            reasons.update(result.unschedulable)
            if self.done is not None and self.done():
                break
            # Steady: nothing was decided (a pipeline promises a bind later) and nothing can change.
            # (An ungated pod is a change: it may be placed next cycle.)
            if not result.decisions and not result.ungates and not cluster.has_future_events():
                if not steady:
                    steady, steady_since = True, now
                if self.options.cycles is None:
                    # Nothing can change any more; with --until the clock simply runs out at D.
                    break
            idle = not (result.decisions or result.ungates) or self._nothing_waits()
            now = self._next_time(now, self.config.period, idle=idle)
        gc_policy.release_survivors()
        pending_jobs = {p.job_key for p in cluster.arrived_pods() if p.phase == "Pending"}
        return SimulationResult(
            cluster=cluster,
            cycles=records,
            steady=steady,
            time=self._final_time(records),
            fair_share=fair_share,
            reasons={job: reason for job, reason in reasons.items() if job in pending_jobs},
            shards=self.shards,
            steady_since=steady_since,
            reserving=self.reserving,
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
        cluster.run_controllers()
        cluster.admit_arrivals()
        result, seconds, times = self._schedule(number, now)
        cluster.write_conditions(result.unschedulable)
        cluster.cache.replace_job_times(times)
        cluster.wake_at = result.wake_at
        resolution = self.usage_resolution
        if resolution is not None and any(p.phase == "Pending" for p in cluster.arrived_pods()):
            # Time-based fairness: fair shares drift as usage ages, so pending pods are looked at again
            # once per usage bucket even when nothing else happens.
            drift = now + resolution
            cluster.wake_at = drift if result.wake_at is None else min(result.wake_at, drift)
        cluster.remove_terminated()
        # (Its own list: a reused cycle's result is the one of the cycle it repeats.)
        record = CycleRecord(number, now, result.decisions, seconds, result.ungates, list(result.backfilled))
        return record, result

    def _schedule(self, number: int, now: float) -> tuple[SessionResult, float, Mapping[str, JobTimes]]:
        """One cycle of the scheduler (of every shard), its decisions applied to the cluster: the result,
        its seconds, and every job's times after it."""
        cluster = self.cluster
        if self.sharded is not None:
            sharded = self.sharded.run(number, now)
            cluster.apply(sharded.result.decisions)
            cluster.ungate(sharded.result.ungates)
            return sharded.result, sharded.seconds, self.sharded.job_times_after(sharded, now)
        outcome = self.driver.run(number, now)
        result = outcome.result
        cluster.apply(result.decisions)
        cluster.ungate(result.ungates)
        cache = cluster.cache
        if outcome.reused:  # the cycle it repeats left the times as they are, and nothing changed since
            return result, outcome.seconds, cache.job_times
        times = next_job_times(
            cache.job_times,
            outcome.running_before,
            cache.running_jobs,
            result.stale_since,
            now,
            outcome.evicted_jobs(),
            result.reservations,
        )
        return result, outcome.seconds, times

    def _nothing_waits(self) -> bool:
        """Whether the cycles until the next event would decide nothing, although the last one decided
        something: no pod waits (every action but stale-gang eviction acts for a waiting pod, and a stale
        gang's deadline is an event), no workload controller has binds to react to, and no usage clock runs
        (time-based fairness). Such a cycle would see the state the last one left and change nothing (not
        even the fair shares: a bind moves a request from pending to allocated), so the clock skips to the
        next event as after an idle cycle: a replay of a trace then costs two cycles per arrival (its
        binds, then its completion) instead of three. (`--cycles N` counts the cycles that run, so it skips
        the same way.)"""
        return (
            self.usage_resolution is None and self.cluster.workloads is None and not self.cluster.has_pending
        )

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
