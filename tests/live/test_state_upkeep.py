"""What live mode keeps per changed object instead of walking the cluster every cycle (issue #8).

The loop's view of the pods (job of each pod, active jobs, BindRequests, our pods' states) is kept by the
`StateBuilder` per changed pod and must equal what a walk over the whole `ClusterState` gives; a pod's or
PodGroup's parsed model is kept across changes the model does not read (so that the cache updates a bound
pod's task in place), and the whole state is made only when asked for; the queue controller's per-queue
sums, kept per changed PodGroup, must equal a sum over every PodGroup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from live_support import Live, eventually, run

from helpers import fingerprint, node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.controlplane.status import queue_numbers
from kai_scheduler.k8s.needs import INFORMER_KINDS
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.informers import InformerSet, queue_of_pod_group
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler.live_state import LiveState, SessionClock
from kai_scheduler.k8s.scheduler.parsing import same_pod_model
from kai_scheduler.k8s.scheduler.state import StateBuilder
from kai_scheduler.k8s.status.queues import QueueStatusController, QueueUsage

MakeClient = Callable[..., LightkubeClient]
START = 1_767_225_600.0


def walked(live: LiveState) -> dict[str, Any]:
    """The loop's view as a walk over the whole state computes it (what the builder did every cycle)."""
    job_of_pod: dict[str, str] = {}
    active: set[str] = set()
    for state in live.state.pods:
        if state.pod.spec.scheduler_name != "kai-scheduler":
            continue
        job = state.pod.metadata.annotations.get("pod-group-name") or f"pg-{state.pod.metadata.name}"
        job_of_pod[state.pod.key] = f"{state.pod.namespace}/{job}"
        if state.node_name is not None and state.phase not in ("Succeeded", "Failed"):
            active.add(job_of_pod[state.pod.key])
    return {"job_of_pod": job_of_pod, "active_jobs": active}


def view(live: LiveState) -> dict[str, Any]:
    return {"job_of_pod": live.job_of_pod, "active_jobs": set(live.active_jobs)}


async def until_seen(informers: InformerSet, check: Callable[[InformerSet], bool]) -> None:
    await eventually(lambda: check(informers))


def test_loop_view_models_and_lazy_state(make_client: MakeClient, server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=8))
    store.create(queue_manifest("q", gpu=8))
    store.create(pod_group_manifest("gang", min_member=2))
    for i in range(2):
        store.create(pod_manifest(f"gang-{i}", group="gang", gpus=1))
    store.create(pod_manifest("solo", gpus=1))
    store.create(pod_manifest("theirs", gpus=1, scheduler="default-scheduler"))

    def pod(informers: InformerSet, name: str) -> dict[str, Any]:
        return informers.pods.cache[f"default/{name}"]

    async def body() -> None:
        async with make_client("scheduler") as client, InformerSet(client, backoff=FAST_BACKOFF) as informers:
            assert await informers.wait_synced(5)
            builder = StateBuilder(informers, SessionClock(start=START))
            first = builder.build()
            assert view(first) == walked(first)
            assert first.active_jobs == frozenset() and first.bind_requests == {}
            solo = builder.cache.pod("default/solo")
            group = next(g.pod_group for g in first.state.pod_groups if g.pod_group.key == "default/gang")
            assert solo is not None

            # Bound and started, statuses written: the same models (the cache's in-place path).
            version = pod(informers, "solo")["metadata"]["resourceVersion"]
            store.bind("default", "solo", "n1")
            store.set_status("pods", "solo", {"phase": "Running"}, namespace="default")
            store.set_status("podgroups", "gang", {"pending": 2}, namespace="default")
            await until_seen(informers, lambda i: pod(i, "solo")["status"].get("phase") == "Running")
            await until_seen(informers, lambda i: "status" in i.pod_groups.cache["default/gang"])
            second = builder.build()
            now = builder.cache.pod("default/solo")
            assert now is not None and now.pod is solo.pod
            assert (now.node_name, now.phase) == ("n1", "Running")
            assert pod(informers, "solo")["metadata"]["resourceVersion"] != version
            assert next(g.pod_group for g in second.state.pod_groups) is group
            assert second.active_jobs == {"default/pg-solo"} and view(second) == walked(second)

            # What the model reads changes: parsed again.
            store.patch("pods", "solo", {"metadata": {"labels": {"note": "x"}}}, namespace="default")
            store.patch("podgroups", "gang", {"spec": {"minMember": 1}}, namespace="default")
            await until_seen(informers, lambda i: "note" in pod(i, "solo")["metadata"]["labels"])
            await until_seen(
                informers, lambda i: i.pod_groups.cache["default/gang"]["spec"]["minMember"] == 1
            )
            third = builder.build()
            now = builder.cache.pod("default/solo")
            assert now is not None and now.pod is not solo.pod and now.pod.metadata.labels["note"] == "x"
            assert next(g.pod_group for g in third.state.pod_groups).spec.min_member == 1

            # A BindRequest, a finished pod, a deleted pod: the kept view still equals the walk.
            store.create(
                {
                    "apiVersion": "scheduling.run.ai/v1alpha2",
                    "kind": "BindRequest",
                    "metadata": {"name": "gang-0", "namespace": "default"},
                    "spec": {"podName": "gang-0", "selectedNode": "n1"},
                }
            )
            store.set_status("pods", "solo", {"phase": "Succeeded"}, namespace="default")
            store.delete("pods", "gang-1", "default")
            await until_seen(informers, lambda i: "default/gang-0" in i.bind_requests.cache)
            await until_seen(informers, lambda i: "default/gang-1" not in i.pods.cache)
            await until_seen(informers, lambda i: pod(i, "solo")["status"].get("phase") == "Succeeded")
            fourth = builder.build()
            assert list(fourth.bind_requests) == ["default/gang-0"]
            assert fourth.active_jobs == {"default/gang"} and view(fourth) == walked(fourth)
            assert set(fourth.our_pods) == {"default/gang-0", "default/solo"}
            state = fourth.state  # asked for before the next build: kept
            unasked = builder.build()
            builder.build()
            assert fourth.state is state
            with pytest.raises(RuntimeError):
                unasked.state  # noqa: B018 - the cache has moved on since `unasked` was built

            # Equal to a state built from scratch.
            fresh = StateBuilder(informers, SessionClock(start=START))
            fresh.build()
            assert fingerprint(fresh.cache.snapshot()) == fingerprint(builder.cache.snapshot())

    run(body())


def test_same_pod_model() -> None:
    pod = pod_manifest("p", gpus=1)
    pod["metadata"]["resourceVersion"] = "1"
    bound = {
        **pod,
        "metadata": {**pod["metadata"], "resourceVersion": "2"},
        "spec": {**pod["spec"], "nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]},
    }
    assert same_pod_model(pod, bound)
    assert not same_pod_model(pod, {**bound, "status": {"phase": "Lost"}})  # left to the parser to reject
    assert not same_pod_model(pod, {**bound, "metadata": {**bound["metadata"], "labels": {"a": "b"}}})
    relabelled = {**pod, "spec": {**pod["spec"], "nodeSelector": {"zone": "a"}}}
    assert not same_pod_model(pod, relabelled)
    terminating = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert not same_pod_model(pod, terminating)


def test_queue_sums_follow_pod_group_changes(make_client: MakeClient, server: FakeApiServer) -> None:
    store = server.store
    store.create(queue_manifest("dept", gpu=8))
    store.create(queue_manifest("a", gpu=4, parent="dept"))
    store.create(queue_manifest("b", gpu=4, parent="dept"))

    def usage(cpu: str, gpu: str) -> dict[str, Any]:
        listed = {"cpu": cpu, "memory": "0", "nvidia.com/gpu": gpu}
        return {
            "resourcesStatus": {"allocated": listed, "allocatedNonPreemptible": listed, "requested": listed}
        }

    def summed(informers: InformerSet) -> dict[str, QueueUsage]:
        """Every PodGroup walked (what a pass did before)."""
        parents = {"dept": None, "a": "dept", "b": "dept"}
        own = [
            (queue, QueueUsage.of_pod_group(group).numbers())
            for group in informers.pod_groups.cache.values()
            for queue in queue_of_pod_group(group)
        ]
        return {name: QueueUsage.of(numbers) for name, numbers in queue_numbers(parents, own).items()}

    kinds = INFORMER_KINDS["status-controllers"]

    async def body() -> None:
        async with (
            make_client("status-controllers") as client,
            InformerSet(client, backoff=FAST_BACKOFF, kinds=kinds) as informers,
        ):
            assert await informers.wait_synced(5)
            queues = QueueStatusController(client, informers, resync_period=60, debounce=0.01, write_period=0)
            stop = asyncio.Event()
            task = asyncio.create_task(queues.run(stop))
            for i in range(6):
                store.create(pod_group_manifest(f"g{i}", "a" if i % 2 else "b"))
            for step in range(3):  # amounts that do not add up exactly in binary, changed and taken away
                for i in range(6):
                    store.set_status("podgroups", f"g{i}", usage(f"{100 * (i + step)}m", "0.1"), "default")
            store.delete("podgroups", "g0", "default")
            store.patch("podgroups", "g1", {"spec": {"queue": "b"}}, namespace="default")

            def settled() -> bool:
                groups = informers.pod_groups.cache
                moved = groups.get("default/g1", {}).get("spec", {}).get("queue") == "b"
                last = groups.get("default/g5", {}).get("status", {}).get("resourcesStatus", {})
                return "default/g0" not in groups and moved and last.get("requested", {}).get("cpu") == "700m"

            await eventually(settled)
            totals = {name: usage for name, (usage, _) in queues.totals().items()}
            expected = summed(informers)
            assert totals.keys() == expected.keys()
            for name, got in totals.items():
                assert got.allocated.resource_list() == expected[name].allocated.resource_list()
                assert got.requested.gpu == pytest.approx(expected[name].requested.gpu)
            assert totals["dept"].requested.resource_list()["nvidia.com/gpu"] == "500m"
            assert totals["b"].requested.resource_list()["cpu"] == "1300m"  # g1 (300m), g2 (400m), g4 (600m)
            stop.set()
            await asyncio.wait_for(task, 5)

    run(body())


def test_the_whole_state_is_kept_for_the_plugin_server_only(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=8))
    store.create(queue_manifest("q", gpu=8))
    store.create(pod_manifest("p", gpus=1))

    async def body() -> None:
        async with Live(server, binder=False, loop=False, gpus=False) as live:
            assert (await live.loop.run_once()).bind_requests == ["default/p"]
            cycle = live.loop.last_cycle
            assert cycle is not None and [p.pod.key for p in cycle.state.pods] == ["default/p"]
        async with Live(server, binder=False, loop=False, gpus=False, publish_cycles=False) as live:
            report = await live.loop.run_once()
            assert report.result is not None and report.errors == []
            assert live.loop.last_cycle is None

    run(body())


def test_later_cycles_collect_bind_requests_of_pods_replaced_or_gone(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))

    def request(name: str, uid: str) -> dict[str, Any]:
        return {
            "apiVersion": "scheduling.run.ai/v1alpha2",
            "kind": "BindRequest",
            "metadata": {
                "name": name,
                "namespace": "default",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}],
            },
            "spec": {"podName": name, "selectedNode": "n1"},
        }

    first = store.create(pod_manifest("p", node_name="n1"))
    store.create(request("p", first["metadata"]["uid"]))

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            requests = live.informers.bind_requests.cache
            await live.loop.run_once()
            assert sorted(requests) == ["default/p"]  # its pod's
            # The pod replaced by a new one of the same name; a BindRequest for no pod at all.
            store.delete("pods", "p", "default")
            store.create(pod_manifest("p", node_name="n1"))
            store.create(request("ghost", "no-such-uid"))
            await live.until(lambda: "default/ghost" in requests)
            await live.until(
                lambda: live.informers.pods.cache["default/p"]["metadata"]["uid"] != first["metadata"]["uid"]
            )
            await live.loop.run_once()
            await live.until(lambda: not requests)

    run(body())


def test_job_times_kept_per_changed_job_cover_every_job(server: FakeApiServer) -> None:
    """The loop looks at the times of the jobs that changed or were decided on only; after every cycle
    they must still be what a look at every job gives: an entry for each job that exists and none for a
    job that is gone, and a start time exactly for the jobs that run once the cycle's decisions are in."""
    store = server.store
    store.create(node_manifest("n1", gpus=4))
    store.create(queue_manifest("q", gpu=4))
    store.create(pod_group_manifest("gang", min_member=2))
    for i in range(2):
        store.create(pod_manifest(f"gang-{i}", group="gang", gpus=1))
    store.create(pod_manifest("solo", gpus=1))
    store.create(pod_manifest("big", gpus=8))  # never fits: a job that waits

    async def body() -> None:
        async with Live(server, binder=True, loop=False, gpus=False) as live:
            loop = live.loop
            seen: list[LiveState] = []
            build = loop.states.build

            def remembered(**kwargs: Any) -> LiveState:
                seen.append(build(**kwargs))
                return seen[-1]

            loop.states.build = remembered  # type: ignore[method-assign]

            async def cycle() -> None:
                report = await loop.run_once()
                assert report.result is not None and report.errors == []
                live_state = seen[-1]
                exists = set(live_state.pod_groups) | set(live_state.job_of_pod.values())
                assert set(loop.job_times) == exists
                change: dict[str, int] = {}
                for decision in report.decisions:
                    job = live_state.job_of_pod[decision.pod]
                    change[job] = change.get(job, 0) + (-1 if decision.type == "evict" else 1)
                for job in exists:
                    pods = live_state.job_pods.get(job)
                    running = (pods.running if pods else 0) + change.get(job, 0) > 0
                    assert (loop.job_times[job].last_start is not None) == running, job

            def bound(name: str) -> bool:
                return bool(live.informers.pods.cache[f"default/{name}"]["spec"].get("nodeName"))

            await cycle()  # the gang and solo are placed
            await live.until(lambda: bound("gang-0") and bound("gang-1") and bound("solo"))
            await cycle()
            store.set_status("pods", "solo", {"phase": "Succeeded"}, namespace="default")
            await live.until(
                lambda: live.informers.pods.cache["default/solo"]["status"].get("phase") == "Succeeded"
            )
            await cycle()  # solo finished: no start any more
            store.delete("pods", "solo", "default")
            store.delete("podgroups", "gang", "default")
            store.create(pod_manifest("late", gpus=1))
            await live.until(lambda: "default/solo" not in live.informers.pods.cache)
            await live.until(lambda: "default/gang" not in live.informers.pod_groups.cache)
            await cycle()  # solo's job is gone; the gang's pods speak for their group now
            await cycle()
            assert "default/pg-solo" not in loop.job_times

    run(body())
