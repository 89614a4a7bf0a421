"""Time-based fairness in live mode with usage from Prometheus (`usageDBConfig.clientType: prometheus`
with a `connectionString`): the scheduler loop takes the queues' usage from a fake Prometheus
(`tests/fake_prometheus.py`) instead of its in-memory history.

Reference: kai-reference §5.5 (usage per queue from KAI's queue metrics over the window, normalised by the
cluster's capacity; fetchInterval, stalenessPeriod, waitTimeout), §5.2 (shareWeight from usage, kValue 1).

The cluster: one node of 4 GPUs, queues a and b (GPU quota 0, weight 1), four one-GPU pods pending in each.
Prometheus says a held the whole cluster's GPUs over the window (usage 1) and b nothing.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from live_support import Live, evicted, run

from fake_prometheus import FakePrometheus, closed_port_url
from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.k8s.scheduler.effects import CycleReport
from kai_scheduler.k8s.scheduler.live_state import SessionClock

ONE_GPU: dict[str, Any] = {"gpus": 1, "cpu": None, "memory": None}
A_USED_EVERYTHING = {"kai_queue_allocated_gpus": {"a": 4 * 60.0}, "nvidia_com_gpu": 4 * 60.0}
HALF_EACH = {"a": 2.0, "b": 2.0}
B_EVERYTHING = {"a": 0.0, "b": 4.0}


def with_prometheus(url: str, **params: Any) -> SchedulerConfig:
    return parse_config(
        {
            "usageDBConfig": {
                "clientType": "prometheus",
                "connectionString": url,
                "usageParams": {"windowSize": "1h", **params},
            }
        }
    )


class FakeWall:
    """A wall clock that only moves when the test moves it."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def both_queues_want_the_node(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n0", gpus=4, cpu="32", memory="256Gi"))
    store.create(queue_manifest("a", gpu=0))
    store.create(queue_manifest("b", gpu=0))
    for queue in ("a", "b"):
        for i in range(4):
            store.create(pod_manifest(f"{queue}-{i}", queue, **ONE_GPU))


def pods_seen(live: Live) -> bool:
    pods = live.informers.pods.cache
    return "n0" in live.informers.nodes.cache and all(
        f"default/{q}-{i}" in pods for q in ("a", "b") for i in range(4)
    )


def gpu_fair_shares(report: CycleReport) -> dict[str, float]:
    assert report.result is not None
    return {name: share[0] for name, share in report.result.fair_share.items()}


def requested_by_queue(names: list[str]) -> dict[str, int]:
    counts = {"a": 0, "b": 0}
    for name in names:
        counts[name.rsplit("/", 1)[-1][0]] += 1
    return counts


async def one_cycle(
    server: FakeApiServer, config: SchedulerConfig, *, fetch_then_wait: float = 0.0
) -> CycleReport:
    """A fetch from Prometheus at the wall clock's time, `fetch_then_wait` seconds on the wall clock, then
    one cycle."""
    both_queues_want_the_node(server)
    wall = FakeWall()
    async with Live(server, binder=False, loop=False, config=config, clock=SessionClock(wall=wall)) as live:
        await live.until(lambda: pods_seen(live))
        assert live.loop.prometheus is not None and live.loop.usage is None
        await live.loop.prometheus.fetch()
        wall.now += fetch_then_wait
        report = await live.loop.run_once()
        assert report.errors == []
        return report


def test_usage_from_prometheus_reaches_the_fair_shares(server: FakeApiServer) -> None:
    with FakePrometheus(A_USED_EVERYTHING) as prom:
        report = run(one_cycle(server, with_prometheus(prom.url)))
    assert gpu_fair_shares(report) == B_EVERYTHING
    assert requested_by_queue(report.bind_requests) == {"a": 0, "b": 4}
    # The queries ask for the usage at the loop's wall clock time.
    assert any("kai_queue_allocated_gpus" in query for query, _ in prom.queries)


def test_without_a_connection_string_the_in_memory_history_is_used(server: FakeApiServer) -> None:
    # The same Prometheus is running, but the configuration does not point to it: no usage (the loop's
    # own history is empty at its first cycle), so the queues share the node.
    with FakePrometheus(A_USED_EVERYTHING) as prom:

        async def body() -> CycleReport:
            both_queues_want_the_node(server)
            config = parse_config({"usageDBConfig": {"clientType": "prometheus"}})
            async with Live(server, binder=False, loop=False, config=config) as live:
                assert live.loop.prometheus is None and live.loop.usage is not None
                await live.until(lambda: pods_seen(live))
                return await live.loop.run_once()

        report = run(body())
    assert gpu_fair_shares(report) == HALF_EACH
    assert prom.queries == []


@pytest.mark.parametrize(("elapsed", "shares"), [(299.0, B_EVERYTHING), (301.0, HALF_EACH)])
def test_stale_usage_is_dropped(server: FakeApiServer, elapsed: float, shares: dict[str, float]) -> None:
    with FakePrometheus(A_USED_EVERYTHING) as prom:
        report = run(
            one_cycle(server, with_prometheus(prom.url, stalenessPeriod="5m"), fetch_then_wait=elapsed)
        )
    assert gpu_fair_shares(report) == shares


def test_a_bad_answer_means_no_usage(server: FakeApiServer) -> None:
    with FakePrometheus(A_USED_EVERYTHING) as prom:
        prom.mode = "garbage"
        report = run(one_cycle(server, with_prometheus(prom.url)))
    assert gpu_fair_shares(report) == HALF_EACH


def test_the_running_loop_fetches_in_the_background_before_its_first_cycle(server: FakeApiServer) -> None:
    both_queues_want_the_node(server)
    with FakePrometheus(A_USED_EVERYTHING) as prom:
        prom.delay = 0.3  # the caches are synced before Prometheus answers: the first cycle waits for it

        async def body() -> list[str]:
            config = with_prometheus(prom.url, fetchInterval="0.05s")
            async with Live(server, binder=False, config=config) as live:
                await live.until(lambda: len(server.store.list("bindrequests")) >= 4)
                prom.delay = 0.0
                fetches = len(prom.queries)
                await live.until(lambda: len(prom.queries) >= fetches + 12)  # it keeps fetching
                return [b["metadata"]["name"] for b in server.store.list("bindrequests")]

        names = run(body())
    # The first cycle already had a's usage: every BindRequest went to b, none was created for a pod of a
    # (which would then have been reclaimed, once the usage arrived).
    assert requested_by_queue(names) == {"a": 0, "b": 4}
    assert len(server.requests(verb="create", resource="bindrequests")) == 4
    assert evicted(server) == []


def test_prometheus_down_the_loop_keeps_scheduling_without_usage(server: FakeApiServer) -> None:
    # waitTimeout is the default minute: the first cycle waits for the first fetch to fail, not longer.
    both_queues_want_the_node(server)

    async def body() -> list[str]:
        async with Live(server, binder=False, config=with_prometheus(closed_port_url())) as live:
            await live.until(lambda: len(server.store.list("bindrequests")) >= 4)
            cycle = live.loop.cycle
            await live.until(lambda: live.loop.cycle >= cycle + 3)
            assert live.loop.last_report is not None
            assert gpu_fair_shares(live.loop.last_report) == HALF_EACH
            return [b["metadata"]["name"] for b in server.store.list("bindrequests")]

    assert requested_by_queue(run(body())) == {"a": 2, "b": 2}
