"""The scheduler's metrics in live mode: after a few cycles with binds and a reclaim, every metric the loop
keeps has samples (reference §8), read from the registry as Prometheus would scrape them.

The cluster: one node of 4 GPUs, queue a (GPU quota 0) running four one-GPU pods, queue b (quota 4)
with a pending two-GPU pod and a CPU-only pod. Time-based fairness is on (usageDBConfig), so the usage
metrics are kept too. b's two-GPU pod needs a reclaim: its first victim alone frees too little (a
scenario filtered out), the first two make room (a scenario simulated).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from live_support import Live, evicted, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.cycle import ACTIONS, PLUGINS
from kai_scheduler.framework.config import parse_config
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets
from kai_scheduler.k8s.scheduler.loop import queue_usage
from kai_scheduler.k8s.scheduler.metrics import ON_SESSION_CLOSE, ON_SESSION_OPEN, SchedulerMetrics

WITH_USAGE = parse_config(
    {"usageDBConfig": {"clientType": "prometheus", "usageParams": {"windowSize": "1w"}}}
)


def bound(store: Store) -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in store.list("pods", "default")
        if p["spec"].get("nodeName")
    }


def a_holds_the_node_b_waits(store: Store) -> None:
    store.create(node_manifest("n0", gpus=4, cpu="32", memory="256Gi"))
    store.create(queue_manifest("a", gpu=0))
    store.create(queue_manifest("b", gpu=4))
    for i in range(4):
        store.create(pod_manifest(f"a-{i}", "a", gpus=1, cpu="1", memory=None, node_name="n0"))
    store.create(pod_manifest("b-0", "b", gpus=2, cpu="1", memory=None))
    store.create(pod_manifest("b-1", "b", cpu="1", memory=None))


def test_every_scheduler_metric_has_samples_after_binds_and_a_reclaim(server: FakeApiServer) -> None:
    store = server.store
    a_holds_the_node_b_waits(store)
    metrics = SchedulerMetrics()

    async def body() -> None:
        async with Live(server, config=WITH_USAGE, metrics=metrics) as live:
            await live.until(lambda: {"b-0", "b-1"} <= set(bound(store)))
            await live.until(lambda: live.loop.last_report is not None and live.loop.cycle >= 3)

    run(body())
    assert sorted(evicted(server)) == ["a-2", "a-3"]

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    # Gauges set from the session's own timings: every one positive.
    for name in (
        "kai_e2e_scheduling_latency_milliseconds",
        "kai_open_session_latency_milliseconds",
        "kai_close_session_latency_milliseconds",
    ):
        assert (sample(name) or 0) > 0, name
    actions = [name for name in WITH_USAGE.actions if name in ACTIONS]
    assert {"allocate", "reclaim"} <= set(actions)
    for action in actions:
        assert (sample("kai_action_scheduling_latency_milliseconds", action=action) or 0) > 0, action
    plugins = [option.name for option in WITH_USAGE.plugins() if option.name in PLUGINS]
    assert "proportion" in plugins
    for plugin in plugins:
        for phase in (ON_SESSION_OPEN, ON_SESSION_CLOSE):
            value = sample("kai_plugin_scheduling_latency_milliseconds", plugin=plugin, OnSession=phase)
            assert value is not None and value >= 0, (plugin, phase)
    proportion = sample(
        "kai_plugin_scheduling_latency_milliseconds", plugin="proportion", OnSession=ON_SESSION_OPEN
    )
    assert (proportion or 0) > 0

    # Histograms: a bind step per BindRequest (b-0 and b-1), a usage query per cycle.
    assert (sample("kai_task_bind_latency_milliseconds_count") or 0) >= 2
    assert (sample("kai_task_bind_latency_milliseconds_sum") or 0) > 0
    assert (sample("kai_task_scheduling_latency_milliseconds_count") or 0) >= 2
    assert (sample("kai_usage_query_latency_milliseconds_count") or 0) >= 3

    # Counters the actions kept: b's pods taken up by allocate and reclaim, the reclaim's scenarios.
    assert (sample("kai_podgroups_acted_on_by_action", action="allocate") or 0) >= 2
    assert (sample("kai_podgroups_acted_on_by_action", action="reclaim") or 0) >= 1
    assert (sample("kai_podgroups_scheduled_by_action", action="reclaim") or 0) >= 1
    assert (sample("kai_scenarios_filtered_by_action", action="reclaim") or 0) >= 1
    assert (sample("kai_scenarios_simulation_by_action", action="reclaim") or 0) >= 1
    # KAI v0.17's scenario search: b-0's search solved by the node-by-node generator, within KAI's
    # default budgets, which the configured-budget gauges show.
    solved = {"action": "reclaim", "result": "solved", "reduced_budget": "false"}
    assert (sample("kai_scenario_search_jobs_total", **solved) or 0) >= 1
    greedy = {"action": "reclaim", "generator": "NodeLocalGreedy"}
    assert (sample("kai_scenario_search_scenarios_total", **greedy, state="simulated") or 0) >= 1
    assert (sample("kai_scenario_search_duration_seconds_count", **greedy, result="solved") or 0) >= 1
    budgets = ScenarioSearchBudgets()
    reclaim_budget = sample("kai_scenario_search_action_budget_configured_seconds", action="reclaim")
    assert reclaim_budget == budgets.action_limit("reclaim")
    assert sample("kai_scenario_search_job_budget_configured_seconds") == budgets.max_job
    evicted_samples = [
        s
        for family in metrics.registry.collect()
        if family.name == "kai_pod_group_evicted_pods"
        for s in family.samples
        if s.name.endswith("_total") and s.labels["action"] == "reclaim"
    ]
    assert sum(s.value for s in evicted_samples) == 2

    # Time-based usage: the history records what the queues hold after each cycle's decisions, so from
    # the first cycle on a holds two GPUs and b two (the reclaim's): each half the node's GPUs.
    gpu_a = sample("kai_queue_gpu_usage", queue_name="a")
    gpu_b = sample("kai_queue_gpu_usage", queue_name="b")
    assert gpu_a is not None and gpu_b is not None
    assert 0 < gpu_a <= 1 and 0 < gpu_b <= 1
    for resource in ("cpu", "memory"):
        assert sample(f"kai_queue_{resource}_usage", queue_name="a") is not None
    assert (sample("kai_queue_fair_share_gpu", queue_name="b") or 0) > 0


def test_without_usage_db_config_the_usage_metrics_stay_empty(server: FakeApiServer) -> None:
    store = server.store
    a_holds_the_node_b_waits(store)
    metrics = SchedulerMetrics()

    async def body() -> None:
        async with Live(server, metrics=metrics) as live:
            await live.until(lambda: {"b-0", "b-1"} <= set(bound(store)))

    run(body())
    assert metrics.registry.get_sample_value("kai_usage_query_latency_milliseconds_count") == 0
    assert metrics.registry.get_sample_value("kai_queue_gpu_usage", {"queue_name": "a"}) is None
    assert (metrics.registry.get_sample_value("kai_task_bind_latency_milliseconds_count") or 0) >= 2


@pytest.mark.parametrize("full_hierarchy", [True, False])
def test_queue_usage_of_a_parent_queue_is_the_sum_of_its_leaves(
    server: FakeApiServer, full_hierarchy: bool
) -> None:
    # With fullHierarchyFairness off the parent leaves the session's tree: its usage is summed then.
    config = replace(WITH_USAGE, full_hierarchy_fairness=full_hierarchy)
    store = server.store
    store.create(node_manifest("n0", gpus=4, cpu="32", memory="256Gi"))
    store.create(queue_manifest("dept"))
    store.create(queue_manifest("a", gpu=0, parent="dept"))
    store.create(queue_manifest("b", gpu=0, parent="dept"))
    store.create(queue_manifest("c", gpu=0))
    for i, name in enumerate(("a", "a", "b")):
        store.create(pod_manifest(f"{name}-{i}", name, gpus=1, cpu=None, memory=None, node_name="n0"))

    async def body() -> dict[str, tuple[float, float, float]]:
        async with Live(server, binder=False, loop=False, config=config) as live:
            await live.loop.run_once()
            await live.loop.run_once()
            live.loop.states.build(nominated={}, evicting={}, job_times={})
            snapshot = live.loop._schedule(3, live.loop.clock.now()).snapshot
            assert ("dept" in snapshot.queues.detached) is not full_hierarchy
            return queue_usage(snapshot)

    usage = run(body())
    assert set(usage) == {"dept", "a", "b", "c"}
    gpu = {name: shares[0] for name, shares in usage.items()}
    assert gpu["a"] == pytest.approx(2 * gpu["b"]) and gpu["b"] > 0 and gpu["c"] == 0
    assert gpu["dept"] == pytest.approx(gpu["a"] + gpu["b"])
