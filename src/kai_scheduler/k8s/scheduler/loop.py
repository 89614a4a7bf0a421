"""`SchedulerLoop`: the scheduling core put to work on a live cluster.

Every `period` seconds: build the `ClusterState` from the informer caches (`state.py`), run one
cycle (`Scheduler.run`, pure, on a worker thread so that the informers keep up meanwhile), then carry out
its decisions through the API, as KAI's scheduler does:

* bind -> a `BindRequest` (scheduling.run.ai/v1alpha2) named after the pod, in its namespace, owned by
  the pod (so that it goes when the pod goes), labelled `selected-node=<node>`, with `podName`,
  `selectedNode`, `receivedResourceType` (Regular | Fraction | MigInstance), `receivedGPU {count,
  portion "%.2f"}`, `selectedGPUGroups`, `backoffLimit` and, for a pod with DRA claims,
  `resourceClaimAllocations` (each claim's devices). The binder does the binding. A BindRequest is
  never created twice for one pod: a pod with an outstanding BindRequest counts as bound (state.py), one
  just created is put into the informer's cache at once (as KAI's cache does), and 409 AlreadyExists
  means it is done. A Failed BindRequest, or one left from an earlier pod of the same name, is replaced.
* evict -> the pod's `eviction` subresource (policy/v1); the pod is remembered as terminating until the
  informer shows it so. A Normal event on the pod names the action, the preemptor and the reason
  (`Preempted`; `Evicted` for a stale gang), one on its PodGroup (`Evict`) per action and preemptor.
* pipeline -> remembered in memory for the next cycle only (the nominated node and shared GPUs), exactly
  as the simulator does; nothing is written.
* PodGroups: `kai.scheduler/stale-podgroup-timestamp` as the cycle reports staleness,
  and the status `schedulingConditions` entry of type `UnschedulableOnNodePool` for this node pool, with
  the reason (`NonPreemptibleOverQuota`, `OverLimit`, `QueueDoesNotExist`, else `Unschedulable`) and the
  message; it is removed once the job gets a placement. A Warning event records each new reason (the
  start of a job is its pods' `Scheduled` events, the binder's: none on the PodGroup, as KAI). The
  times are also kept in memory (newer than the cache for a moment after a write; the only record for
  jobs without a PodGroup object, i.e. bare pods when no pod grouper runs). A job's last start, which KAI
  writes as `kai.scheduler/last-start-timestamp` when a job goes from no running pod to some, is kept in
  memory only: after a restart the job's running pods say it (`job_starts.py`; issue #23).
* Pods: each pending pod (no node, no outstanding BindRequest, not placed or pipelined this cycle) of a job
  that ends the cycle unschedulable gets the pod condition `PodScheduled` = `False`, reason
  `Unschedulable`, message = the job's reason (at most 1024 characters), as kube-scheduler and KAI set it
  (cluster autoscalers and Karpenter act on it): a merge patch of the `status` subresource with the pod's
  whole `conditions` list. Where the job cannot be built from what the user wrote, the reason says so
  and the message names the field (`PodGroupNotFound`, `InvalidPodGroup`, `QueueDoesNotExist`); a waiting
  pod the scheduler cannot take at all gets `InvalidPod` (`waiting.py`,
  docs/live-reasons.md). Written only when status, reason or message change (what was written is
  remembered per pod uid), with a Warning event of the same reason and message once per distinct pair;
  the binding sets `PodScheduled` = `True` later. Not for the pods of a PodGroup
  with `markUnschedulable: false`; with `schedulingBackoff: 1` the messages on the PodGroup and its pods
  start with "Node-Pool '<pool>': ", and the PodGroup's condition takes it out of scheduling on that pool
  (`model.scheduling_backoff`); no condition is written while the job has a pod bound (KAI).
* ungate (queue admission gating) -> a JSON patch of the pod removing the `kai.scheduler/queue-admission`
  gate and stamping `kai.scheduler/queue-admitted-timestamp`, and an `Admitted` event (`ungates.py`).
* Queues: each queue's fair share in `status.fairShare`, when it changed (`queue_fair_share.py`; not
  KAI's, for `kubectl kai queues`), and, on a cluster with AccountedResources, each one's usage and limit
  in `status.accountedResources` (`queue_accounted.py`).

Times are on the `SessionClock` (seconds since the loop started; annotations in RFC 3339). Under leader
election `run` runs during each term, and a cycle whose term ended meanwhile (`leading`) writes nothing.
`run(stop)` returns after the cycle in progress when `stop` is set (graceful shutdown).
This module drives the cycle and keeps the pipelines; each effect is a module of its own: `binds.py`,
`evictions.py`, `pod_groups.py`, `pod_conditions.py` (what they share: `effects.py`). Each cycle's
state is published as `last_cycle` for the plugin server (`plugin_server.py`: `/get-snapshot`, ...), and
one cycle's when asked (`request_state`: the start-time estimates of `start_times.py`).
With `metrics`, each cycle carried out is recorded in them (what each one measures: `metrics.py`).
With `usageDBConfig`, the queues' time-based usage comes from Prometheus when it has a `connectionString`
(`prometheus_usage.py`, fetched in the background by `run`), else from the loop's in-memory history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime

from kai_scheduler.api import constants as c
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.controlplane.driver import CycleDriver, CycleOutcome, UsageSource
from kai_scheduler.controlplane.run_times import wants_run_estimates
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.runtime import events
from kai_scheduler.k8s.runtime.access import Access, watching
from kai_scheduler.k8s.runtime.client import (
    KubeClient,
)
from kai_scheduler.k8s.runtime.informers import SCHEDULER_KINDS, InformerSet
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.k8s.scheduler import (
    binds,
    evictions,
    pod_conditions,
    pod_groups,
    queue_fair_share,
    ungates,
)
from kai_scheduler.k8s.scheduler.binds import DEFAULT_BACKOFF_LIMIT, BindRequests
from kai_scheduler.k8s.scheduler.cycle_gauges import admission_gating, gpu_allocation, waiting_by_queue
from kai_scheduler.k8s.scheduler.cycle_log import log_cycle
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.evictions import Evictions
from kai_scheduler.k8s.scheduler.live_state import LiveState, Placed, SessionClock
from kai_scheduler.k8s.scheduler.metrics import PodGroupRef, SchedulerMetrics
from kai_scheduler.k8s.scheduler.notices import NoticeEvents
from kai_scheduler.k8s.scheduler.plugin_server import CycleState
from kai_scheduler.k8s.scheduler.pod_conditions import PodScheduledConditions, stray_pods
from kai_scheduler.k8s.scheduler.pod_groups import PodGroupUpdates
from kai_scheduler.k8s.scheduler.prometheus_usage import PrometheusUsage
from kai_scheduler.k8s.scheduler.queue_accounted import QueueAccountedUsage
from kai_scheduler.k8s.scheduler.queue_fair_share import QueueFairShare
from kai_scheduler.k8s.scheduler.reservation_metrics import backfilled_by_queue
from kai_scheduler.k8s.scheduler.run_estimates import LiveRunEstimates, RunLog
from kai_scheduler.k8s.scheduler.state import StateBuilder
from kai_scheduler.k8s.scheduler.ungates import Ungates
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import ClusterSnapshot, JobTimes
from kai_scheduler.model.usage import UsageRecorder

log = logging.getLogger(__name__)

# What the loop and its effects call (a node pool's scheduler also labels pods: binds.POOL_LABEL_ACCESS).
ACCESS: tuple[Access, ...] = (
    *watching(SCHEDULER_KINDS),
    *binds.ACCESS,
    *evictions.ACCESS,
    *pod_groups.ACCESS,
    *pod_conditions.ACCESS,
    *queue_fair_share.ACCESS,
    *ungates.ACCESS,
    events.ACCESS,
)


class _PrometheusSource:
    """Queue usage from Prometheus for the cycle driver: the latest background answer (never waits; none
    when stale). Prometheus records the usage itself, so nothing is remembered after a cycle."""

    def __init__(self, prometheus: PrometheusUsage, clock: SessionClock) -> None:
        self.prometheus = prometheus
        self.clock = clock

    def before_cycle(self, now: float) -> dict[str, Resources]:
        return self.prometheus.usage(self.clock.start + now)

    def after_cycle(self, now: float, queues: Iterable[QueueInfo], capacity: Resources) -> None:
        del now, queues, capacity


class SchedulerLoop:
    """See the module doc. `client` writes, `informers` (started by the caller) are read.

    `backoff_limit`: the `backoffLimit` of every BindRequest; `node_pool`: the node pool this scheduler
    serves (schedulingConditions' `nodePool`, metrics); `concurrency`: API writes in flight at once;
    `record_events`: write Kubernetes Events for new unschedulable reasons and evictions."""

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        config: SchedulerConfig,
        period: float = 1.0,
        scheduler_name: str = c.SCHEDULER_NAME,
        metrics: SchedulerMetrics | None = None,
        *,
        leading: Callable[[], bool] | None = None,
        clock: SessionClock | None = None,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        node_pool: str = "default",
        partition: Partition | None = None,
        concurrency: int = 16,
        record_events: bool = True,
        require_pod_groups: bool = False,
        publish_cycles: bool = True,
        reconfigure: Callable[[], SchedulerConfig | None] | None = None,
    ) -> None:
        self.client = client
        # Asked before each cycle: a new configuration to run from then on (the shard's objects changed).
        self.reconfigure = reconfigure
        self.informers = informers
        self.config = config
        self.period = period
        self.scheduler_name = scheduler_name
        self.metrics = metrics
        # Under leader election (`runtime.leader.run_leading` runs `run` during each term), whether the
        # term still holds: a cycle takes time, and one whose term ended meanwhile writes nothing.
        self.leading = leading
        self._terms = 0  # calls of `run`: every one after the first starts a new term
        self.clock = clock or SessionClock()
        # With a partition (a scheduling shard), its pool names this scheduler's conditions and BindRequests.
        self.partition = partition
        self.node_pool = partition.pool if partition is not None else node_pool
        self.states = StateBuilder(
            informers,
            self.clock,
            scheduler_name=scheduler_name,
            require_pod_groups=require_pod_groups,
            partition=partition,
        )
        self.cycle = 0
        # In memory, between cycles (see the module doc): pipelines here, the rest with their effect.
        self.nominated: dict[str, Placed] = {}
        self.last_report: CycleReport | None = None
        # The state the last cycle scheduled, for the plugin server's threads (replaced, never changed);
        # only when published: the whole state is a walk over every pod each cycle.
        self.publish_cycles = publish_cycles
        self.last_cycle: CycleState | None = None
        # Asked for by the start-time estimates (`start_times.py`): publish the next cycle's state once.
        self.state_requested = False
        effects = Effects(
            client,
            self.clock,
            scheduler_name=scheduler_name,
            record_events=record_events,
            concurrency=concurrency,
        )
        self.binds = BindRequests(
            effects,
            informers,
            backoff_limit=backoff_limit,
            node_pool=self.node_pool,
            partition=partition,
            metrics=metrics,
        )
        self.evictions = Evictions(effects, informers)
        self.ungates = Ungates(effects, informers)
        label_key = partition.label_key if partition is not None else c.NODE_POOL_LABEL
        self.pod_groups = PodGroupUpdates(
            effects, self.node_pool, label_key, backed_off=lambda: self.states.cache.backed_off.keys()
        )
        self.pod_scheduled = PodScheduledConditions(effects, informers, label_key)
        self.notices = NoticeEvents(effects, informers)
        self.fair_share = QueueFairShare(effects, informers)
        self.accounted = QueueAccountedUsage(effects, informers)
        # Time-based fairness: from Prometheus (`usageDBConfig.clientType: prometheus` with a
        # `connectionString`; fetched in the background by `run`), else the usage history from this
        # scheduler's own cycles (kept in memory: a restarted scheduler starts a new history).
        # The session clock's second 0 as a wall-clock instant (usage windows, snapshots).
        self.origin = datetime.fromtimestamp(self.clock.start, tz=UTC)
        usage_db = config.usage_db
        self.prometheus: PrometheusUsage | None = None
        self.usage: UsageRecorder | None = None
        if usage_db is not None and usage_db.reads_prometheus:
            self.prometheus = PrometheusUsage(usage_db, wall=self.clock.wall)
        elif usage_db is not None:
            self.usage = UsageRecorder(usage_db.params(self.origin))
        self.usage_query_seconds = 0.0  # the last cycle's, for metrics
        usage: UsageSource | None = self.usage
        if self.prometheus is not None:
            usage = _PrometheusSource(self.prometheus, self.clock)
        self.driver = CycleDriver(config, self.states.cache, usage)
        self.driver.record_fair_share = publish_cycles  # the plugin server's /get-fair-share
        # Completed pods' run times, the process's one history: reservation's run estimates
        # (`run_estimates.py`, made for each cycle when the plugin is configured) and the start-time
        # estimates (`start_times.py`) learn from it and add to it, both on the event loop.
        self.history = RunLog()
        self.run_estimates = LiveRunEstimates(self.clock, self.history)

    def request_state(self) -> None:
        """Publish the next cycle's state as `last_cycle` (even when cycles are not published)."""
        self.state_requested = True

    @property
    def evicting(self) -> dict[str, str]:
        return self.evictions.evicting

    @property
    def job_times(self) -> dict[str, JobTimes]:
        return self.pod_groups.job_times

    # --- one cycle -------------------------------------------------------------------------------

    def _leading(self) -> bool:
        return self.leading is None or self.leading()

    def reset_memory(self) -> None:
        """Forget what a previous term remembered (on gaining leadership)."""
        self.nominated.clear()
        self.evictions.evicting.clear()
        self.fair_share.forget()
        self.accounted.forget()
        if self.usage is not None:
            self.usage.interrupt()  # the usage history is kept; the time without leadership is not in it

    def apply_config(self, config: SchedulerConfig) -> None:
        """Run the next cycles with `config` (already checked: `check_config`). The cluster cache and the
        usage go on; where the usage comes from is chosen at start: a changed `usageDBConfig` takes effect
        at a restart."""
        if config.usage_db != self.config.usage_db:
            log.warning("usageDBConfig changed: the scheduler reads usage from the new one after a restart")
        self.config = config
        record = self.driver.record_fair_share
        self.driver = CycleDriver(config, self.states.cache, self.driver.usage)
        self.driver.record_fair_share = record

    def _schedule(self, cycle: int, now: float) -> CycleOutcome:
        outcome = self.driver.run(cycle, now)
        self.usage_query_seconds = outcome.usage_seconds
        return outcome

    async def run_once(self) -> CycleReport:
        """Snapshot, one scheduling cycle, and its effects."""
        self.cycle += 1
        now = self.clock.now()
        report = CycleReport(self.cycle, now)
        started = time.perf_counter()
        self._forget_resolved()
        live = self.states.build(
            nominated=self.nominated,
            evicting=self.evicting,
            job_times=self.job_times,
            job_times_changed=self.pod_groups.job_times_changed,
        )
        self.pod_groups.job_times_changed = set()
        self.pod_groups.jobs_changed |= live.changed_jobs
        self._hand_run_estimates(live, now)
        outcome = await asyncio.to_thread(self._schedule, self.cycle, now)
        snapshot, result = outcome.snapshot, outcome.result
        report.result = result
        if self.publish_cycles or self.state_requested:
            self.state_requested = False
            self.last_cycle = CycleState(self.cycle, now, self.origin, live.state, result.fair_share_record)
        core_seconds = time.perf_counter() - started
        if not self._leading():
            report.acted = False
            log.info("cycle %d: leadership lost; its decisions are dropped", self.cycle)
            self.last_report = report
            return report
        await self._carry_out(live, snapshot, result, now, report)
        log_cycle(log, self.cycle, result)
        await self.binds.collect_garbage(live, report)
        report.seconds = time.perf_counter() - started
        if self.metrics is not None:
            self._observe(live, snapshot, result, core_seconds)
        if report.errors:
            log.warning(
                "cycle %d: %d API errors (first: %s)", self.cycle, len(report.errors), report.errors[0]
            )
        self.last_report = report
        return report

    def _hand_run_estimates(self, live: LiveState, now: float) -> None:
        """Give the cycle at `now` its run estimates when the configuration asks for them (made here, on the
        event loop, where the run history changes: see `run_estimates.py`)."""
        if not wants_run_estimates(self.config):
            self.driver.estimates = None
            return
        estimates = self.run_estimates.at(live, self.states.pod_group_states, now)
        self.driver.estimates = lambda _now: estimates

    def _forget_resolved(self) -> None:
        """Drop memories the informers have caught up with."""
        self.evictions.forget_resolved()

    async def _carry_out(
        self,
        live: LiveState,
        snapshot: ClusterSnapshot,
        result: SessionResult,
        now: float,
        report: CycleReport,
    ) -> None:
        self.nominated = {}  # a pipeline promises resources for the next cycle only
        limited = self.binds.effects.limited
        calls: list[Awaitable[None]] = []
        for decision in result.decisions:
            if decision.type == "pipeline":
                self.nominated[decision.pod] = Placed(decision.node, decision.gpu_groups)
            elif decision.type == "bind":
                self.nominated.pop(decision.pod, None)
                call = self.binds.bind(live, snapshot, decision, report)
                calls.append(limited(call, report, f"bind request {decision.pod}"))
            else:
                self.nominated.pop(decision.pod, None)
                call = self.evictions.evict(live, decision, report)
                calls.append(limited(call, report, f"evict {decision.pod}"))
        for ungating in result.ungates:
            calls.append(
                limited(self.ungates.ungate(live, ungating, report), report, f"ungate {ungating.job}")
            )
        await asyncio.gather(*calls)
        writes, placed_jobs = self.pod_groups.update(live, result, now, report)
        decided = {decision.pod for decision in result.decisions}

        def busy(key: str) -> bool:
            return key in decided or key in self.nominated

        stray = stray_pods(snapshot.jobs.values())
        writes.extend(self.pod_scheduled.calls(live, result, placed_jobs, busy, now, report, stray))
        writes.extend(self.notices.calls(live.noticed, report))
        writes.extend(self.fair_share.calls(result.fair_share, report))
        writes.extend(self.accounted.calls(snapshot, self.states.cache.version, report))
        await asyncio.gather(*writes)

    def _observe(
        self, live: LiveState, snapshot: ClusterSnapshot, result: SessionResult, seconds: float
    ) -> None:
        assert self.metrics is not None
        groups: dict[str, PodGroupRef] = {}  # for the pods decided on (what the metrics look up)
        for decision in result.decisions:
            pod_key = decision.pod
            job = live.job_of_pod.get(pod_key)
            if job is None:
                continue
            namespace, _, name = job.partition("/")
            obj = live.pod_groups.get(job)
            uid = str((obj or {}).get("metadata", {}).get("uid") or "")
            groups[pod_key] = PodGroupRef(namespace, name, uid)
        self.metrics.observe_session(
            result, seconds, pod_groups=groups, search_budgets=self.config.scenario_search_budgets
        )
        self.metrics.set_waiting(waiting_by_queue(snapshot, result.unschedulable))
        self.metrics.set_gpu_allocation(gpu_allocation(snapshot.nodes))
        self.metrics.set_admission_gating(*admission_gating(snapshot, result))
        self.metrics.reservations.observe(self.pod_groups.held.gpus(), backfilled_by_queue(snapshot, result))
        if self.usage is not None or self.prometheus is not None:
            self.metrics.observe_usage_query(self.usage_query_seconds)
            self.metrics.set_queue_usage(queue_usage(snapshot))
        wall = time.time()
        for decision in result.decisions:
            if decision.type != "bind":
                continue
            pod = live.pods.get(decision.pod)
            stamp = ((pod or {}).get("metadata") or {}).get("creationTimestamp")
            if stamp:
                with contextlib.suppress(ValueError):
                    self.metrics.observe_task_scheduling(
                        max(0.0, wall - parse_rfc3339(str(stamp)).timestamp())
                    )

    # --- running ---------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Cycles every `period` until `stop` is set (the cycle in progress completes). With usage from
        Prometheus, its fetcher runs meanwhile, and the first cycle waits up to `waitTimeout` for its
        first answer (good or bad), as KAI waits for its usage cache."""
        fetcher = None
        if self.prometheus is not None:
            fetcher = asyncio.create_task(self.prometheus.run(stop), name="prometheus-usage")
        try:
            await self._run(stop)
        finally:
            if fetcher is not None:
                fetcher.cancel()
                await asyncio.gather(fetcher, return_exceptions=True)

    async def _run(self, stop: asyncio.Event) -> None:
        self._terms += 1
        if self._terms > 1:
            self.reset_memory()  # a new term: what an earlier one remembered may be stale
        while not self.informers.synced:
            if await wait_or_stop(self.informers.wait_synced(30.0), stop):
                break
            if stop.is_set():
                return
            waiting = [i.kind.plural for i in self.informers if not i.synced.is_set()]
            log.warning("still waiting for the informer caches of %s", ", ".join(waiting))
        if self.prometheus is not None and not self.prometheus.answered.is_set():
            assert self.config.usage_db is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    wait_or_stop(self.prometheus.answered.wait(), stop), self.config.usage_db.wait_timeout
                )
        while not stop.is_set():
            started = time.monotonic()
            try:
                if self.reconfigure is not None and (config := self.reconfigure()) is not None:
                    self.apply_config(config)
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduling cycle %d failed", self.cycle)
            left = self.period - (time.monotonic() - started)
            if left > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), left)


def queue_usage(snapshot: ClusterSnapshot) -> dict[str, tuple[float, float, float]]:
    """Each queue's time-based usage in the session's queue tree, (gpu, cpu, memory) shares of the
    cluster's capacity; a parent queue taken out of the tree (fullHierarchyFairness off) shows the sum of
    its leaves', as its fair share does."""
    queues = snapshot.queues
    usage = {queue.name: queue.usage.values() for queue in queues}
    for name, (_, leaves) in queues.detached.items():
        total = Resources()
        for leaf in leaves:
            if leaf in queues:
                total.add(queues[leaf].usage)
        usage[name] = total.values()
    return usage


__all__ = ["SchedulerLoop", "queue_usage"]
