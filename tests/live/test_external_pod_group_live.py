"""An external PodGroup in live mode (KAI v0.15, #1552): pods that name it and one of its sub-groups are
scheduled in its `spec.queue`, whatever queue label they carry; a pod naming a sub-group it does not have
is left out of it and says so on itself with KAI's message (`Unschedulable`), while its siblings run."""

from __future__ import annotations

from live_support import Live, run
from test_pod_scheduled_condition import pod_scheduled

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer


def test_pods_join_the_external_pod_group_and_a_stray_one_says_why(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=4))
    store.create(queue_manifest("ext-queue"))
    group = pod_group_manifest("ext", "ext-queue")
    del group["spec"]["minMember"]
    group["spec"]["subGroups"] = [{"name": "workers", "minMember": 2}]
    store.create(group)
    skip = {"kai.scheduler/skip-podgrouper": "true"}
    for i in range(2):
        labels = {"kai.scheduler/subgroup-name": "workers"}
        store.create(
            pod_manifest(f"w-{i}", "no-such-queue", gpus=1, group="ext", labels=labels, annotations=skip)
        )
    stray_labels = {"kai.scheduler/subgroup-name": "nope"}
    store.create(
        pod_manifest("stray", "no-such-queue", gpus=1, group="ext", labels=stray_labels, annotations=skip)
    )

    async def body() -> None:
        async with Live(server, loop=False, binder=False) as live:
            report = await live.loop.run_once()
            assert report.errors == []
            assert sorted(report.bind_requests) == ["default/w-0", "default/w-1"]
            await live.until(lambda: pod_scheduled(live.informers.pods.cache["default/stray"]) is not None)

    run(body())
    condition = pod_scheduled(store.get("pods", "stray"))
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert (
        condition["message"] == 'Pod references subgroup "nope", which does not exist in PodGroup default/ext'
    )
