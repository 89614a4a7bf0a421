"""`kai.scheduler/last-eviction-timestamp` as KAI v0.17's status updater writes it, live. Ported by
behaviour from `pkg/scheduler/cache/status_updater/default_status_updater_test.go`
TestUpdatePodGroupLastEvictionTimeStamp:
a PodGroup with none and no eviction gets none ("No eviction timestamp and no need to update"), one with a
stamp and no newer eviction keeps it ("Existing eviction timestamp, no need to update"), an eviction
replaces an older stamp ("Existing eviction timestamp, need to update"; the stamp on a PodGroup that had
none, "need to add", is `test_scheduler_loop.py`'s preemption delay test), and one KAI cannot read is
removed ("Existing eviction timestamp and need to remove": KAI reads it as none)."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, priority_class_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.scheduler.live_state import SessionClock

STAMP = "kai.scheduler/last-eviction-timestamp"
OLD = "2026-01-01T00:00:00Z"


def group(name: str, stamp: str | None, **kwargs: Any) -> dict[str, Any]:
    manifest = pod_group_manifest(name, **kwargs)
    if stamp is not None:
        manifest["metadata"]["annotations"][STAMP] = stamp
    return manifest


def stamp_of(server: FakeApiServer, name: str) -> str | None:
    annotations: dict[str, str] = server.store.get("podgroups", name)["metadata"].get("annotations") or {}
    return annotations.get(STAMP)


def test_the_last_eviction_stamp_is_added_kept_replaced_and_an_unreadable_one_removed(
    server: FakeApiServer,
) -> None:
    store = server.store
    store.create(node_manifest("node0", gpus=1))
    store.create(node_manifest("node1", gpus=2))
    store.create(queue_manifest("q", gpu=3))
    for name, value in (("train", 50), ("build", 100)):
        store.create(priority_class_manifest(name, value))
    groups = {"none": None, "kept": OLD, "unreadable": "not-a-time"}
    for name, stamp in groups.items():
        store.create(group(name, stamp, priority_class="build"))
        store.create(pod_manifest(f"{name}-0", group=name, gpus=0, priority_class="build"))
    store.create(group("victim", OLD, priority_class="train"))
    store.create(pod_manifest("victim-0", group="victim", gpus=1, priority_class="train", node_name="node0"))
    store.create(group("filler", None, priority_class="build"))
    store.create(pod_manifest("filler-0", group="filler", gpus=2, priority_class="build", node_name="node1"))
    clock = SessionClock()

    async def body() -> None:
        async with Live(server, binder=False, loop=False, clock=clock) as live:
            await live.loop.run_once()
            store.create(group("eager", None, priority_class="build"))
            store.create(pod_manifest("eager-0", group="eager", gpus=1, priority_class="build"))
            await live.until(lambda: "default/eager-0" in live.informers.pods.cache)
            report = await live.loop.run_once()
            assert report.evictions == ["default/victim-0"]
            await live.until(
                lambda: stamp_of(server, "victim") != OLD and stamp_of(server, "unreadable") is None
            )

    run(body())
    assert stamp_of(server, "none") is None
    assert stamp_of(server, "kept") == OLD
    replaced = stamp_of(server, "victim")
    assert replaced is not None and abs(clock.seconds(replaced)) < 60
