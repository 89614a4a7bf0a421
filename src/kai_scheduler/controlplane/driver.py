"""One scheduling cycle on a `ClusterCache`, the same for the simulator and live mode: queue usage in
(time-based fairness), snapshot, `Scheduler.run`, the cache told what the cycle decided, usage out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Protocol

from kai_scheduler.controlplane.unchanged_cycles import UnchangedCycles, check_same, verify_requested
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import ConfigError, SchedulerConfig, shard_config
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.cache import ClusterCache, build_snapshot
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import ClusterSnapshot, ClusterState
from kai_scheduler.plugins.endpoints import ReflectJobOrderPlugin, SnapshotPlugin

# The plugins that only make the live scheduler serve something (its plugin server's endpoints).
SNAPSHOT_PLUGIN = SnapshotPlugin.name
JOB_ORDER_PLUGIN = ReflectJobOrderPlugin.name


class UsageSource(Protocol):
    """Where time-based fairness gets each queue's recent usage (`model.usage.UsageRecorder`, or
    Prometheus in live mode)."""

    def before_cycle(self, now: float) -> Mapping[str, Resources]: ...

    def after_cycle(self, now: float, queues: Iterable[QueueInfo], capacity: Resources) -> None: ...


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    snapshot: ClusterSnapshot  # as the session left it (queues accounted, decisions applied)
    result: SessionResult
    running_before: Set[str]  # jobs that had a running pod when the cycle started
    seconds: float  # wall time from the snapshot to the decisions (what `cycleSeconds` reports)
    usage_seconds: float  # of which: asking for the queues' usage
    # The last cycle's result, reused (`unchanged_cycles`): nothing changed, so neither do the job times.
    reused: bool = False
    # `evicted_jobs`, found as the cycle ended (None: found when asked). The snapshot's tasks are the
    # cache's, which change as it catches up with the decisions carried out (`ClusterCache.snapshot`).
    evicted: frozenset[str] | None = None

    def evicted_jobs(self) -> frozenset[str]:
        """The jobs the cycle evicted a pod of (their last eviction is now)."""
        if self.evicted is not None:
            return self.evicted
        return evicted_jobs(self.snapshot, self.result)


def evicted_jobs(snapshot: ClusterSnapshot, result: SessionResult) -> frozenset[str]:
    tasks = snapshot.tasks
    return frozenset(tasks[d.pod].job.key for d in result.decisions if d.type == "evict" and d.pod in tasks)


class CycleDriver:
    """Runs the scheduler configured by `config` on `cache`, one cycle per `run`."""

    def __init__(
        self, config: SchedulerConfig, cache: ClusterCache, usage: UsageSource | None = None
    ) -> None:
        self.scheduler = Scheduler(config)
        self.cache = cache
        cache.stuck_releases.threshold = config.stuck_in_releasing_threshold
        self.usage = usage
        # A cycle on an unchanged cluster reuses the last result (`unchanged_cycles`): `reuse` False
        # evaluates every cycle; `verify` evaluates and compares; `reused` counts the cycles that were
        # unchanged (reused, or under `verify` evaluated and compared).
        self.unchanged = UnchangedCycles()
        self.reuse = True
        self.verify = verify_requested()
        # The same variable checks the answers the scheduler carries from one cycle to the next per job.
        self.scheduler.memos.verify = self.verify
        cache.running_keeper.verify = self.verify  # and the running jobs it makes from what changed
        cache.lone_jobs.verify = self.verify  # and the bare pods' jobs made as the pods arrived
        self.reused = 0
        # Keep the fair-share division's steps in each result (`SessionResult.fair_share_record`): the
        # live scheduler's plugin server and `simulate --explain-fairshare` show them.
        self.record_fair_share = False
        # Reservation and backfill: when pods are expected to end, asked once per evaluated cycle with its
        # time (None: not asked; the edge sets it when the `reservation` plugin is configured).
        self.estimates: Callable[[float], RunEstimates] | None = None

    def run(self, cycle: int, now: float) -> CycleOutcome:
        """One cycle; on a cluster unchanged since a cycle that decided nothing, that cycle's result
        (`unchanged_cycles`), evaluated as well when `KAI_SCHEDULER_VERIFY_REUSE` is set."""
        started = time.perf_counter()
        queue_usage = self.usage.before_cycle(now) if self.usage is not None else None
        usage_seconds = time.perf_counter() - started
        cache = self.cache
        cache.catch_up(now)
        version = cache.version
        reused = self.unchanged.reusable(cache, queue_usage) if self.reuse else None
        if reused is not None:
            self.reused += 1
            if not self.verify:
                snapshot, result = reused
                running = cache.running_jobs
                seconds = time.perf_counter() - started
                return CycleOutcome(snapshot, result, running, seconds, usage_seconds, reused=True)
        snapshot = cache.snapshot(queue_usage, now)
        if self.estimates is not None:
            snapshot.run_estimates = self.estimates(now)
        running_before = cache.running_jobs
        result = self.scheduler.run(snapshot, cycle=cycle, now=now, record_fair_share=self.record_fair_share)
        cache.after_cycle(decision.pod for decision in result.decisions)
        if reused is not None:
            check_same(reused[1], result)
        seconds = time.perf_counter() - started
        if self.usage is not None:
            self.usage.after_cycle(now, snapshot.queues, snapshot.capacity)
        self.unchanged.remember(
            cache, version, queue_usage, snapshot, result, usage_recorded=self.usage is not None
        )
        evicted = evicted_jobs(snapshot, result)
        return CycleOutcome(snapshot, result, running_before, seconds, usage_seconds, evicted=evicted)


def job_order(config: SchedulerConfig, state: ClusterState, *, cycle: int, now: float) -> list[JobInfo]:
    """The pending jobs of `state` in the order the allocate action takes them up (KAI's
    `reflectjoborder`), on a snapshot of its own."""
    return Scheduler(config).job_order(build_snapshot(state, now), cycle=cycle, now=now)


def check_config(config: SchedulerConfig) -> None:
    """The scheduler's own checks of a configuration and of each of its shards' (unknown plugins or
    actions, bad plugin arguments) as a ConfigError, for an edge to run before any cycle (`simulate
    --compare` and `--sweep` check every configuration before the first run)."""
    Scheduler(config)
    for shard in config.shards:
        try:
            Scheduler(shard_config(config, shard.name))
        except ConfigError as error:
            raise ConfigError(f"shards[{config.shards.index(shard)}] ({shard.name}): {error}") from None
