"""The scheduler loop on the fake API server: BindRequests, evictions, PodGroup status and annotations."""

from __future__ import annotations

import asyncio
from typing import Any

from live_support import Live, evicted, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, priority_class_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.api.reasons import OVER_LIMIT, UNSCHEDULABLE, WaitReason, code_of
from kai_scheduler.k8s.runtime.objects import object_key
from kai_scheduler.k8s.scheduler.live_state import SessionClock


def bind_requests(server: FakeApiServer) -> dict[str, dict[str, Any]]:
    return {object_key(b): b for b in server.store.list("bindrequests")}


def creates(server: FakeApiServer, resource: str = "bindrequests") -> int:
    return len([r for r in server.requests(verb="create", resource=resource) if r.subresource is None])


def test_bind_requests_are_created_once_with_kai_fields(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpu_memory=40000))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("whole", gpus=2))
    store.create(pod_manifest("frac", fraction=0.5))
    store.create(pod_manifest("cpu-only", cpu="2"))
    store.create(pod_manifest("theirs", scheduler="default-scheduler"))

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            first = await live.loop.run_once()
            assert sorted(first.bind_requests) == ["default/cpu-only", "default/frac", "default/whole"]
            await live.until(lambda: len(live.informers.bind_requests.cache) == 3)
            for _ in range(3):  # later cycles see the outstanding requests: nothing is requested twice
                again = await live.loop.run_once()
                assert again.bind_requests == [] and again.errors == []

    run(body())
    assert creates(server) == 3
    requests = bind_requests(server)
    whole, frac, cpu = requests["default/whole"], requests["default/frac"], requests["default/cpu-only"]
    pod_uid = server.store.get("pods", "whole")["metadata"]["uid"]
    assert whole["metadata"]["labels"] == {"selected-node": "n1"}
    assert whole["metadata"]["ownerReferences"][0]["uid"] == pod_uid
    assert whole["spec"] == {
        "podName": "whole",
        "selectedNode": "n1",
        "receivedResourceType": "Regular",
        "receivedGPU": {"count": 2, "portion": "1.00"},
        "selectedGPUGroups": [],
        "backoffLimit": 3,
    }
    assert frac["spec"]["receivedResourceType"] == "Fraction"
    assert frac["spec"]["receivedGPU"] == {"count": 1, "portion": "0.50"}
    assert len(frac["spec"]["selectedGPUGroups"]) == 1
    assert cpu["spec"]["receivedGPU"] == {"count": 0, "portion": "0.00"}
    assert "default/theirs" not in requests


def test_pod_group_status_annotations_and_events(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=4))
    store.create(queue_manifest("q"))
    store.create(pod_group_manifest("gang", min_member=2))
    store.create(pod_manifest("gang-0", group="gang", gpus=1))
    store.create(pod_manifest("gang-1", group="gang", gpus=1))
    store.create(pod_group_manifest("lost", "no-such-queue"))
    store.create(pod_manifest("lost-0", "no-such-queue", group="lost"))
    clock = SessionClock()

    async def body() -> None:
        async with Live(server, binder=False, loop=False, clock=clock) as live:
            report = await live.loop.run_once()
            assert sorted(report.bind_requests) == ["default/gang-0", "default/gang-1"]
            await live.until(lambda: "status" in live.informers.pod_groups.cache["default/lost"])
            # The gang's start is the loop's to remember (its pods say it after a restart), not written.
            started = live.loop.job_times["default/gang"].last_start
            assert started is not None and abs(started) < 5
            report = await live.loop.run_once()
            assert report.pod_group_updates == 0  # nothing changed: nothing written again

    run(body())
    gang = store.get("podgroups", "gang")
    assert "kai.scheduler/last-start-timestamp" not in gang["metadata"]["annotations"]
    lost = store.get("podgroups", "lost")
    [condition] = lost["status"]["schedulingConditions"]
    assert condition["type"] == "UnschedulableOnNodePool" and condition["nodePool"] == "default"
    assert condition["reason"] == "QueueDoesNotExist" and "no-such-queue" in condition["message"]
    assert condition["reasons"] == [{"reason": "QueueDoesNotExist", "message": condition["message"]}]
    assert condition["transitionID"] == "1"
    events = [e for e in store.list("events") if e["involvedObject"]["name"] == "lost"]
    assert len(events) == 1 and events[0]["reason"] == "Unschedulable" and events[0]["type"] == "Warning"


def test_the_condition_reason_is_the_reasons_code_not_read_from_its_message() -> None:
    assert code_of(WaitReason("queue a would exceed its gpu limit", OVER_LIMIT)) == "OverLimit"
    assert code_of(WaitReason("OverLimit: as a message only")) == UNSCHEDULABLE
    assert code_of("0/3 nodes are available: 3 Insufficient GPUs") == "Unschedulable"
    joined = WaitReason("OverLimit: queue a", OVER_LIMIT).joined("reclaim: no room")
    assert code_of(joined) == OVER_LIMIT and joined == "OverLimit: queue a; reclaim: no room"


def test_reclaim_marks_its_victims_disruption_targets_then_deletes_them(server: FakeApiServer) -> None:
    """As KAI's evictor: the DisruptionTarget condition (PreemptionByScheduler, the eviction's message) in a
    status patch, then a delete; no eviction subresource."""
    store = server.store
    store.create(node_manifest("node0", gpus=4, cpu="32", memory="256Gi"))
    store.create(queue_manifest("team-a", gpu=2))
    store.create(queue_manifest("team-b", gpu=2))
    for i in range(4):
        store.create(pod_manifest(f"a-{i}", "team-a", gpus=1, cpu=None, memory=None, node_name="node0"))
    for i in range(2):
        store.create(pod_manifest(f"b-{i}", "team-b", gpus=1, cpu=None, memory=None))
    marked: dict[str, dict[str, Any]] = {}

    def seen(_: dict[str, Any], pod: dict[str, Any]) -> None:
        for condition in pod.get("status", {}).get("conditions") or []:
            if condition["type"] == "DisruptionTarget":
                marked[pod["metadata"]["name"]] = condition

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            live.informers.pods.add_handler(on_update=seen)
            first = await live.loop.run_once()
            assert sorted(first.evictions) == ["default/a-2", "default/a-3"]
            assert sorted(live.loop.nominated) == ["default/b-0", "default/b-1"]
            assert first.bind_requests == []
            await live.until(lambda: len(live.informers.pods.cache) == 4)
            second = await live.loop.run_once()
            assert sorted(second.bind_requests) == ["default/b-0", "default/b-1"]
            assert live.loop.nominated == {}

    run(body())
    assert sorted(evicted(server)) == ["a-2", "a-3"]
    assert sorted(marked) == ["a-2", "a-3"]
    for condition in marked.values():
        assert (condition["status"], condition["reason"]) == ("True", "PreemptionByScheduler")
        assert condition["message"].startswith("Preempted by reclaim for default/")
        assert condition["lastTransitionTime"]
    requests = server.requests()
    for name in ("a-2", "a-3"):
        (patched,) = [i for i, r in enumerate(requests) if r.name == name and r.subresource == "status"]
        (deleted,) = [i for i, r in enumerate(requests) if r.name == name and r.verb == "delete"]
        assert patched < deleted
    assert server.requests(verb="create", resource="pods", subresource="eviction") == []
    assert {b["spec"]["selectedNode"] for b in store.list("bindrequests")} == {"node0"}


def test_conflicts_and_lost_answers_on_create_do_not_duplicate(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("p", gpus=1))
    # A 409 that wrote nothing: the loop finds no BindRequest and creates it.
    server.fail_next(1, 409, verb="create", resource="bindrequests")

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            report = await live.loop.run_once()
            assert report.bind_requests == ["default/p"] and report.errors == []
            # A create that is written but whose answer is lost: reported as an error, never redone.
            store.create(pod_manifest("r", gpus=1))
            await live.until(lambda: "default/r" in live.informers.pods.cache)
            server.fail_next(1, 500, verb="create", resource="bindrequests", after_commit=True)
            report = await live.loop.run_once()
            assert report.bind_requests == [] and len(report.errors) == 1
            for _ in range(3):
                assert (await live.loop.run_once()).bind_requests == []

    run(body())
    assert sorted(object_key(b) for b in store.list("bindrequests")) == ["default/p", "default/r"]
    # p twice (the first refused), r once, plus a 409 AlreadyExists if the loop ran before its informer
    # showed r's request: that counts as done.
    assert creates(server) in (3, 4)


def one_gpu_pod(server: FakeApiServer) -> Store:
    """A node, a queue and a pod `p` of one GPU that fits it."""
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("p", gpus=1))
    return store


def test_a_bind_request_deleted_before_the_next_cycle_is_made_again(server: FakeApiServer) -> None:
    """Deleted (by hand, by another controller) before the next cycle: the pod is pending again and gets a
    new request, whether or not the informer ever held the first (it may see both events in one go)."""
    store = one_gpu_pod(server)

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            deleted = asyncio.Event()
            live.informers.bind_requests.add_handler(on_delete=lambda obj: deleted.set())
            assert (await live.loop.run_once()).bind_requests == ["default/p"]
            store.delete("bindrequests", "p")
            await asyncio.wait_for(deleted.wait(), 8)
            assert (await live.loop.run_once()).bind_requests == ["default/p"]

    run(body())
    assert creates(server) == 2
    assert list(bind_requests(server)) == ["default/p"]


def test_a_bind_request_the_informer_has_not_shown_is_not_made_twice(server: FakeApiServer) -> None:
    """The BindRequest informer held (stopped): the cycles after the one that requested a pod see it
    requested all the same, and create nothing."""
    one_gpu_pod(server)

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            await live.informers.bind_requests.stop()
            assert (await live.loop.run_once()).bind_requests == ["default/p"]
            for _ in range(3):
                report = await live.loop.run_once()
                assert report.bind_requests == [] and report.errors == []

    run(body())
    assert creates(server) == 1


def test_bind_requests_of_gone_or_replaced_pods_are_collected(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    running = store.create(pod_manifest("running", node_name="n1"))
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "gone-uid"}
    for name, uid in (
        ("gone", "gone-uid"),
        ("running", "an-older-uid"),
        ("kept", running["metadata"]["uid"]),
    ):
        store.create(
            {
                "apiVersion": "scheduling.run.ai/v1alpha2",
                "kind": "BindRequest",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "ownerReferences": [{**owner, "uid": uid}],
                },
                "spec": {"podName": "running" if name == "kept" else name, "selectedNode": "n1"},
            }
        )

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            await live.loop.run_once()
            await live.until(lambda: sorted(live.informers.bind_requests.cache) == ["default/kept"])

    run(body())


def test_preemption_delay_holds_the_preemptor_and_an_eviction_is_stamped(server: FakeApiServer) -> None:
    """KAI v0.17's preemption delay, live: a PodGroup within its `spec.preemptionDelay` evicts nobody and
    says why (KAI's message); another one without a delay preempts, and the scheduler stamps the victim's
    PodGroup with `kai.scheduler/last-eviction-timestamp` (KAI's statement commitEvict)."""
    store = server.store
    store.create(node_manifest("node0", gpus=1))
    store.create(queue_manifest("q", gpu=1))
    for name, value in (("train", 50), ("build", 100)):
        store.create(priority_class_manifest(name, value))
    store.create(pod_group_manifest("victim", priority_class="train"))
    store.create(pod_manifest("victim-0", group="victim", gpus=1, priority_class="train", node_name="node0"))
    waiter = pod_group_manifest("waiter", priority_class="build")
    waiter["spec"]["preemptionDelay"] = "1h"
    store.create(waiter)
    store.create(pod_manifest("waiter-0", group="waiter", gpus=1, priority_class="build"))
    clock = SessionClock()

    async def body() -> None:
        async with Live(server, binder=False, loop=False, clock=clock) as live:
            first = await live.loop.run_once()
            assert first.evictions == []
            store.create(pod_group_manifest("eager", priority_class="build"))
            store.create(pod_manifest("eager-0", group="eager", gpus=1, priority_class="build"))
            await live.until(lambda: "default/eager-0" in live.informers.pods.cache)
            second = await live.loop.run_once()
            assert second.evictions == ["default/victim-0"]

    run(body())
    [condition] = store.get("podgroups", "waiter")["status"]["schedulingConditions"]
    assert (
        "Workload is within its preemption delay window (1h0m0s) and may not trigger evictions"
        in (condition["message"])
    )
    stamp = store.get("podgroups", "victim")["metadata"]["annotations"][
        "kai.scheduler/last-eviction-timestamp"
    ]
    assert abs(clock.seconds(stamp)) < 60
