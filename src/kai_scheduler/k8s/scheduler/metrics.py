"""KAI Scheduler's Prometheus metrics, with KAI's exact names (reference §8).

The scheduler's, on a `prometheus_client.CollectorRegistry` (its own, or one shared by all components when
they run in one process; the queue controller's are `status/metrics.py`):

* `SchedulerMetrics`: what the scheduler exposes (`pkg/scheduler/metrics/metrics.go` with
  `--metrics-namespace=kai`): cycle, session, action and plugin latencies (gauges, milliseconds), task
  scheduling and bind latency histograms (buckets 5 ms x 2^0..9), per-action pod group and scenario
  counters, preemption attempts, per-queue fair share and usage, evicted pods per pod group, and
  v0.17's victim scenario search (`search_metrics.py`).
  Beyond KAI's set, for the chart's dashboard: the pod groups and pods that wait, by queue and reason
  code (`kai_queue_pending_pod_groups`, `kai_queue_pending_pods`), and the cluster's GPUs
  (`kai_cluster_capacity_gpus`, `kai_cluster_allocated_gpus`, `kai_cluster_shared_gpus`, and
  `kai_cluster_idle_gpus` by placement: idle nodes, partly used nodes, unused parts of shared GPUs, the
  last two being the fragmented ones), each set after every cycle (`cycle_gauges.py`).
  Reservation and backfill's `kai_cluster_reserved_gpus` and `kai_backfilled_pod_groups_total`
  (`reservation_metrics.py`).

Where the scheduler's values come from in live mode (`SchedulerLoop`, every cycle it carries out):

* The scheduling core measures itself without I/O and returns it in the `SessionResult`: open and close
  session, each plugin's OnSessionOpen/OnSessionClose, each action's time, and per action the pod
  groups it took up (allocate, reclaim, preempt, consolidation; KAI's "considered") and the eviction
  scenarios it simulated or ruled out by the cheap GPU filter before simulating (reclaim, preempt,
  consolidation). `observe_session` feeds all of it in. Stale gang eviction takes up no pod groups one
  by one, so its acted-on count is the pod groups it took decisions for.
* `kai_e2e_scheduling_latency_milliseconds`: the loop's snapshot build and session.
* `kai_task_scheduling_latency_milliseconds`: from a pod's creation to its bind decision.
* `kai_task_bind_latency_milliseconds`: the scheduler's bind step for a pod, i.e. creating its
  BindRequest (KAI observes it around its cache's `Bind`, which creates the BindRequest; the binder is a
  separate component with controller-runtime metrics only, so its work is not in it).
* `kai_usage_query_latency_milliseconds` and `kai_queue_{cpu,memory,gpu}_usage`: only with time-based
  fairness (`usageDBConfig`); without it there is no usage history, so nothing to query or show (the
  histogram stays at zero observations, the gauges have no queue). There is no usage database here:
  the usage is answered from the loop's in-memory history (`UsageRecorder.before_cycle`), and that
  answer is what is timed, every cycle. The usage is each queue's share of the cluster's capacity over
  the window (0..1); a parent queue left out of the tree (fullHierarchyFairness off) shows the sum of
  its leaves', as its fair share does.
* Counters with an `action` label have no sample for an action until it counts something (e.g.
  `kai_scenarios_*_by_action` until a victim action searches scenarios); `kai_total_preemption_attempts`
  shows 0 until preempt takes up a pod group.

Units follow KAI: latencies in milliseconds; fair share in CPU cores, memory in GB (10^9 bytes) and GPUs;
queue quota in CPU cores and memory in bytes (the Queue spec holds millicores and MB).

On counter names: Prometheus' Python client always appends `_total` to a counter's name, but five of KAI's
counters (`kai_podgroups_scheduled_by_action`, `kai_podgroups_acted_on_by_action`,
`kai_scenarios_simulation_by_action`, `kai_scenarios_filtered_by_action`, `kai_total_preemption_attempts`)
have no such suffix, and dashboards query them by those names. They are exposed under their exact names
as untyped samples (PromQL's rate() and increase() work on them the same); `kai_pod_group_evicted_pods_total`
already ends in `_total` and is a regular counter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

from kai_scheduler.framework.decisions import Decision, SessionResult
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets
from kai_scheduler.k8s.scheduler.cycle_gauges import IDLE_PLACEMENTS, GpuAllocation, Waiting
from kai_scheduler.k8s.scheduler.reservation_metrics import ReservationMetrics
from kai_scheduler.k8s.scheduler.search_metrics import ScenarioSearchMetrics

LATENCY_BUCKETS_MS: tuple[float, ...] = tuple(5.0 * 2**exponent for exponent in range(10))
"""5 ms x 2^0..9 (5 ms to 2.56 s), KAI's buckets for task scheduling, bind and usage-query latency."""

MILLICORES_PER_CORE = 1000
BYTES_PER_GB = 1_000_000_000

ON_SESSION_OPEN = "OnSessionOpen"
ON_SESSION_CLOSE = "OnSessionClose"


@dataclass(frozen=True, slots=True)
class PodGroupRef:
    """The pod group a pod belongs to, for the labels of `kai_pod_group_evicted_pods_total`."""

    namespace: str
    name: str
    uid: str = ""


class _ExactCounter:
    """A monotonic counter exposed under exactly its name (no `_total` added), as an untyped family."""

    def __init__(
        self, name: str, documentation: str, label_names: Sequence[str], registry: CollectorRegistry
    ):
        self.name = name
        self.documentation = documentation
        self.label_names = tuple(label_names)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter can only go up, got {amount}")
        if set(labels) != set(self.label_names):
            raise ValueError(f"{self.name}: expected labels {self.label_names}, got {tuple(labels)}")
        key = tuple(labels[name] for name in self.label_names)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        with self._lock:
            return self._values.get(tuple(labels[name] for name in self.label_names), 0.0)

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "unknown")]

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, "unknown")
        with self._lock:
            values = sorted(self._values.items())
        if not self.label_names and not values:
            values = [((), 0.0)]
        for key, value in values:
            family.add_sample(self.name, dict(zip(self.label_names, key, strict=True)), value)
        yield family


class SchedulerMetrics:
    """The scheduler's metrics. `observe_cycle` records one scheduling cycle; the other methods record
    what only the code that measures it knows (session open/close, plugins, scenarios, task latencies)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace: str = "kai",
        node_pool: str = "default",
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.node_pool = node_pool
        prefix = f"{namespace}_" if namespace else ""
        r = self.registry

        def gauge(name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
            return Gauge(prefix + name, documentation, labelnames=labels, registry=r)

        def histogram(name: str, documentation: str) -> Histogram:
            return Histogram(prefix + name, documentation, buckets=LATENCY_BUCKETS_MS, registry=r)

        def counter(name: str, documentation: str, labels: Sequence[str] = ()) -> _ExactCounter:
            return _ExactCounter(prefix + name, documentation, labels, r)

        self.e2e_latency = gauge(
            "e2e_scheduling_latency_milliseconds", "E2e scheduling latency in milliseconds"
        )
        self.open_session_latency = gauge(
            "open_session_latency_milliseconds", "Open session latency in milliseconds"
        )
        self.close_session_latency = gauge(
            "close_session_latency_milliseconds", "Close session latency in milliseconds"
        )
        self.plugin_latency = gauge(
            "plugin_scheduling_latency_milliseconds",
            "Plugin scheduling latency in milliseconds",
            ("plugin", "OnSession"),
        )
        self.action_latency = gauge(
            "action_scheduling_latency_milliseconds", "Action scheduling latency in milliseconds", ("action",)
        )
        self.task_scheduling_latency = histogram(
            "task_scheduling_latency_milliseconds", "Task scheduling latency in milliseconds"
        )
        self.task_bind_latency = histogram(
            "task_bind_latency_milliseconds", "Task bind latency in milliseconds"
        )
        self.usage_query_latency = histogram(
            "usage_query_latency_milliseconds", "Usage database query latency in milliseconds"
        )
        self.podgroups_scheduled = counter(
            "podgroups_scheduled_by_action",
            "Pod groups scheduled, by the action that scheduled them",
            ("action",),
        )
        self.podgroups_acted_on = counter(
            "podgroups_acted_on_by_action", "Pod groups an action tried to schedule", ("action",)
        )
        self.scenarios_simulated = counter(
            "scenarios_simulation_by_action", "Eviction scenarios simulated, by action", ("action",)
        )
        self.scenarios_filtered = counter(
            "scenarios_filtered_by_action",
            "Eviction scenarios filtered out before simulation, by action",
            ("action",),
        )
        self.preemption_attempts = counter(
            "total_preemption_attempts", "Total preemption attempts in the cluster"
        )
        self.fair_share_cpu = gauge(
            "queue_fair_share_cpu_cores", "CPU fair share of a queue, in cores", ("queue_name",)
        )
        self.fair_share_memory = gauge(
            "queue_fair_share_memory_gb", "Memory fair share of a queue, in GB", ("queue_name",)
        )
        self.fair_share_gpu = gauge("queue_fair_share_gpu", "GPU fair share of a queue", ("queue_name",))
        self.queue_cpu_usage = gauge("queue_cpu_usage", "Time-based CPU usage of a queue", ("queue_name",))
        self.queue_memory_usage = gauge(
            "queue_memory_usage", "Time-based memory usage of a queue", ("queue_name",)
        )
        self.queue_gpu_usage = gauge("queue_gpu_usage", "Time-based GPU usage of a queue", ("queue_name",))
        self.evicted_pods = Counter(
            prefix + "pod_group_evicted_pods",  # exposed as ..._evicted_pods_total
            "Pods evicted, by pod group and the action that evicted them",
            labelnames=("podgroup", "namespace", "uid", "nodepool", "action"),
            registry=r,
        )
        # Not KAI's: what a dashboard needs beyond KAI's set (the chart's Grafana dashboard), after each
        # cycle (`cycle_gauges.py`).
        self.pending_pod_groups = gauge(
            "queue_pending_pod_groups",
            "Pod groups that ended the last cycle unschedulable, by queue and KAI's reason code",
            ("queue_name", "reason"),
        )
        self.pending_pods = gauge(
            "queue_pending_pods",
            "Pending pods of the pod groups that ended the last cycle unschedulable, by queue and reason",
            ("queue_name", "reason"),
        )
        self.cluster_capacity_gpus = gauge("cluster_capacity_gpus", "GPUs of the cluster's nodes")
        self.cluster_allocated_gpus = gauge(
            "cluster_allocated_gpus", "GPUs allocated to pods: whole GPUs plus the held parts of shared GPUs"
        )
        self.cluster_shared_gpus = gauge("cluster_shared_gpus", "GPUs shared by fractional pods")
        self.cluster_idle_gpus = gauge(
            "cluster_idle_gpus",
            "Idle GPUs by where they are: on an idle node (idle_node), as whole GPUs on a node with GPUs in "
            "use (partial_node), as the unused part of a shared GPU (shared_gpu)",
            ("placement",),
        )
        # Queue admission gating (KAI's design names both): pods held at the gate after the last cycle, and
        # the pods whose gate the scheduler removed.
        self.gated_pods = gauge(
            "admission_gating_gated_pods", "Pods held at the queue-admission gate, by queue", ("queue_name",)
        )
        self.ungated_pods = counter(
            "admission_gating_ungated_pods_total",
            "Pods whose queue-admission gate was removed",
            ("queue_name",),
        )
        self.search = ScenarioSearchMetrics(r, prefix)  # KAI v0.17's scenario_search_* (search_metrics.py)
        self.reservations = ReservationMetrics(r, prefix)  # reservation and backfill (reservation_metrics.py)
        self._fair_share_queues: set[str] = set()
        self._usage_queues: set[str] = set()
        self._waiting: set[tuple[str, str]] = set()
        self._gated_queues: set[str] = set()

    # --- one cycle -------------------------------------------------------------------------------

    def observe_cycle(
        self,
        seconds: float,
        action_seconds: Mapping[str, float],
        decisions: Sequence[Decision],
        fair_share: Mapping[str, tuple[float, float, float]],
        *,
        pod_groups: Mapping[str, PodGroupRef] | None = None,
        acted_on: Mapping[str, int] | None = None,
    ) -> None:
        """Record one cycle.

        `seconds`: the whole cycle; `action_seconds`: each action's time; `decisions`: the session's
        decisions in order; `fair_share`: queue -> (gpu, cpu millicores, memory bytes), as in
        `SessionResult.fair_share`; `pod_groups`: pod key (namespace/name) -> its pod group (a pod
        missing from it counts as a group of its own); `acted_on`: pod groups each action took up, for
        the actions that counted them (an action missing from it counts the groups it took a decision
        for, a lower bound). Each pod group the preempt action acts on is one preemption attempt.
        """
        self.e2e_latency.set(seconds * 1000)
        for action, elapsed in action_seconds.items():
            self.action_latency.labels(action=action).set(elapsed * 1000)

        groups = pod_groups or {}
        scheduled: dict[str, set[PodGroupRef]] = {}
        touched: dict[str, set[PodGroupRef]] = {}
        for decision in decisions:
            group = groups.get(decision.pod) or _own_group(decision.pod)
            touched.setdefault(decision.action, set())
            if decision.type == "evict":
                self.evicted_pods.labels(
                    podgroup=group.name,
                    namespace=group.namespace,
                    uid=group.uid,
                    nodepool=self.node_pool,
                    action=decision.action,
                ).inc()
            else:
                scheduled.setdefault(decision.action, set()).add(group)
                touched[decision.action].add(group)
        for action, jobs in scheduled.items():
            self.podgroups_scheduled.inc(len(jobs), action=action)
        attempts = {a: len(jobs) for a, jobs in touched.items()}
        attempts.update(acted_on or {})
        for action, count in attempts.items():
            if count:
                self.podgroups_acted_on.inc(count, action=action)
        if attempts.get("preempt"):
            self.preemption_attempts.inc(attempts["preempt"])
        self.set_fair_share(fair_share)

    def observe_session(
        self,
        result: SessionResult,
        seconds: float,
        action_seconds: Mapping[str, float] | None = None,
        *,
        pod_groups: Mapping[str, PodGroupRef] | None = None,
        acted_on: Mapping[str, int] | None = None,
        search_budgets: ScenarioSearchBudgets | None = None,
    ) -> None:
        """`observe_cycle` for a session's result, plus what the session measured about itself: open and
        close latency, each plugin's OnSessionOpen/OnSessionClose, and each action's pod groups taken
        up and eviction scenarios simulated and filtered, and the victim search's record (with the
        configured `search_budgets`, for their gauges). `action_seconds` and `acted_on` default to
        the result's own."""
        if action_seconds is None:
            action_seconds = result.action_seconds
        if acted_on is None:
            acted_on = {action: counts.acted_on for action, counts in result.counts.items()}
        self.observe_cycle(
            seconds,
            action_seconds,
            result.decisions,
            result.fair_share,
            pod_groups=pod_groups,
            acted_on=acted_on,
        )
        self.observe_open_session(result.open_seconds)
        self.observe_close_session(result.close_seconds)
        for plugin, elapsed in result.plugin_open_seconds.items():
            self.observe_plugin(plugin, ON_SESSION_OPEN, elapsed)
        for plugin, elapsed in result.plugin_close_seconds.items():
            self.observe_plugin(plugin, ON_SESSION_CLOSE, elapsed)
        for action, counts in result.counts.items():
            self.count_scenarios(
                action, simulated=counts.scenarios_simulated, filtered=counts.scenarios_filtered
            )
        self.search.observe(result.counts, search_budgets)

    def set_fair_share(self, fair_share: Mapping[str, tuple[float, float, float]]) -> None:
        """queue -> (gpu, cpu millicores, memory bytes); queues no longer present are dropped."""
        for queue, (gpu, millicores, memory_bytes) in fair_share.items():
            self.fair_share_gpu.labels(queue_name=queue).set(gpu)
            self.fair_share_cpu.labels(queue_name=queue).set(millicores / MILLICORES_PER_CORE)
            self.fair_share_memory.labels(queue_name=queue).set(memory_bytes / BYTES_PER_GB)
        for queue in self._fair_share_queues - set(fair_share):
            for gauge in (self.fair_share_gpu, self.fair_share_cpu, self.fair_share_memory):
                gauge.remove(queue)
        self._fair_share_queues = set(fair_share)

    def set_queue_usage(self, usage: Mapping[str, tuple[float, float, float]]) -> None:
        """queue -> time-based (gpu, cpu, memory) usage, each the queue's share of the cluster's capacity
        over the usage window (0..1), as the usage database reports it; queues no longer present are
        dropped."""
        for queue, (gpu, cpu, memory) in usage.items():
            self.queue_gpu_usage.labels(queue_name=queue).set(gpu)
            self.queue_cpu_usage.labels(queue_name=queue).set(cpu)
            self.queue_memory_usage.labels(queue_name=queue).set(memory)
        for queue in self._usage_queues - set(usage):
            for gauge in (self.queue_gpu_usage, self.queue_cpu_usage, self.queue_memory_usage):
                gauge.remove(queue)
        self._usage_queues = set(usage)

    def set_waiting(self, waiting: Mapping[tuple[str, str], Waiting]) -> None:
        """(queue, reason) -> the pod groups that wait and their pending pods; label sets gone since the
        last call are dropped."""
        for (queue, reason), counts in waiting.items():
            self.pending_pod_groups.labels(queue_name=queue, reason=reason).set(counts.pod_groups)
            self.pending_pods.labels(queue_name=queue, reason=reason).set(counts.pods)
        for queue, reason in self._waiting - set(waiting):
            self.pending_pod_groups.remove(queue, reason)
            self.pending_pods.remove(queue, reason)
        self._waiting = set(waiting)

    def set_admission_gating(self, gated: Mapping[str, int], ungated: Mapping[str, int]) -> None:
        """Queue -> its pods still at the queue-admission gate (queues gone since the last call are
        dropped), and queue -> the pods this cycle's ungate admitted."""
        for queue, count in gated.items():
            self.gated_pods.labels(queue_name=queue).set(count)
        for queue in self._gated_queues - set(gated):
            self.gated_pods.remove(queue)
        self._gated_queues = set(gated)
        for queue, count in ungated.items():
            self.ungated_pods.inc(count, queue_name=queue)

    def set_gpu_allocation(self, allocation: GpuAllocation) -> None:
        self.cluster_capacity_gpus.set(allocation.capacity)
        self.cluster_allocated_gpus.set(allocation.allocated)
        self.cluster_shared_gpus.set(allocation.shared)
        for placement in IDLE_PLACEMENTS:
            self.cluster_idle_gpus.labels(placement=placement).set(allocation.idle.get(placement, 0.0))

    # --- what the caller measures ----------------------------------------------------------------

    def observe_open_session(self, seconds: float) -> None:
        self.open_session_latency.set(seconds * 1000)

    def observe_close_session(self, seconds: float) -> None:
        self.close_session_latency.set(seconds * 1000)

    def observe_plugin(self, plugin: str, on_session: str, seconds: float) -> None:
        """A plugin's time in `OnSessionOpen` or `OnSessionClose`."""
        self.plugin_latency.labels(plugin=plugin, OnSession=on_session).set(seconds * 1000)

    def observe_task_scheduling(self, seconds: float) -> None:
        """From a pod's creation to the scheduler's decision for it."""
        self.task_scheduling_latency.observe(seconds * 1000)

    def observe_task_bind(self, seconds: float) -> None:
        """The scheduler's bind of one pod: from its bind decision being carried out to its BindRequest
        created (KAI times its cache's `Bind`, which creates the BindRequest; the binder's work after
        that is not in it)."""
        self.task_bind_latency.observe(seconds * 1000)

    def observe_usage_query(self, seconds: float) -> None:
        """Getting the queues' time-based usage for a cycle."""
        self.usage_query_latency.observe(seconds * 1000)

    def count_scenarios(self, action: str, *, simulated: int = 0, filtered: int = 0) -> None:
        if simulated:
            self.scenarios_simulated.inc(simulated, action=action)
        if filtered:
            self.scenarios_filtered.inc(filtered, action=action)


def _own_group(pod: str) -> PodGroupRef:
    namespace, _, name = pod.rpartition("/")
    return PodGroupRef(namespace=namespace or "default", name=name)


__all__ = [
    "LATENCY_BUCKETS_MS",
    "ON_SESSION_CLOSE",
    "ON_SESSION_OPEN",
    "PodGroupRef",
    "SchedulerMetrics",
]
