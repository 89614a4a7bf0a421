"""The scheduler loop marks pods it cannot place with PodScheduled=False (reason Unschedulable), as
kube-scheduler and KAI do, once per change; a pod that fits later is bound."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer


def pod_status_patches(server: FakeApiServer) -> int:
    return len(server.requests(verb="patch", resource="pods", subresource="status"))


def pod_scheduled(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond.get("type") == "PodScheduled"), None)


def test_unschedulable_pod_gets_the_condition_once_then_binds(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=1))
    store.create(queue_manifest("q"))
    other = {"type": "example.com/Checked", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    big = pod_manifest("big", gpus=2)
    big["status"] = {"phase": "Pending", "conditions": [other]}
    store.create(big)

    async def body() -> None:
        async with Live(server, loop=False) as live:
            first = await live.loop.run_once()
            assert first.bind_requests == [] and first.errors == []
            assert first.result is not None
            [message] = first.result.unschedulable.values()
            assert message
            condition = pod_scheduled(store.get("pods", "big"))
            assert condition is not None
            assert condition["status"] == "False" and condition["reason"] == "Unschedulable"
            assert condition["message"] == message[:1024] and condition["lastTransitionTime"]
            assert other in store.get("pods", "big")["status"]["conditions"]  # the others are kept
            assert pod_status_patches(server) == 1

            again = await live.loop.run_once()  # the cache may lag: what was written is remembered
            assert again.errors == [] and pod_status_patches(server) == 1
            await live.until(lambda: pod_scheduled(live.informers.pods.cache["default/big"]) is not None)
            await live.loop.run_once()
            assert pod_status_patches(server) == 1  # unchanged: not written again

            store.apply(node_manifest("n1", gpus=4))
            await live.until(
                lambda: live.informers.nodes.cache["n1"]["status"]["allocatable"].get("nvidia.com/gpu") == "4"
            )
            report = await live.loop.run_once()
            assert report.bind_requests == ["default/big"]
            await live.until(lambda: bool(store.get("pods", "big")["spec"].get("nodeName")))

    run(body(), timeout=10.0)
    pod = store.get("pods", "big")
    assert pod["spec"]["nodeName"] == "n1"
    condition = pod_scheduled(pod)
    assert condition is not None and condition["status"] == "True"
    assert pod_status_patches(server) == 1
