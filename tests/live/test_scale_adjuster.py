"""The scale adjuster on the fake API server: scaling pods for unschedulable fractional pods, deleted once
the kai-scheduler places them on a new GPU node, and deleted (then held back) when they get a node."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from identities import client_as
from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.needs import scale_adjuster_needs
from kai_scheduler.k8s.runtime.access import AccessGuard
from kai_scheduler.k8s.scaleadjuster.controller import ScaleAdjuster
from kai_scheduler.k8s.scaleadjuster.plan import DO_NOT_DISRUPT_ANNOTATION, SHAPE_LABEL, requested_gpus
from kai_scheduler.k8s.scaleadjuster.shapes import pod_shape

NS = "kai-scale-adjust"
A100 = {"gpu-type": "a100"}
# The chart installed for a cluster autoscaler: the adjuster's account, its roles and its namespace (NS).
pytestmark = pytest.mark.chart_values({"clusterAutoscaling": True})


def scaling_pods(server: FakeApiServer) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in server.store.list("pods", NS)}


def written(server: FakeApiServer, verb: str) -> int:
    """Successful creates or deletes of pods in the adjuster's namespace."""
    return len(
        [r for r in server.requests(verb=verb, resource="pods") if r.namespace == NS and r.code in (200, 201)]
    )


def placed(server: FakeApiServer, names: list[str]) -> bool:
    return all(server.store.get("pods", name)["spec"].get("nodeName") for name in names)


class Clock:
    """A monotonic clock the test moves (the adjuster's cooldowns), on top of the real one."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return asyncio.get_running_loop().time() + self.offset


@contextlib.asynccontextmanager
async def adjuster(live: Live, **options: Any) -> AsyncIterator[ScaleAdjuster]:
    options.setdefault("period", 0.1)
    options.setdefault("min_interval", 0.02)
    options.setdefault("grace", 0.0)
    # Its own process's client, on the informers of Live's (they read what its own would).
    async with client_as(live.server, "scale-adjuster") as own:
        client = AccessGuard(own, scale_adjuster_needs(), "scale-adjuster")
        controller = ScaleAdjuster(client, live.informers, **options)
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        live.tasks.append(task)  # `until` surfaces a crash
        try:
            yield controller
        finally:
            stop.set()
            await task


def test_scaling_pods_come_and_go_with_the_fractional_pods(server: FakeApiServer) -> None:
    store = server.store
    store.create(queue_manifest("q"))
    store.create(node_manifest("cpu-1", gpus=0))
    fractions = [f"half-{i}" for i in range(3)]
    for name in fractions:  # 1.5 GPUs, anywhere
        store.create(pod_manifest(name, fraction=0.5))
    memories = ["mem-0", "mem-1"]
    for name in memories:  # gpu-memory on A100 nodes: 2 x 0.1 (the ratio) while no such node exists
        store.create(pod_manifest(name, gpu_memory=20000, node_selector=A100))
    plain_shape = pod_shape(store.get("pods", "half-0")).key
    a100_shape = pod_shape(store.get("pods", "mem-0")).key

    async def body() -> None:
        async with Live(server) as live, adjuster(live) as controller:
            await live.until(lambda: len(scaling_pods(server)) == 2)
            made = {p["metadata"]["labels"][SHAPE_LABEL]: p for p in scaling_pods(server).values()}
            assert {shape: requested_gpus(p) for shape, p in made.items()} == {plain_shape: 2, a100_shape: 1}
            for pod in made.values():
                assert pod["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
                assert pod["spec"]["schedulerName"] == "default-scheduler"
                assert pod["spec"]["priorityClassName"] == "kai-scale-adjust"
                assert pod["spec"]["priority"] == -1
                assert pod["spec"].get("nodeName") is None
            assert made[a100_shape]["spec"]["nodeSelector"] == A100
            assert store.get("priorityclasses", "kai-scale-adjust")["preemptionPolicy"] == "Never"
            assert not placed(server, fractions[:1])
            cycles = controller.stats.cycles
            await live.until(lambda: controller.stats.cycles >= cycles + 5)
            assert written(server, "create") == 2  # steady: nothing created twice
            # The autoscaler's node arrives: the kai-scheduler places every fractional pod on it, and the
            # scaling pods are no longer needed.
            store.create(node_manifest("gpu-1", gpus=4, labels=A100, gpu_memory=40960))
            await live.until(lambda: placed(server, fractions + memories))
            await live.until(lambda: not scaling_pods(server))
            assert controller.stats.errors == []

    run(body(), timeout=15)


def test_a_bound_scaling_pod_is_deleted_and_its_shape_waits(server: FakeApiServer) -> None:
    store = server.store
    store.create(queue_manifest("q"))
    for i in range(2):
        store.create(pod_manifest(f"half-{i}", fraction=0.5))
    clock = Clock()

    async def body() -> None:
        async with (
            Live(server, loop=False, binder=False) as live,
            adjuster(live, cooldown=60.0, monotonic=clock) as controller,
        ):
            await live.until(lambda: len(scaling_pods(server)) == 1)
            (name,) = scaling_pods(server)
            # A new node came up and the default scheduler bound the scaling pod to it.
            store.create(node_manifest("new-node", gpus=1))
            store.bind(NS, name, "new-node")
            await live.until(lambda: not scaling_pods(server) and controller.stats.released == 1)
            # Held: the kai-scheduler gets its chance at the new node first (several cycles, no new pod).
            cycles = controller.stats.cycles
            await live.until(lambda: controller.stats.cycles >= cycles + 5)
            assert not scaling_pods(server)
            # The fractional pods are still pending after the cooldown: ask again.
            clock.offset += 61.0
            await live.until(lambda: len(scaling_pods(server)) == 1)
            assert controller.stats.errors == []

    run(body(), timeout=15)
    assert (written(server, "create"), written(server, "delete")) == (2, 1)
