"""`SchedulerLoop`: the scheduling core put to work on a live cluster.

Every `period` seconds: build the `ClusterState` from the informer caches (`k8s/state.py`), run one
cycle (`Scheduler.run`, pure, on a worker thread so that the informers keep up meanwhile), then carry out
its decisions through the API, as KAI's scheduler does:

* bind -> a `BindRequest` (scheduling.run.ai/v1alpha2) named after the pod, in its namespace, owned by
  the pod (so that it goes when the pod goes), labelled `selected-node=<node>`, with `podName`,
  `selectedNode`, `receivedResourceType` (Regular | Fraction | MigInstance), `receivedGPU {count,
  portion "%.2f"}`, `selectedGPUGroups`, `backoffLimit` and, for a pod with DRA claims,
  `resourceClaimAllocations` (each claim's devices). The binder does the binding. A BindRequest is
  never created twice for one pod: a pod with an outstanding BindRequest counts as bound (state.py), one
  just requested is remembered until the informer shows it, and 409 AlreadyExists means it is done. A
  Failed BindRequest, or one left from an earlier pod of the same name, is replaced.
* evict -> the pod's `eviction` subresource (policy/v1); the pod is remembered as terminating until the
  informer shows it so.
* pipeline -> remembered in memory for the next cycle only (the nominated node and shared GPUs), exactly
  as the simulator does; nothing is written.
* PodGroups: the `kai.scheduler/last-start-timestamp` annotation when a job goes from no running pod to
  some (removed when it has none), `kai.scheduler/stale-podgroup-timestamp` as the cycle reports staleness,
  and the status `schedulingConditions` entry of type `UnschedulableOnNodePool` for this node pool, with
  the reason (`NonPreemptibleOverQuota`, `OverLimit`, `QueueDoesNotExist`, else `Unschedulable`) and the
  message; it is removed once the job gets a placement. A Warning event records each new reason. The
  times are also kept in memory (newer than the cache for a moment after a write; the only record for
  jobs without a PodGroup object, i.e. bare pods when no pod grouper runs).
* Pods: each pending pod (no node, no outstanding BindRequest, not placed or pipelined this cycle) of a job
  that ends the cycle unschedulable gets the pod condition `PodScheduled` = `False`, reason
  `Unschedulable`, message = the job's reason (at most 1024 characters), as kube-scheduler and KAI set it
  (cluster autoscalers and Karpenter act on it): a merge patch of the `status` subresource with the pod's
  whole `conditions` list. Written only when status, reason or message change (what was written is
  remembered per pod uid); the binding sets `PodScheduled` = `True` later.

Times are on the `SessionClock` (seconds since the loop started; annotations in RFC 3339). With a
`LeaderElector`, only the leader schedules, and a cycle whose leadership was lost meanwhile writes nothing.
`run(stop)` returns after the cycle in progress when `stop` is set (graceful shutdown). Each cycle's
state is published as `last_cycle` for the plugin server (`plugin_server.py`: `/get-snapshot`, ...).
With `metrics`, each cycle carried out is recorded in them (what each one measures: `metrics.py`).
With `usageDBConfig`, the queues' time-based usage comes from Prometheus when it has a `connectionString`
(`prometheus_usage.py`, fetched in the background by `run`), else from the loop's in-memory history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kai_scheduler.api import constants as c
from kai_scheduler.cluster.bookkeeping import next_job_times, parse_rfc3339
from kai_scheduler.cluster.driver import CycleDriver, CycleOutcome, UsageSource
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import ClaimAllocation, Decision, SessionResult
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    POD_GROUPS,
    PODS,
    ApiStatusError,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.events import record_event
from kai_scheduler.k8s.runtime.informers import POD_INDEX, InformerSet
from kai_scheduler.k8s.runtime.kai_objects import bind_request_is_for
from kai_scheduler.k8s.runtime.objects import object_key
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.k8s.scheduler.metrics import PodGroupRef, SchedulerMetrics
from kai_scheduler.k8s.scheduler.plugin_server import CycleState
from kai_scheduler.k8s.scheduler.prometheus_usage import PrometheusUsage
from kai_scheduler.k8s.scheduler.state import LiveState, Placed, SessionClock, StateBuilder
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import ClusterSnapshot, JobTimes
from kai_scheduler.model.state_export import dump as dump_model
from kai_scheduler.model.usage import UsageRecorder

log = logging.getLogger(__name__)

SELECTED_NODE_LABEL = "selected-node"
UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
KNOWN_REASONS = ("NonPreemptibleOverQuota", "OverLimit", "QueueDoesNotExist")
DEFAULT_REASON = "Unschedulable"
DEFAULT_BACKOFF_LIMIT = 3
POD_SCHEDULED = "PodScheduled"
POD_REASON_UNSCHEDULABLE = "Unschedulable"  # kube's v1.PodReasonUnschedulable
MAX_CONDITION_MESSAGE = 1024


@dataclass(slots=True)
class CycleReport:
    """What one `run_once` did."""

    cycle: int
    now: float
    result: SessionResult | None = None
    bind_requests: list[str] = field(default_factory=list)  # pod keys a BindRequest was created for
    evictions: list[str] = field(default_factory=list)  # pod keys evicted
    pod_group_updates: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    acted: bool = True  # False when leadership was lost before the decisions were carried out

    @property
    def decisions(self) -> list[Decision]:
        return self.result.decisions if self.result is not None else []


def reason_of(message: str) -> str:
    """The scheduling-condition reason of an unschedulable explanation (its leading word when it is one
    of KAI's, e.g. "OverLimit: queue a would exceed ...")."""
    head = message.split(":", 1)[0].strip()
    return head if head in KNOWN_REASONS else DEFAULT_REASON


def claim_allocation_json(allocation: ClaimAllocation) -> JsonObject:
    """One `resourceClaimAllocations` entry of a BindRequest: the pod's claim name, the AllocationResult."""
    return {"name": allocation.name, "allocation": dump_model(allocation.allocation)}


def received_gpu(task: TaskInfo | None, snapshot: ClusterSnapshot, node: str) -> tuple[str, int, str]:
    """(receivedResourceType, receivedGPU.count, receivedGPU.portion) for a pod placed on `node`:
    Fraction: the number of shared devices and the portion of each; MigInstance: the number of instances
    (portion 1.00); Regular: whole GPUs (portion 1.00, or 0 GPUs at 0.00)."""
    if task is None:
        return ("Regular", 0, "0.00")
    request = task.request
    if request.is_shared_gpu:
        index = snapshot.nodes.index.get(node)
        portion = request.gpu_portion
        if portion <= 0 and index is not None:
            portion = float(snapshot.nodes.portion_for(request)[index])
        return ("Fraction", request.gpu_devices, f"{min(portion, 1.0):.2f}")
    if request.mig_instances and not request.whole_gpus:
        return ("MigInstance", int(sum(n for _, n in request.mig_instances)), "1.00")
    # GPUs of DRA claims are not the device plugin's: the BindRequest counts only those (as KAI's).
    devices = request.whole_gpus - request.dra_gpus
    return ("Regular", devices, "1.00" if devices else "0.00")


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
    ) -> None:
        self.client = client
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
        self.backoff_limit = backoff_limit
        # With a partition (a scheduling shard), its pool names this scheduler's conditions and BindRequests.
        self.partition = partition
        self.node_pool = partition.pool if partition is not None else node_pool
        self.record_events = record_events
        self.states = StateBuilder(
            informers,
            self.clock,
            scheduler_name=scheduler_name,
            require_pod_groups=require_pod_groups,
            partition=partition,
        )
        self.cycle = 0
        # In memory, between cycles (see the module doc).
        self.nominated: dict[str, Placed] = {}
        self.binding: dict[str, tuple[str, Placed]] = {}  # pod key -> (uid, placement) requested
        self.evicting: dict[str, str] = {}  # pod key -> uid evicted
        self.job_times: dict[str, JobTimes] = {}  # last start / stale since, as last written
        self._job_times_changed: set[str] = set()  # jobs whose entry changed since the last build
        # Jobs whose times are looked at again after the next cycle: those whose pods or PodGroup changed
        # (kept until a cycle got that far), and those the last cycle decided on or found stale.
        self._jobs_changed: set[str] = set()
        self._decided_jobs: set[str] = set()
        self.pod_conditions: dict[str, tuple[str, str, str]] = {}  # pod uid -> PodScheduled as written
        self.last_report: CycleReport | None = None
        # The state the last cycle scheduled, for the plugin server's threads (replaced, never changed);
        # only when published: the whole state is a walk over every pod each cycle.
        self.publish_cycles = publish_cycles
        self.last_cycle: CycleState | None = None
        self._semaphore = asyncio.Semaphore(concurrency)
        # BindRequests to look at for garbage (`_collect_garbage`): every one at first, then what changed.
        self._garbage_everything = True
        self._garbage_candidates: set[str] = set()
        self._watch_for_garbage()
        self._watch_pod_conditions()
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

    # --- one cycle -------------------------------------------------------------------------------

    def _leading(self) -> bool:
        return self.leading is None or self.leading()

    def reset_memory(self) -> None:
        """Forget what a previous term remembered (on gaining leadership)."""
        self.nominated.clear()
        self.binding.clear()
        self.evicting.clear()
        if self.usage is not None:
            self.usage.interrupt()  # the usage history is kept; the time without leadership is not in it

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
            binding=self.binding,
            evicting=self.evicting,
            job_times=self.job_times,
            job_times_changed=self._job_times_changed,
        )
        self._job_times_changed = set()
        self._jobs_changed |= live.changed_jobs
        outcome = await asyncio.to_thread(self._schedule, self.cycle, now)
        snapshot, result = outcome.snapshot, outcome.result
        report.result = result
        if self.publish_cycles:
            self.last_cycle = CycleState(self.cycle, now, self.origin, live.state)
        core_seconds = time.perf_counter() - started
        if not self._leading():
            report.acted = False
            log.info("cycle %d: leadership lost; its decisions are dropped", self.cycle)
            self.last_report = report
            return report
        await self._carry_out(live, snapshot, result, now, report)
        await self._collect_garbage(live, report)
        report.seconds = time.perf_counter() - started
        if self.metrics is not None:
            self._observe(live, snapshot, result, core_seconds)
        if report.errors:
            log.warning(
                "cycle %d: %d API errors (first: %s)", self.cycle, len(report.errors), report.errors[0]
            )
        self.last_report = report
        return report

    def _forget_resolved(self) -> None:
        """Drop memories the informers have caught up with."""
        pods = self.informers.pods
        for key, (uid, _) in list(self.binding.items()):
            obj = pods.cache.get(key)
            if (
                obj is None
                or str(obj["metadata"].get("uid")) != uid
                or (obj.get("spec") or {}).get("nodeName")
            ):
                del self.binding[key]
                continue
            request = self.informers.bind_requests.cache.get(key)
            if request is not None and bind_request_is_for(request, obj):
                del self.binding[key]
        for key, uid in list(self.evicting.items()):
            obj = pods.cache.get(key)
            if (
                obj is None
                or str(obj["metadata"].get("uid")) != uid
                or obj["metadata"].get("deletionTimestamp")
            ):
                del self.evicting[key]

    async def _limited(self, call: Awaitable[None], report: CycleReport, what: str) -> None:
        async with self._semaphore:
            try:
                await call
            except (ApiStatusError, ConnectionError, OSError) as error:
                report.errors.append(f"{what}: {error}")

    async def _carry_out(
        self,
        live: LiveState,
        snapshot: ClusterSnapshot,
        result: SessionResult,
        now: float,
        report: CycleReport,
    ) -> None:
        self.nominated = {}  # a pipeline promises resources for the next cycle only
        calls: list[Awaitable[None]] = []
        for decision in result.decisions:
            if decision.type == "pipeline":
                self.nominated[decision.pod] = Placed(decision.node, decision.gpu_groups)
            elif decision.type == "bind":
                self.nominated.pop(decision.pod, None)
                call = self._timed_bind(live, snapshot, decision, report)
                calls.append(self._limited(call, report, f"bind request {decision.pod}"))
            else:
                self.nominated.pop(decision.pod, None)
                calls.append(
                    self._limited(self._evict(live, decision, report), report, f"evict {decision.pod}")
                )
        await asyncio.gather(*calls)
        await self._update_pod_groups(live, result, now, report)

    # --- binds and evictions ---------------------------------------------------------------------

    def bind_request_body(self, pod: JsonObject, snapshot: ClusterSnapshot, decision: Decision) -> JsonObject:
        meta = pod["metadata"]
        resource_type, count, portion = received_gpu(
            snapshot.tasks.get(decision.pod), snapshot, decision.node
        )
        labels = {SELECTED_NODE_LABEL: decision.node}
        partition = self.partition
        if partition is not None and partition.value is not None:
            labels[partition.label_key] = partition.value  # KAI: the shard's partition labels
        elif partition is None and self.node_pool != "default":
            labels[c.NODE_POOL_LABEL] = self.node_pool
        return {
            "apiVersion": BIND_REQUESTS.api_version,
            "kind": BIND_REQUESTS.kind,
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace") or "default",
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": meta["name"],
                        "uid": meta.get("uid", ""),
                        "controller": False,
                        "blockOwnerDeletion": False,
                    }
                ],
            },
            "spec": {
                "podName": meta["name"],
                "selectedNode": decision.node,
                "receivedResourceType": resource_type,
                "receivedGPU": {"count": count, "portion": portion},
                "selectedGPUGroups": list(decision.gpu_groups),
                "backoffLimit": self.backoff_limit,
                **(
                    {"resourceClaimAllocations": [claim_allocation_json(a) for a in decision.claims]}
                    if decision.claims
                    else {}
                ),
            },
        }

    async def _timed_bind(
        self, live: LiveState, snapshot: ClusterSnapshot, decision: Decision, report: CycleReport
    ) -> None:
        """`_request_bind`, timed into `kai_task_bind_latency_milliseconds` whatever its outcome (as KAI
        times its cache's `Bind`, which creates the BindRequest)."""
        began = time.perf_counter()
        try:
            await self._request_bind(live, snapshot, decision, report)
        finally:
            if self.metrics is not None:
                self.metrics.observe_task_bind(time.perf_counter() - began)

    async def _request_bind(
        self, live: LiveState, snapshot: ClusterSnapshot, decision: Decision, report: CycleReport
    ) -> None:
        pod = live.pods.get(decision.pod)
        if pod is None:
            return
        meta = pod["metadata"]
        namespace, name, uid = meta.get("namespace") or "default", meta["name"], str(meta.get("uid") or "")
        existing = live.bind_requests.get(decision.pod)
        if existing is not None:
            if bind_request_is_for(existing, pod) and (existing.get("status") or {}).get("phase") != "Failed":
                return  # requested already (the state counts the pod as bound; defensive)
            await self._delete_bind_request(namespace, name)
        body = self.bind_request_body(pod, snapshot, decision)
        for attempt in range(2):
            try:
                await self.client.create(BIND_REQUESTS, body)
                break
            except ApiStatusError as error:
                if error.code != 409 or attempt:
                    raise
                current = await self._get_bind_request(namespace, name)
                if current is None:
                    continue
                if (
                    bind_request_is_for(current, pod)
                    and (current.get("status") or {}).get("phase") != "Failed"
                ):
                    return  # done before (a lost answer, another replica): never twice
                await self._delete_bind_request(namespace, name)
        self.binding[decision.pod] = (uid, Placed(decision.node, decision.gpu_groups, decision.claims))
        report.bind_requests.append(decision.pod)
        await self._label_pool(namespace, name, meta)

    async def _label_pool(self, namespace: str, name: str, meta: JsonObject) -> None:
        """KAI's `nodePoolLabelsChange`: a pod bound by the scheduler of a pool (a shard with a partition
        value) carries that pool's label, added when it lacks it (its PodGroup brought it to the shard)."""
        partition = self.partition
        if partition is None or partition.value is None:
            return
        if (meta.get("labels") or {}).get(partition.label_key) == partition.value:
            return
        try:
            await self.client.patch(
                PODS, name, {"metadata": {"labels": {partition.label_key: partition.value}}}, namespace
            )
        except ApiStatusError as error:
            if error.code != 404:  # gone: nothing to label
                raise

    async def _get_bind_request(self, namespace: str, name: str) -> JsonObject | None:
        try:
            return await self.client.get(BIND_REQUESTS, name, namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return None
            raise

    async def _delete_bind_request(self, namespace: str, name: str) -> None:
        try:
            await self.client.delete(BIND_REQUESTS, name, namespace)
        except ApiStatusError as error:
            if error.code != 404:
                raise

    async def _evict(self, live: LiveState, decision: Decision, report: CycleReport) -> None:
        pod = live.pods.get(decision.pod)
        if pod is None:
            return
        meta = pod["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        try:
            await self.client.evict(namespace, name)
        except ApiStatusError as error:
            if error.code != 404:  # gone already: as good as evicted
                raise
        self.evicting[decision.pod] = str(meta.get("uid") or "")
        report.evictions.append(decision.pod)
        if self.record_events:
            await self._event(pod, "Normal", "Evict", f"Evicted by {decision.action}: {decision.reason}")

    # --- pod groups ------------------------------------------------------------------------------

    async def _update_pod_groups(
        self, live: LiveState, result: SessionResult, now: float, report: CycleReport
    ) -> None:
        """Job times (annotations and the loop's memory), the PodGroups' unschedulable conditions and the
        pods' PodScheduled conditions after a cycle. Only jobs whose pods or PodGroup changed since the last
        cycle that got this far, or that this cycle or the last decided on or reported staleness for, can get
        new times: for every other job this cycle would compute what the last one did (they are left as they
        are)."""
        job_pods = live.job_pods
        placed_jobs: set[str] = set()
        change: dict[str, int] = {}  # job -> pods this cycle binds (+) or evicts (-)
        decided = {decision.pod for decision in result.decisions}
        for decision in result.decisions:
            job = live.job_of_pod.get(decision.pod)
            if job is None:
                continue
            if decision.type == "evict":
                change[job] = change.get(job, 0) - 1
                continue
            placed_jobs.add(job)
            if decision.type == "bind":
                change[job] = change.get(job, 0) + 1
        decided_jobs = change.keys() | placed_jobs | result.stale_since.keys()
        touched = self._jobs_changed | decided_jobs | self._decided_jobs
        self._jobs_changed, self._decided_jobs = set(), decided_jobs
        jobs = {job for job in touched if job in live.pod_groups or job in job_pods}  # those that exist
        running = {job: pods.running for job in jobs if (pods := job_pods.get(job)) is not None}
        running_before = {job for job, n in running.items() if n > 0}
        running_after = {job for job in jobs if running.get(job, 0) + change.get(job, 0) > 0}

        annotations: dict[str, dict[str, str | None]] = {}

        def annotate(job: str, name: str, value: str | None) -> None:
            obj = live.pod_groups.get(job)
            if obj is None:
                return
            current = ((obj.get("metadata") or {}).get("annotations") or {}).get(name)
            if current != value:
                annotations.setdefault(job, {})[name] = value

        before = {job: live.job_times.get(job, JobTimes()) for job in jobs}
        after = next_job_times(before, running_before, running_after, result.stale_since, now)
        for job in jobs | after.keys():
            old, new = before.get(job, JobTimes()), after.get(job, JobTimes())
            if old.last_start != new.last_start:
                stamp = None if new.last_start is None else self.clock.stamp(new.last_start)
                annotate(job, c.LAST_START_TIMESTAMP_ANNOTATION, stamp)
        for job, since in result.stale_since.items():
            annotate(
                job, c.STALE_PODGROUP_TIMESTAMP_ANNOTATION, None if since is None else self.clock.stamp(since)
            )
        # Remembered for every job that exists: it overrides the annotations until the cache shows them.
        for job in touched:
            if job in jobs or job in after:
                self.job_times[job] = after.get(job, JobTimes())
            else:
                self.job_times.pop(job, None)
        self._job_times_changed |= touched

        calls: list[Awaitable[None]] = []
        for job, changes in annotations.items():
            calls.append(
                self._limited(
                    self._annotate(live.pod_groups[job], changes), report, f"annotate PodGroup {job}"
                )
            )
        # Only PodGroups with something to say or something said before can get new conditions.
        speaking = result.unschedulable.keys() | placed_jobs | live.conditioned_groups
        for job in sorted(job for job in speaking if job in live.pod_groups):
            obj = live.pod_groups[job]
            message = result.unschedulable.get(job) if job not in placed_jobs else None
            pending = job in job_pods and job_pods[job].unbound > 0
            if message is None and pending and job not in placed_jobs:
                continue  # not considered this cycle: what it said last stays
            if message is None and not (obj.get("status") or {}).get("schedulingConditions"):
                continue  # nothing to say, nothing said before
            conditions = self._conditions(obj, message, now)
            if conditions is not None:
                call = self._set_conditions(obj, conditions, message, report)
                calls.append(self._limited(call, report, f"status of PodGroup {job}"))
        report.pod_group_updates = len(calls)
        calls.extend(self._pod_scheduled_calls(live, result, placed_jobs, decided, now, report))
        await asyncio.gather(*calls)

    def _pod_scheduled_calls(
        self,
        live: LiveState,
        result: SessionResult,
        placed_jobs: set[str],
        decided: set[str],
        now: float,
        report: CycleReport,
    ) -> list[Awaitable[None]]:
        """The `PodScheduled` = False writes for the pending pods of unschedulable jobs (jobs placed
        this cycle and pods with a decision are left alone)."""
        calls: list[Awaitable[None]] = []
        for job, message in result.unschedulable.items():
            pods = live.job_pods.get(job)
            if job in placed_jobs or pods is None:
                continue
            for key in pods.waiting:
                pod = live.pods.get(key)
                if pod is None or key in decided or key in self.nominated or key in self.binding:
                    continue
                conditions = self._pod_scheduled(pod, message[:MAX_CONDITION_MESSAGE], now)
                if conditions is not None:
                    call = self._set_pod_conditions(pod, conditions)
                    calls.append(self._limited(call, report, f"status of Pod {key}"))
        return calls

    def _pod_scheduled(self, pod: JsonObject, message: str, now: float) -> list[JsonObject] | None:
        """The pod's new `conditions` with PodScheduled False, or None when it (or what this loop wrote
        last, newer than the cache for a moment) says so already."""
        wanted = ("False", POD_REASON_UNSCHEDULABLE, message)
        uid = str(pod["metadata"].get("uid") or "")
        current: list[JsonObject] = list((pod.get("status") or {}).get("conditions") or [])
        ours = next((cond for cond in current if cond.get("type") == POD_SCHEDULED), None)
        shown = None if ours is None else (ours.get("status"), ours.get("reason"), ours.get("message"))
        if shown == wanted or self.pod_conditions.get(uid) == wanted:
            return None
        stamp = self.clock.stamp(now)
        if ours is not None and ours.get("status") == "False" and ours.get("lastTransitionTime"):
            stamp = str(ours["lastTransitionTime"])  # the status did not change: nor does the time
        condition: JsonObject = {
            "type": POD_SCHEDULED,
            "status": "False",
            "reason": POD_REASON_UNSCHEDULABLE,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
        return [condition if cond is ours else cond for cond in current] if ours else [*current, condition]

    async def _set_pod_conditions(self, pod: JsonObject, conditions: list[JsonObject]) -> None:
        meta = pod["metadata"]
        try:
            await self.client.patch(
                PODS,
                meta["name"],
                {"status": {"conditions": conditions}},
                meta.get("namespace") or "default",
                subresource="status",
            )
        except ApiStatusError as error:
            if error.code != 404:  # gone: nothing to mark
                raise
            return
        ours = next(cond for cond in conditions if cond.get("type") == POD_SCHEDULED)
        self.pod_conditions[str(meta.get("uid") or "")] = (
            str(ours["status"]),
            str(ours["reason"]),
            str(ours["message"]),
        )

    async def _annotate(self, obj: JsonObject, changes: Mapping[str, str | None]) -> None:
        meta = obj["metadata"]
        try:
            await self.client.patch(
                POD_GROUPS, meta["name"], {"metadata": {"annotations": dict(changes)}}, meta.get("namespace")
            )
        except ApiStatusError as error:
            if error.code != 404:
                raise

    def _conditions(self, obj: JsonObject, message: str | None, now: float) -> list[JsonObject] | None:
        """The new `schedulingConditions`, or None when nothing changes."""
        current: list[JsonObject] = list((obj.get("status") or {}).get("schedulingConditions") or [])
        ours = [
            cond
            for cond in current
            if cond.get("type") == UNSCHEDULABLE_ON_NODE_POOL and cond.get("nodePool") == self.node_pool
        ]
        others = [cond for cond in current if cond not in ours]
        if message is None:
            return others if ours else None
        reason = reason_of(message)
        if ours and ours[0].get("reason") == reason and ours[0].get("message") == message and len(ours) == 1:
            return None
        previous = ours[0].get("transitionID", "0") if ours else "0"
        transition = str(int(previous) + 1) if str(previous).isdigit() else "1"
        condition = {
            "type": UNSCHEDULABLE_ON_NODE_POOL,
            "nodePool": self.node_pool,
            "status": "True",
            "reason": reason,
            "message": message,
            "transitionID": transition,
            "lastTransitionTime": self.clock.stamp(now),
            "reasons": [{"reason": reason, "message": message}],
        }
        return [*others, condition]

    async def _set_conditions(
        self, obj: JsonObject, conditions: list[JsonObject], message: str | None, report: CycleReport
    ) -> None:
        meta = obj["metadata"]
        try:
            await self.client.patch(
                POD_GROUPS,
                meta["name"],
                {"status": {"schedulingConditions": conditions}},
                meta.get("namespace"),
                subresource="status",
            )
        except ApiStatusError as error:
            if error.code != 404:
                raise
            return
        if message is not None and self.record_events:
            await self._event(obj, "Warning", "Unschedulable", message)

    async def _event(self, obj: JsonObject, kind: str, reason: str, message: str) -> None:
        stamp = self.clock.stamp(self.clock.now())
        await record_event(
            self.client,
            obj,
            type=kind,
            reason=reason,
            message=message,
            component=self.scheduler_name,
            stamp=stamp,
        )

    # --- housekeeping ----------------------------------------------------------------------------

    def _watch_for_garbage(self) -> None:
        """BindRequests to look at again: new or changed ones, and those of pods that came or went (a pod
        that changes keeps its incarnation)."""
        requests = self.informers.bind_requests

        def request_changed(*objs: JsonObject) -> None:
            self._garbage_candidates.add(object_key(objs[-1]))

        def pod_came_or_went(pod: JsonObject) -> None:
            key = object_key(pod)
            self._garbage_candidates.add(key)  # a BindRequest named as its pod, even without `podName`
            self._garbage_candidates.update(object_key(r) for r in requests.by_index(POD_INDEX, key))

        requests.add_handler(request_changed, request_changed)
        self.informers.pods.add_handler(on_add=pod_came_or_went, on_delete=pod_came_or_went)

    def _watch_pod_conditions(self) -> None:
        """Forget what was written to a pod once it is gone (or replaced by a new pod of the same name)."""

        def uid(pod: JsonObject) -> str:
            return str((pod.get("metadata") or {}).get("uid") or "")

        def pod_replaced(old: JsonObject, new: JsonObject) -> None:
            if uid(old) != uid(new):
                self.pod_conditions.pop(uid(old), None)

        def pod_gone(pod: JsonObject) -> None:
            self.pod_conditions.pop(uid(pod), None)

        self.informers.pods.add_handler(on_update=pod_replaced, on_delete=pod_gone)

    async def _collect_garbage(self, live: LiveState, report: CycleReport, limit: int = 100) -> None:
        """Delete BindRequests whose pod is gone or was replaced by a new pod of the same name (the API
        server's garbage collector does this through the owner reference; a cluster without one, or a
        BindRequest without an owner, needs it done here). The first cycle looks at every BindRequest,
        later ones at those marked by `_watch_for_garbage` (and those left for later)."""
        cache = self.informers.bind_requests.cache
        if self._garbage_everything:
            self._garbage_everything = False
            self._garbage_candidates.update(cache)
        candidates = sorted(self._garbage_candidates)
        self._garbage_candidates = set()
        doomed: list[tuple[str, str]] = []
        for index, key in enumerate(candidates):
            if len(doomed) >= limit:
                self._garbage_candidates.update(candidates[index:])  # the next cycle's
                break
            obj = cache.get(key)
            if obj is None:
                continue
            meta = obj.get("metadata") or {}
            namespace = meta.get("namespace") or "default"
            pod_name = (obj.get("spec") or {}).get("podName") or meta.get("name")
            pod = self.informers.pods.cache.get(f"{namespace}/{pod_name}")
            if pod is None or not bind_request_is_for(obj, pod):
                if f"{namespace}/{pod_name}" in self.binding:
                    self._garbage_candidates.add(key)  # ours, not seen yet: looked at again
                    continue
                doomed.append((namespace, str(meta.get("name"))))
        calls = [
            self._limited(self._delete_bind_request(ns, name), report, f"delete BindRequest {ns}/{name}")
            for ns, name in doomed
        ]
        await asyncio.gather(*calls)

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
        self.metrics.observe_session(result, seconds, pod_groups=groups)
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


__all__ = [
    "DEFAULT_BACKOFF_LIMIT",
    "POD_SCHEDULED",
    "SELECTED_NODE_LABEL",
    "UNSCHEDULABLE_ON_NODE_POOL",
    "CycleReport",
    "SchedulerLoop",
    "queue_usage",
    "reason_of",
    "received_gpu",
]
