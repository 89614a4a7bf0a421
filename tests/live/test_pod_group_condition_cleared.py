"""A PodGroup's `UnschedulableOnNodePool` conditions after it is scheduled, and status writes for a
PodGroup that is gone, as KAI v0.17's status updater has them.

#1908 (KAI v0.17.0 `pkg/scheduler/cache/status_updater/default_status_updater_test.go`
`TestClearPodGroupSchedulingCondition` and `TestRemovePodGroupSchedulingCondition`): once no pod of the job
waits and none awaits its bind, every scheduling condition goes, of every node pool; while the placement's
binds are in flight (allocated, pipelined, binding) the explanation stays, so a failed bind still says why
the pods waited. #1949 and #1999: a write for a PodGroup or a pod deleted meanwhile is dropped, not retried.
"""

from __future__ import annotations

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer

OTHER_POOL = {
    "type": "UnschedulableOnNodePool",
    "nodePool": "pool-b",
    "status": "True",
    "reason": "Unschedulable",
    "message": "an older explanation from another pool",
    "transitionID": "1",
}


def conditions(server: FakeApiServer, name: str = "g") -> list[dict[str, object]]:
    return list((server.store.get("podgroups", name).get("status") or {}).get("schedulingConditions") or [])


def test_the_conditions_stay_while_binding_and_go_once_bound(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("small", gpus=0))
    store.create(queue_manifest("q"))
    group = pod_group_manifest("g")
    group["status"] = {"schedulingConditions": [OTHER_POOL]}
    store.create(group)
    store.create(pod_manifest("g-0", group="g", gpus=1))

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            await live.loop.run_once()
            await live.until(lambda: len(conditions(server)) == 2)
            store.create(node_manifest("big", gpus=1))
            await live.until(lambda: "big" in live.informers.nodes.cache)
            placed = await live.loop.run_once()
            assert placed.bind_requests == ["default/g-0"]
            # Binding (a BindRequest the binder has not carried out): what was said stays.
            await live.until(lambda: "default/g-0" in live.informers.bind_requests.cache)
            await live.loop.run_once()
            assert len(conditions(server)) == 2
            store.bind("default", "g-0", "big")
            await live.until(
                lambda: live.informers.pods.cache["default/g-0"]["spec"].get("nodeName") == "big"
            )
            report = await live.loop.run_once()
            assert report.errors == []
            await live.until(lambda: conditions(server) == [])

    run(body())


def test_a_condition_for_a_pod_group_deleted_meanwhile_is_dropped(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("small", gpus=0))
    store.create(queue_manifest("q"))
    store.create(pod_group_manifest("g"))
    store.create(pod_manifest("g-0", group="g", gpus=1))
    # The PodGroup goes between the cycle's snapshot and its write: the API server answers 404.
    server.fail_next(1, 404, verb="patch", resource="podgroups", subresource="status")

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            report = await live.loop.run_once()
            assert report.errors == []

    run(body())
    assert len(server.requests(verb="patch", resource="podgroups", subresource="status")) == 1


def test_a_condition_for_a_pod_deleted_meanwhile_is_dropped(server: FakeApiServer) -> None:
    """#1999 (KAI v0.17.0): the same for a pod's PodScheduled condition."""
    store = server.store
    store.create(node_manifest("small", gpus=0))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("p", gpus=1))
    server.fail_next(1, 404, verb="patch", resource="pods", subresource="status")

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            report = await live.loop.run_once()
            assert report.errors == []

    run(body())
    assert len(server.requests(verb="patch", resource="pods", subresource="status")) == 1
