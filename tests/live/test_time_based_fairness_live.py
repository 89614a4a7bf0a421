"""Time-based fairness in live mode: the scheduler loop keeps the usage history from its own cycles.

Reference: kai-reference §5.5 (usageDBConfig), §5.2 (shareWeight from usage). The loop records what each
queue holds after a cycle until the next one, on its session clock; here the clock's wall is a fake that
the test advances, so an hour passes between two cycles without waiting for it.

The cluster: one node of 4 GPUs, queues a and b (GPU quota 0, weight 1). Queue a runs four one-GPU pods
alone for an hour; then they complete and four pods of a and four of b are pending.
"""

from __future__ import annotations

import time
from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.k8s.scheduler.effects import CycleReport
from kai_scheduler.k8s.scheduler.live_state import SessionClock

HOUR = 3600.0
WITH_USAGE = parse_config(
    {"usageDBConfig": {"clientType": "prometheus", "usageParams": {"windowSize": "1w"}}}
)
ONE_GPU: dict[str, Any] = {"gpus": 1, "cpu": None, "memory": None}


class FakeWall:
    """A wall clock that only moves when the test moves it."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def a_runs_alone(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n0", gpus=4, cpu="32", memory="256Gi"))
    store.create(queue_manifest("a", gpu=0))
    store.create(queue_manifest("b", gpu=0))
    for i in range(4):
        store.create(pod_manifest(f"a-early-{i}", "a", node_name="n0", **ONE_GPU))


def then_both_queues_want_the_node(server: FakeApiServer) -> None:
    store = server.store
    for i in range(4):
        store.set_status("pods", f"a-early-{i}", {"phase": "Succeeded"})
    for queue in ("a", "b"):
        for i in range(4):
            store.create(pod_manifest(f"{queue}-late-{i}", queue, **ONE_GPU))


def late_pods_seen(live: Live) -> bool:
    pods = live.informers.pods.cache
    return all(f"default/{q}-late-{i}" in pods for q in ("a", "b") for i in range(4)) and all(
        (pods[f"default/a-early-{i}"].get("status") or {}).get("phase") == "Succeeded" for i in range(4)
    )


def requested_by_queue(report: CycleReport) -> dict[str, int]:
    counts = {"a": 0, "b": 0}
    for key in report.bind_requests:
        counts[key.split("/")[1][0]] += 1
    return counts


def gpu_fair_shares(report: CycleReport) -> dict[str, float]:
    assert report.result is not None
    return {name: share[0] for name, share in report.result.fair_share.items()}


async def an_hour_of_a_then_both(server: FakeApiServer, config: SchedulerConfig) -> CycleReport:
    """Cycles at 0 and (after a alone) at 1h on one loop; the report of the cycle at 1h."""
    a_runs_alone(server)
    wall = FakeWall()
    async with Live(server, binder=False, loop=False, config=config, clock=SessionClock(wall=wall)) as live:
        first = await live.loop.run_once()
        assert first.now == 0.0 and first.bind_requests == []
        wall.now += HOUR / 2
        assert (await live.loop.run_once()).bind_requests == []
        wall.now += HOUR / 2
        then_both_queues_want_the_node(server)
        await live.until(lambda: late_pods_seen(live))
        report = await live.loop.run_once()
        assert report.now == HOUR and report.errors == []
        return report


def test_the_queue_that_ran_alone_gets_the_smaller_share_afterwards(server: FakeApiServer) -> None:
    report = run(an_hour_of_a_then_both(server, WITH_USAGE))
    # a held the whole node for the whole recorded hour (usage 1), b nothing: b's share is the node.
    assert gpu_fair_shares(report) == {"a": 0.0, "b": 4.0}
    assert requested_by_queue(report) == {"a": 0, "b": 4}


def test_without_usage_db_config_both_queues_get_half(server: FakeApiServer) -> None:
    report = run(an_hour_of_a_then_both(server, SchedulerConfig()))
    assert gpu_fair_shares(report) == {"a": 2.0, "b": 2.0}
    assert requested_by_queue(report) == {"a": 2, "b": 2}


def test_a_restarted_scheduler_starts_a_new_history(server: FakeApiServer) -> None:
    a_runs_alone(server)
    wall = FakeWall()

    async def body() -> CycleReport:
        async with Live(
            server, binder=False, loop=False, config=WITH_USAGE, clock=SessionClock(wall=wall)
        ) as live:
            await live.loop.run_once()
            wall.now += HOUR
            await live.loop.run_once()
        # A new scheduler process: its own loop, clock and (empty) history.
        then_both_queues_want_the_node(server)
        async with Live(
            server, binder=False, loop=False, config=WITH_USAGE, clock=SessionClock(wall=wall)
        ) as live:
            await live.until(lambda: late_pods_seen(live))
            return await live.loop.run_once()

    report = run(body())
    assert gpu_fair_shares(report) == {"a": 2.0, "b": 2.0}


def test_time_without_leadership_is_not_counted(server: FakeApiServer) -> None:
    # The loop ran a cycle while a held the node, then lost leadership for an hour (another scheduler
    # decided meanwhile). On gaining it back it does not know what the queues held in between, so that
    # hour is not charged to a.
    a_runs_alone(server)
    wall = FakeWall()

    async def body() -> CycleReport:
        async with Live(
            server, binder=False, loop=False, config=WITH_USAGE, clock=SessionClock(wall=wall)
        ) as live:
            await live.loop.run_once()
            wall.now += HOUR
            then_both_queues_want_the_node(server)
            live.loop.reset_memory()  # what the loop does on gaining leadership
            await live.until(lambda: late_pods_seen(live))
            return await live.loop.run_once()

    report = run(body())
    assert gpu_fair_shares(report) == {"a": 2.0, "b": 2.0}
