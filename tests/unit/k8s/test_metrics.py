"""KAI's metric names, labels, units and types, as Prometheus scrapes them."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from helpers import node, pod, queue, snapshot_of
from kai_scheduler.api.objects import ApiObject, Queue
from kai_scheduler.cycle import ACTIONS, PLUGINS, Scheduler
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.framework.decisions import ActionCounts, Decision, SessionResult
from kai_scheduler.framework.session import Session
from kai_scheduler.k8s.scheduler.metrics import (
    LATENCY_BUCKETS_MS,
    PodGroupRef,
    SchedulerMetrics,
)
from kai_scheduler.k8s.status.metrics import QueueMetrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(registry: CollectorRegistry) -> tuple[str, Samples, dict[str, str]]:
    """The exposition text, every sample by (name, sorted labels), and each family's TYPE."""
    text = generate_latest(registry).decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    types = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
    return text, samples, types


def _decision(action: str, kind: str, pod: str, node: str = "node-1") -> Decision:
    return Decision(action=action, type=kind, pod=pod, node=node, gpu_groups=(), reason="test")  # type: ignore[arg-type]


DECISIONS = [
    _decision("allocate", "bind", "ml/train-0"),
    _decision("allocate", "bind", "ml/train-1"),  # same pod group as train-0
    _decision("allocate", "bind", "web/serve-0"),  # no pod group given: a group of its own
    _decision("reclaim", "evict", "ml/old-0"),
    _decision("reclaim", "evict", "ml/old-1"),
    _decision("reclaim", "pipeline", "dev/nb-0"),
    _decision("preempt", "evict", "dev/nb-1"),
    _decision("preempt", "pipeline", "dev/urgent-0"),
]
POD_GROUPS = {
    "ml/train-0": PodGroupRef("ml", "train", "uid-train"),
    "ml/train-1": PodGroupRef("ml", "train", "uid-train"),
    "ml/old-0": PodGroupRef("ml", "old", "uid-old"),
    "ml/old-1": PodGroupRef("ml", "old", "uid-old"),
    "dev/nb-0": PodGroupRef("dev", "nb", "uid-nb"),
    "dev/nb-1": PodGroupRef("dev", "nb1", "uid-nb1"),
    "dev/urgent-0": PodGroupRef("dev", "urgent", "uid-urgent"),
}
FAIR_SHARE = {"ml": (6.0, 32_000.0, 256e9), "dev": (0.5, 1500.0, 4e9)}


def _record_cycle() -> tuple[SchedulerMetrics, str, Samples, dict[str, str]]:
    metrics = SchedulerMetrics(node_pool="pool-a")
    metrics.observe_open_session(0.012)
    metrics.observe_close_session(0.003)
    metrics.observe_plugin("proportion", "OnSessionOpen", 0.004)
    metrics.observe_cycle(
        0.25,
        {"allocate": 0.1, "reclaim": 0.05, "preempt": 0.02},
        DECISIONS,
        FAIR_SHARE,
        pod_groups=POD_GROUPS,
    )
    metrics.count_scenarios("reclaim", simulated=7, filtered=3)
    for seconds in (0.004, 0.007, 0.030, 3.0):
        metrics.observe_task_scheduling(seconds)
    metrics.observe_task_bind(0.02)
    metrics.observe_usage_query(0.001)
    text, samples, types = _scrape(metrics.registry)
    return metrics, text, samples, types


def test_latency_gauges_in_milliseconds() -> None:
    _, _, samples, types = _record_cycle()
    assert samples[("kai_e2e_scheduling_latency_milliseconds", ())] == pytest.approx(250)
    assert samples[("kai_open_session_latency_milliseconds", ())] == pytest.approx(12)
    assert samples[("kai_close_session_latency_milliseconds", ())] == pytest.approx(3)
    assert samples[
        ("kai_action_scheduling_latency_milliseconds", (("action", "allocate"),))
    ] == pytest.approx(100)
    assert samples[("kai_action_scheduling_latency_milliseconds", (("action", "reclaim"),))] == pytest.approx(
        50
    )
    plugin = (
        "kai_plugin_scheduling_latency_milliseconds",
        (("OnSession", "OnSessionOpen"), ("plugin", "proportion")),
    )
    assert samples[plugin] == pytest.approx(4)
    for name in (
        "kai_e2e_scheduling_latency_milliseconds",
        "kai_open_session_latency_milliseconds",
        "kai_close_session_latency_milliseconds",
        "kai_plugin_scheduling_latency_milliseconds",
        "kai_action_scheduling_latency_milliseconds",
    ):
        assert types[name] == "gauge"


def test_task_latency_histograms_use_kais_buckets() -> None:
    _, text, samples, types = _record_cycle()
    assert LATENCY_BUCKETS_MS == (5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560)
    for name in (
        "kai_task_scheduling_latency_milliseconds",
        "kai_task_bind_latency_milliseconds",
        "kai_usage_query_latency_milliseconds",
    ):
        assert types[name] == "histogram"
        bounds = [
            line.split('le="')[1].split('"')[0]
            for line in text.splitlines()
            if line.startswith(name + "_bucket")
        ]
        assert bounds == [*(str(float(bound)) for bound in LATENCY_BUCKETS_MS), "+Inf"]
    bucket = "kai_task_scheduling_latency_milliseconds_bucket"
    assert samples[(bucket, (("le", "5.0"),))] == 1  # 4 ms
    assert samples[(bucket, (("le", "10.0"),))] == 2  # 7 ms
    assert samples[(bucket, (("le", "40.0"),))] == 3  # 30 ms
    assert samples[(bucket, (("le", "2560.0"),))] == 3
    assert samples[(bucket, (("le", "+Inf"),))] == 4  # 3 s
    assert samples[("kai_task_scheduling_latency_milliseconds_count", ())] == 4
    assert samples[("kai_task_scheduling_latency_milliseconds_sum", ())] == pytest.approx(3041)


def test_pod_group_counters_by_action() -> None:
    _, text, samples, types = _record_cycle()

    def value(name: str, action: str) -> float:
        return samples.get((name, (("action", action),)), 0.0)

    # allocate placed pods of two groups (train, and serve-0 on its own).
    assert value("kai_podgroups_scheduled_by_action", "allocate") == 2
    assert value("kai_podgroups_scheduled_by_action", "reclaim") == 1
    assert value("kai_podgroups_scheduled_by_action", "preempt") == 1
    assert value("kai_podgroups_acted_on_by_action", "allocate") == 2
    assert value("kai_scenarios_simulation_by_action", "reclaim") == 7
    assert value("kai_scenarios_filtered_by_action", "reclaim") == 3
    assert samples[("kai_total_preemption_attempts", ())] == 1
    # KAI's exact names: no `_total` appended to the counters whose names do not end in it.
    for name in (
        "kai_podgroups_scheduled_by_action",
        "kai_podgroups_acted_on_by_action",
        "kai_scenarios_simulation_by_action",
        "kai_scenarios_filtered_by_action",
        "kai_total_preemption_attempts",
    ):
        assert f"\n{name}" in text and f"{name}_total" not in text
        assert types[name] == "untyped"


def test_evicted_pods_carry_kais_labels() -> None:
    _, _, samples, types = _record_cycle()
    assert types["kai_pod_group_evicted_pods_total"] == "counter"
    evicted = {
        labels: value
        for (name, labels), value in samples.items()
        if name == "kai_pod_group_evicted_pods_total"
    }
    assert evicted == {
        (
            ("action", "reclaim"),
            ("namespace", "ml"),
            ("nodepool", "pool-a"),
            ("podgroup", "old"),
            ("uid", "uid-old"),
        ): 2,
        (
            ("action", "preempt"),
            ("namespace", "dev"),
            ("nodepool", "pool-a"),
            ("podgroup", "nb1"),
            ("uid", "uid-nb1"),
        ): 1,
    }


def test_fair_share_in_kais_units() -> None:
    metrics, _, samples, types = _record_cycle()
    assert samples[("kai_queue_fair_share_gpu", (("queue_name", "ml"),))] == 6
    assert samples[("kai_queue_fair_share_cpu_cores", (("queue_name", "ml"),))] == 32
    assert samples[("kai_queue_fair_share_memory_gb", (("queue_name", "ml"),))] == 256
    assert samples[("kai_queue_fair_share_cpu_cores", (("queue_name", "dev"),))] == 1.5
    assert samples[("kai_queue_fair_share_memory_gb", (("queue_name", "dev"),))] == 4
    assert types["kai_queue_fair_share_gpu"] == "gauge"

    # A queue that is gone no longer reports a fair share.
    metrics.observe_cycle(0.1, {}, [], {"ml": (8.0, 0.0, 0.0)})
    _, samples, _ = _scrape(metrics.registry)
    assert ("kai_queue_fair_share_gpu", (("queue_name", "dev"),)) not in samples
    assert samples[("kai_queue_fair_share_gpu", (("queue_name", "ml"),))] == 8


def test_counters_accumulate_across_cycles() -> None:
    metrics = SchedulerMetrics()
    for _ in range(3):
        metrics.observe_cycle(0.01, {"allocate": 0.01}, [_decision("allocate", "bind", "a/p")], {})
    _, samples, _ = _scrape(metrics.registry)
    assert samples[("kai_podgroups_scheduled_by_action", (("action", "allocate"),))] == 3
    assert samples[("kai_total_preemption_attempts", ())] == 0


def test_acted_on_counts_from_the_caller_and_preemption_attempts() -> None:
    metrics = SchedulerMetrics()
    metrics.observe_cycle(0.01, {}, [], {}, acted_on={"allocate": 5, "preempt": 2})
    _, samples, _ = _scrape(metrics.registry)
    assert samples[("kai_podgroups_acted_on_by_action", (("action", "allocate"),))] == 5
    assert samples[("kai_total_preemption_attempts", ())] == 2


def test_observe_session_reads_a_session_result() -> None:
    metrics = SchedulerMetrics()
    result = SessionResult(decisions=DECISIONS[:2], unschedulable={}, fair_share={"ml": (1.0, 1000.0, 1e9)})
    metrics.observe_session(result, 0.5, {"allocate": 0.4}, pod_groups=POD_GROUPS)
    _, samples, _ = _scrape(metrics.registry)
    assert samples[("kai_podgroups_scheduled_by_action", (("action", "allocate"),))] == 1
    assert samples[("kai_queue_fair_share_cpu_cores", (("queue_name", "ml"),))] == 1


def test_queue_usage_gauges() -> None:
    metrics = SchedulerMetrics()
    metrics.set_queue_usage({"ml": (0.5, 0.25, 0.125)})
    _, samples, _ = _scrape(metrics.registry)
    assert samples[("kai_queue_gpu_usage", (("queue_name", "ml"),))] == 0.5
    assert samples[("kai_queue_cpu_usage", (("queue_name", "ml"),))] == 0.25
    assert samples[("kai_queue_memory_usage", (("queue_name", "ml"),))] == 0.125
    metrics.set_queue_usage({})
    _, samples, _ = _scrape(metrics.registry)
    assert not [key for key in samples if key[0] == "kai_queue_gpu_usage"]


def test_metric_namespace_is_configurable_and_registries_are_separate() -> None:
    metrics = SchedulerMetrics(namespace="custom")
    text = generate_latest(metrics.registry).decode()
    assert "custom_e2e_scheduling_latency_milliseconds" in text and "kai_" not in text
    SchedulerMetrics()  # a second instance on its own registry does not clash


def test_counters_refuse_to_go_down_or_take_wrong_labels() -> None:
    metrics = SchedulerMetrics()
    with pytest.raises(ValueError, match="only go up"):
        metrics.podgroups_scheduled.inc(-1, action="allocate")
    with pytest.raises(ValueError, match="expected labels"):
        metrics.podgroups_scheduled.inc(1, verb="allocate")


def _queue(name: str, labels: dict[str, str], gpu: float, millicores: float, megabytes: float) -> Queue:
    return Queue.model_validate(
        {
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "resources": {
                    "gpu": {"quota": gpu, "limit": -1, "overQuotaWeight": 1},
                    "cpu": {"quota": millicores, "limit": -1, "overQuotaWeight": 1},
                    "memory": {"quota": megabytes, "limit": -1, "overQuotaWeight": 1},
                }
            },
        }
    )


def test_queue_controller_metrics() -> None:
    registry = CollectorRegistry()
    scheduler = SchedulerMetrics(registry)  # both groups on one registry, as with `run --all`
    metrics = QueueMetrics(
        registry,
        label_map={"team.example.com/owner": "owner"},
        default_label_values={"team.example.com/owner": "none"},
    )
    queues = [
        _queue("ml", {"team.example.com/owner": "alice"}, 8, 64_000, 512_000),
        _queue("dev", {}, 2, -1, -1),
    ]
    allocated: dict[str, dict[str, Fraction | float | int]] = {
        "ml": {"nvidia.com/gpu": Fraction(5, 2), "cpu": Fraction(12), "memory": 64 * 2**30}
    }
    metrics.observe_queues(queues, allocated)
    _, samples, types = _scrape(registry)
    ml = (("owner", "alice"), ("queue_name", "ml"))
    dev = (("owner", "none"), ("queue_name", "dev"))
    assert samples[("kai_queue_info", ml)] == 1 and samples[("kai_queue_info", dev)] == 1
    assert samples[("kai_queue_deserved_gpus", ml)] == 8
    assert samples[("kai_queue_quota_cpu_cores", ml)] == 64
    assert samples[("kai_queue_quota_memory_bytes", ml)] == 512e9
    assert samples[("kai_queue_quota_cpu_cores", dev)] == -1  # unlimited stays -1
    assert samples[("kai_queue_quota_memory_bytes", dev)] == -1
    assert samples[("kai_queue_allocated_gpus", ml)] == 2.5
    assert samples[("kai_queue_allocated_cpu_cores", ml)] == 12
    assert samples[("kai_queue_allocated_memory_bytes", ml)] == 64 * 2**30
    assert samples[("kai_queue_allocated_gpus", dev)] == 0
    assert all(
        types[name] == "gauge" for name in types if name.startswith("kai_queue_") and "fair" not in name
    )
    assert scheduler.registry is registry

    metrics.observe_queues(queues[:1], allocated)
    _, samples, _ = _scrape(registry)
    assert ("kai_queue_info", dev) not in samples


# --- what the scheduling core measures about itself (SessionResult) and how it reaches the metrics ---


class _Sleepy:
    """A plugin or action that takes a known time in each step it is called for."""

    def __init__(self, name: str, open_s: float = 0.0, close_s: float = 0.0, execute_s: float = 0.0) -> None:
        self.name = name
        self.open_s, self.close_s, self.execute_s = open_s, close_s, execute_s

    def on_session_open(self, session: Session) -> None:
        time.sleep(self.open_s)

    def on_session_close(self, session: Session) -> None:
        time.sleep(self.close_s)

    def execute(self, session: Session) -> None:
        time.sleep(self.execute_s)


def _reclaim_cluster() -> list[ApiObject]:
    """Queue a (quota 0) holds a 4-GPU node with four one-GPU pods; queue b (quota 4) waits with a
    two-GPU pod and a one-GPU pod. For b-0 reclaim's first victim frees too little (filtered), the
    second makes room (simulated); for b-1 the next victim does (simulated)."""
    return [
        node("n0", gpus=4),
        queue("a", gpu=0),
        queue("b", gpu=4),
        *[pod(f"a-{i}", "a", gpus=1, node_name="n0") for i in range(4)],
        pod("b-0", "b", gpus=2),
        pod("b-1", "b", gpus=1),
    ]


def test_a_session_result_times_open_each_plugin_each_action_and_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(PLUGINS, "slowopen", lambda arguments: _Sleepy("slowopen", open_s=0.05))
    monkeypatch.setitem(PLUGINS, "slowclose", lambda arguments: _Sleepy("slowclose", close_s=0.04))
    monkeypatch.setitem(ACTIONS, "slowaction", lambda: _Sleepy("slowaction", execute_s=0.06))
    plugins = [{"name": "proportion"}, {"name": "slowopen"}, {"name": "slowclose"}]
    config = parse_config({"actions": "allocate, slowaction", "tiers": [{"plugins": plugins}]})
    began = time.perf_counter()
    result = Scheduler(config).run(snapshot_of(_reclaim_cluster()), cycle=1, now=0.0)
    wall = time.perf_counter() - began

    assert (
        set(result.plugin_open_seconds)
        == set(result.plugin_close_seconds)
        == {
            "proportion",
            "slowopen",
            "slowclose",
        }
    )
    assert set(result.action_seconds) == {"allocate", "slowaction"}
    # Each step's time is where it was spent ...
    assert result.plugin_open_seconds["slowopen"] >= 0.05
    assert result.plugin_close_seconds["slowclose"] >= 0.04
    assert result.action_seconds["slowaction"] >= 0.06
    assert result.plugin_open_seconds["slowclose"] < 0.04 and result.plugin_close_seconds["slowopen"] < 0.05
    assert result.open_seconds >= sum(result.plugin_open_seconds.values())
    assert result.close_seconds >= sum(result.plugin_close_seconds.values())
    # ... and counted once: open, the actions and close add up to no more than the whole run.
    assert result.open_seconds + sum(result.action_seconds.values()) + result.close_seconds <= wall


def test_a_session_result_counts_what_each_action_took_up_and_its_scenarios() -> None:
    result = Scheduler(SchedulerConfig()).run(snapshot_of(_reclaim_cluster()), cycle=1, now=0.0)
    assert [(d.action, d.type, d.pod) for d in result.decisions] == [
        ("reclaim", "evict", "default/a-3"),
        ("reclaim", "evict", "default/a-2"),
        ("reclaim", "pipeline", "default/b-0"),
        ("reclaim", "evict", "default/a-1"),
        ("reclaim", "pipeline", "default/b-1"),
    ]
    assert result.counts["allocate"] == ActionCounts(acted_on=2)  # b-0 and b-1, neither fits
    assert result.counts["reclaim"] == ActionCounts(acted_on=2, scenarios_simulated=2, scenarios_filtered=1)
    assert result.counts.get("preempt", ActionCounts()).scenarios_simulated == 0


def test_observe_session_feeds_the_sessions_own_timings_and_counts() -> None:
    metrics = SchedulerMetrics()
    result = SessionResult(
        decisions=DECISIONS,
        unschedulable={},
        fair_share={},
        open_seconds=0.012,
        close_seconds=0.003,
        action_seconds={"allocate": 0.1, "reclaim": 0.05},
        plugin_open_seconds={"proportion": 0.004},
        plugin_close_seconds={"proportion": 0.001},
        counts={"allocate": ActionCounts(acted_on=5), "reclaim": ActionCounts(2, 7, 3)},
    )
    metrics.observe_session(result, 0.25, pod_groups=POD_GROUPS)
    _, samples, _ = _scrape(metrics.registry)

    def labelled(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert labelled("kai_open_session_latency_milliseconds") == pytest.approx(12)
    assert labelled("kai_close_session_latency_milliseconds") == pytest.approx(3)
    assert labelled("kai_action_scheduling_latency_milliseconds", action="allocate") == pytest.approx(100)
    assert labelled("kai_action_scheduling_latency_milliseconds", action="reclaim") == pytest.approx(50)
    plugin = "kai_plugin_scheduling_latency_milliseconds"
    assert labelled(plugin, plugin="proportion", OnSession="OnSessionOpen") == pytest.approx(4)
    assert labelled(plugin, plugin="proportion", OnSession="OnSessionClose") == pytest.approx(1)
    assert labelled("kai_scenarios_simulation_by_action", action="reclaim") == 7
    assert labelled("kai_scenarios_filtered_by_action", action="reclaim") == 3
    # Counted by the action where it counts (allocate took up 5, more than the 2 it decided for);
    # otherwise the pod groups it decided for (preempt: dev/urgent), a lower bound.
    assert labelled("kai_podgroups_acted_on_by_action", action="allocate") == 5
    assert labelled("kai_podgroups_acted_on_by_action", action="reclaim") == 2
    assert labelled("kai_podgroups_acted_on_by_action", action="preempt") == 1
    assert labelled("kai_total_preemption_attempts") == 1
