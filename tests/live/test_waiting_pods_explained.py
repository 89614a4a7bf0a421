"""Every pod that waits says why, on itself (issue #13): a pod the scheduler cannot take (annotations that
break KAI's admission rules, a PodGroup or queue that does not exist, a PodGroup that breaks the rules, a
PriorityClass that does not exist) gets PodScheduled=False with a reason and a message naming the field and
the value, and one Warning event per distinct reason, not one per cycle."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.model.partition import Partition

MALFORMED = {
    "fraction-abc": ({"gpu-fraction": "abc"}, "metadata.annotations.gpu-fraction", "'abc'"),
    "fraction-1-5": ({"gpu-fraction": "1.5"}, "metadata.annotations.gpu-fraction", "'1.5'"),
    "memory-minus-5": ({"gpu-memory": "-5"}, "metadata.annotations.gpu-memory", "'-5'"),
    "fraction-and-memory": (
        {"gpu-fraction": "0.5", "gpu-memory": "1024"},
        "metadata.annotations",
        "gpu-fraction and gpu-memory cannot both be set",
    ),
}


def pod_scheduled(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((cond for cond in conditions if cond.get("type") == "PodScheduled"), None)


def events_of(server: FakeApiServer, name: str) -> list[dict[str, Any]]:
    return [e for e in server.store.list("events", "default") if e["involvedObject"]["name"] == name]


def test_pods_the_scheduler_cannot_take_say_why_once(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=4))
    store.create(queue_manifest("q"))
    for name, (given, _, _) in MALFORMED.items():
        store.create(pod_manifest(name, annotations=given))
    store.create(pod_manifest("orphan", group="no-such-group"))
    store.create(pod_manifest("homeless", "nobody"))
    cyclic = pod_group_manifest("cyclic", min_member=1)
    cyclic["spec"]["subGroups"] = [{"name": "a", "parent": "b", "minMember": 1}, {"name": "b", "parent": "a"}]
    store.create(cyclic)
    store.create(pod_manifest("cyclic-0", group="cyclic"))
    store.create(pod_manifest("fine", fraction=0.5))

    async def body() -> None:
        async with Live(server, loop=False, binder=False) as live:
            for _ in range(3):  # several cycles: nothing is written twice
                report = await live.loop.run_once()
                assert report.errors == []
                assert report.bind_requests == ["default/fine"] or live.loop.cycle > 1
            await live.until(lambda: pod_scheduled(live.informers.pods.cache["default/orphan"]) is not None)
            await live.loop.run_once()

    run(body())
    expected: dict[str, tuple[str, str]] = {
        name: ("InvalidPod", f"{field}: ") for name, (_, field, _) in MALFORMED.items()
    }
    expected["orphan"] = (
        "PodGroupNotFound",
        "metadata.annotations.pod-group-name: PodGroup default/no-such-group does not exist",
    )
    expected["homeless"] = ("QueueDoesNotExist", "metadata.labels.kai.scheduler/queue: queue nobody")
    expected["cyclic-0"] = ("InvalidPodGroup", "PodGroup default/cyclic is refused: spec.subGroups[")
    for name, (reason, start) in expected.items():
        condition = pod_scheduled(store.get("pods", name))
        assert condition is not None, name
        assert condition["status"] == "False" and condition["reason"] == reason, (name, condition)
        assert condition["message"].startswith(start), (name, condition["message"])
        [event] = events_of(server, name)  # one, after four cycles
        assert (event["type"], event["reason"], event["message"]) == ("Warning", reason, condition["message"])
    for name, (_, _, value) in MALFORMED.items():
        assert value in store.get("pods", name)["status"]["conditions"][0]["message"], name
    assert store.get("pods", "fine").get("status", {}).get("conditions") is None  # it was bound
    [refused] = [e for e in events_of(server, "cyclic") if e["involvedObject"]["kind"] == "PodGroup"]
    assert (refused["type"], refused["reason"]) == ("Warning", "InvalidPodGroup")
    assert refused["message"].startswith("spec.subGroups[")


def test_a_pod_whose_priority_class_is_gone_runs_at_the_default_priority_with_a_warning(
    server: FakeApiServer,
) -> None:
    """KAI schedules such a pod at the default priority; the pod says why it did not get its own."""
    store = server.store
    store.create(node_manifest("n1", gpus=4))
    store.create(queue_manifest("q"))
    serving = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "serving"},
        "value": 200,
    }
    store.create(serving)
    store.create(pod_manifest("urgent", gpus=1, priority_class="serving"))  # admitted while it existed
    store.delete("priorityclasses", "serving")

    async def body() -> None:
        async with Live(server, loop=False, binder=False) as live:
            report = await live.loop.run_once()
            assert report.bind_requests == ["default/urgent"] and report.errors == []
            await live.loop.run_once()

    run(body())
    [event] = events_of(server, "urgent")
    assert (event["type"], event["reason"]) == ("Warning", "PriorityClassNotFound")
    assert event["message"].startswith(
        'spec.priorityClassName: no PriorityClass with name "serving" was found'
    )
    assert event["message"].endswith("; KAI schedules the pod at the default priority")


def test_what_the_simulator_warns_about_is_a_warning_event_once(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=4))
    store.create(queue_manifest("q"))
    sparse = queue_manifest("sparse")
    del sparse["spec"]["resources"]["cpu"]["limit"]
    store.create(sparse)
    store.create(queue_manifest("narcissus", parent="narcissus"))
    store.create(pod_manifest("typo", annotations={"gpu-fractoin": "0.5"}))
    group = pod_group_manifest("classy", min_member=1)
    group["spec"]["priorityClassName"] = "inferance"
    store.create(group)
    store.create(pod_manifest("classy-0", group="classy"))

    async def body() -> None:
        async with Live(server, loop=False, binder=False) as live:
            for _ in range(3):
                report = await live.loop.run_once()
                assert report.errors == []
            store.apply({**sparse, "status": {"allocated": {}}})  # a status write reads the queue again
            await live.loop.run_once()

    run(body())
    [typo] = events_of(server, "typo")
    assert (typo["type"], typo["reason"]) == ("Warning", "MisspelledKey")
    assert typo["message"] == (
        "metadata.annotations.gpu-fractoin: "
        '"gpu-fractoin" is not a key KAI reads; did you mean "gpu-fraction"?'
    )
    [classy] = [e for e in events_of(server, "classy") if e["reason"] == "PriorityClassNotFound"]
    assert classy["message"].startswith(
        'spec.priorityClassName: no PriorityClass with name "inferance" was found; did you mean "inference"?'
    )
    assert classy["involvedObject"]["kind"] == "PodGroup"
    [queue] = events_of(server, "sparse")
    assert queue["reason"] == "FieldNotSet" and queue["message"].startswith(
        "spec.resources.cpu.limit: not set"
    )
    assert not events_of(server, "q")
    [own_parent] = events_of(server, "narcissus")
    assert (own_parent["reason"], own_parent["message"]) == (
        "InvalidQueue",
        "spec.parentQueue: a queue cannot be its own parent ('narcissus')",
    )


def test_with_node_pools_one_scheduler_says_it(server: FakeApiServer) -> None:
    store = server.store
    store.create(queue_manifest("q"))
    for pool in ("a", "b"):
        labels = {"kai.scheduler/node-pool": pool}
        store.create(pod_manifest(f"bad-{pool}", annotations={"gpu-fraction": "2"}, labels=labels))

    async def body() -> dict[str | None, set[str]]:
        said: dict[str | None, set[str]] = {}
        for pool in ("a", "b", None):
            async with Live(
                server, loop=False, binder=False, gpus=False, partition=Partition(value=pool)
            ) as live:
                said[pool] = set(live.loop.states.build().rejected)
        return said

    assert run(body()) == {"a": {"default/bad-a"}, "b": {"default/bad-b"}, None: set()}
