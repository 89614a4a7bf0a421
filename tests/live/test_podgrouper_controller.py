"""The pod grouper controller against the fake API server: PodGroups from owners, annotations, events,
idempotence across restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from live_support import eventually, run

from helpers import pod_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.needs import podgrouper_needs
from kai_scheduler.k8s.podgrouper.controller import EVENT_REASON, Outcome, PodGrouperController
from kai_scheduler.k8s.podgrouper.owner_reader import owner_resource_kind
from kai_scheduler.k8s.runtime.access import AccessGuard
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.informers import PODGROUPER_KINDS, InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.runtime.workqueue import KeyQueue

MakeClient = Callable[..., LightkubeClient]
REPLICA_TYPE = "training.kubeflow.org/replica-type"


def pytorch_job(name: str, workers: int | str, *, queue: str | None = "team-a") -> dict[str, Any]:
    labels = {"kai.scheduler/queue": queue} if queue else {}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {}},
                "Worker": {"replicas": workers, "template": {}},
            }
        },
    }


def owned_pod(name: str, owner: dict[str, Any], role: str | None = None, **kwargs: Any) -> dict[str, Any]:
    labels = {REPLICA_TYPE: role} if role else {}
    pod = pod_manifest(name, None, labels=labels, **kwargs)
    meta = owner["metadata"]
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    ]
    return pod


def seed_job(server: FakeApiServer, name: str = "mnist", workers: int = 3) -> dict[str, Any]:
    job = server.store.create(pytorch_job(name, workers))
    server.store.create(owned_pod(f"{name}-master-0", job, "master"))
    for i in range(workers):
        server.store.create(owned_pod(f"{name}-worker-{i}", job, "worker"))
    return job


def groups(server: FakeApiServer) -> dict[str, dict[str, Any]]:
    return {g["metadata"]["name"]: g for g in server.store.list("podgroups")}


def pod(server: FakeApiServer, name: str) -> dict[str, Any]:
    return server.store.get("pods", name, "default")


def annotation(obj: dict[str, Any]) -> str | None:
    value = (obj["metadata"].get("annotations") or {}).get("pod-group-name")
    return str(value) if value is not None else None


@asynccontextmanager
async def grouper(make_client: MakeClient, **options: Any) -> AsyncIterator[PodGrouperController]:
    """A running controller on its own client (held to what the pod grouper declares) and informers
    (stopped, and checked, on exit)."""
    options.setdefault("resync_period", 0.2)
    options.setdefault("backoff", FAST_BACKOFF)
    async with make_client("podgrouper") as raw:
        client = AccessGuard(raw, podgrouper_needs(), "podgrouper")
        async with InformerSet(client, backoff=FAST_BACKOFF, kinds=PODGROUPER_KINDS) as informers:
            controller = PodGrouperController(client, informers, **options)
            stop = asyncio.Event()
            task = asyncio.create_task(controller.run(stop))
            try:
                assert await informers.wait_synced(5)
                yield controller
            finally:
                stop.set()
                await asyncio.wait_for(task, 5)


async def settled(controller: PodGrouperController, passes: int = 2) -> None:
    """Let the controller go through the resync `passes` times with nothing left to do."""
    for _ in range(passes):
        await asyncio.sleep(controller.resync_period)
        await eventually(lambda: controller.queue.idle)


def test_pytorchjob_pods_get_one_pod_group_with_sub_groups(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    job = seed_job(server, workers=3)
    name = f"pg-mnist-{job['metadata']['uid']}"
    pod_names = ["mnist-master-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]

    async def body() -> None:
        async with grouper(make_client) as controller:
            await eventually(lambda: all(annotation(pod(server, p)) == name for p in pod_names))
            await settled(controller, 1)
            assert controller.stats.errors == []
            # A new worker of the scaled-up job: the PodGroup follows the plan.
            server.store.patch(
                "pytorchjobs.kubeflow.org",
                "mnist",
                {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}},
                namespace="default",
            )
            server.store.create(owned_pod("mnist-worker-3", job, "worker"))
            await eventually(lambda: groups(server)[name]["spec"]["minMember"] == 5)
            await eventually(lambda: annotation(pod(server, "mnist-worker-3")) == name)

    run(body())
    assert list(groups(server)) == [name]
    group = groups(server)[name]
    assert group["spec"]["queue"] == "team-a"
    assert group["spec"]["priorityClassName"] == "train"
    assert group["spec"]["subGroups"] == [
        {"name": "master", "minMember": 1},
        {"name": "worker", "minMember": 4},
    ]
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("PyTorchJob", "mnist", job["metadata"]["uid"])
    for p in [*pod_names, "mnist-worker-3"]:
        labels = pod(server, p)["metadata"]["labels"]
        assert labels["kai.scheduler/subgroup-name"] == ("master" if "master" in p else "worker")
    assert len(server.requests(verb="create", resource="podgroups")) == 1
    assert len(server.requests(verb="patch", resource="podgroups")) == 1  # the scale-up


def test_bare_pods_other_schedulers_and_unknown_owners(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    bare = server.store.create(pod_manifest("bare", "team-b"))
    server.store.create(pod_manifest("theirs", None, scheduler="default-scheduler"))
    server.store.create(pod_manifest("done", None, phase="Succeeded"))
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "gizmo", "namespace": "default", "uid": "widget-uid-1"},
    }
    server.store.create(owned_pod("gizmo-0", widget))  # a kind the grouper does not read: by its reference
    user = server.store.create(pod_manifest("mine", None, group="my-own-group"))

    async def body() -> None:
        async with grouper(make_client) as controller:
            await eventually(lambda: annotation(pod(server, "bare")) is not None)
            await eventually(lambda: annotation(pod(server, "gizmo-0")) is not None)
            await settled(controller)
            assert await controller.reconcile_pod(user) is Outcome.SKIPPED

    run(body())
    bare_group = f"pg-bare-{bare['metadata']['uid']}"
    assert annotation(pod(server, "bare")) == bare_group
    assert annotation(pod(server, "gizmo-0")) == "pg-gizmo-widget-uid-1"
    assert annotation(pod(server, "theirs")) is None
    assert annotation(pod(server, "done")) is None
    assert annotation(pod(server, "mine")) == "my-own-group"
    found = groups(server)
    assert sorted(found) == sorted([bare_group, "pg-gizmo-widget-uid-1"])
    assert found[bare_group]["spec"]["minMember"] == 1
    assert found[bare_group]["spec"]["queue"] == "team-b"
    assert found["pg-gizmo-widget-uid-1"]["spec"]["queue"] == "default-queue"
    assert found["pg-gizmo-widget-uid-1"]["metadata"]["ownerReferences"][0]["kind"] == "Widget"
    assert server.requests(resource="widgets.example.com") == []  # never asked for


def test_malformed_owner_is_an_event_not_a_crash(server: FakeApiServer, make_client: MakeClient) -> None:
    broken = server.store.create(pytorch_job("broken", "many"))
    server.store.create(owned_pod("broken-worker-0", broken, "worker"))

    def warnings() -> list[dict[str, Any]]:
        return [e for e in server.store.list("events", "default") if e.get("reason") == EVENT_REASON]

    async def body() -> None:
        async with grouper(make_client) as controller:
            await eventually(lambda: len(warnings()) == 1)
            # Still working: a good job that comes later is grouped.
            seed_job(server, "good", workers=1)
            await eventually(lambda: annotation(pod(server, "good-worker-0")) is not None)
            await settled(controller)  # resyncs look at the broken pod again: no second event
            assert controller.stats.events == 1

    run(body())
    (event,) = warnings()
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "broken-worker-0"
    assert "PyTorchJob default/broken" in event["message"]
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in event["message"]
    assert annotation(pod(server, "broken-worker-0")) is None
    assert [name for name in groups(server) if "broken" in name] == []


def test_restart_is_idempotent(server: FakeApiServer, make_client: MakeClient) -> None:
    job = seed_job(server, workers=2)
    name = f"pg-mnist-{job['metadata']['uid']}"

    async def body() -> None:
        async with grouper(make_client) as controller:
            await eventually(lambda: annotation(pod(server, "mnist-worker-1")) == name)
            await settled(controller, 1)
        creates = len(server.requests(verb="create", resource="podgroups"))
        pod_patches = len(server.requests(verb="patch", resource="pods"))
        assert (creates, pod_patches) == (1, 3)
        # Restarted: nothing to do.
        async with grouper(make_client) as controller:
            await settled(controller)
            assert controller.stats.reconciled == 0
        assert len(server.requests(verb="create", resource="podgroups")) == creates
        assert len(server.requests(verb="patch", resource="pods")) == pod_patches
        # A crash after the create, before the pod patch: the next run finishes the job, once.
        server.store.patch("pods", "mnist-worker-0", {"metadata": {"annotations": None}}, namespace="default")
        async with grouper(make_client) as controller:
            await eventually(lambda: annotation(pod(server, "mnist-worker-0")) == name)
            await settled(controller)
            assert controller.stats.created == 0

    run(body())
    assert list(groups(server)) == [name]


def test_api_failures_are_retried(server: FakeApiServer, make_client: MakeClient) -> None:
    bare = server.store.create(pod_manifest("flaky", None))
    server.fail_next(2, 503, verb="create", resource="podgroups")

    async def body() -> None:
        async with grouper(make_client) as controller:
            await eventually(lambda: annotation(pod(server, "flaky")) is not None)
            assert controller.stats.retries >= 2

    run(body())
    assert list(groups(server)) == [f"pg-flaky-{bare['metadata']['uid']}"]


def test_owner_kinds_and_the_work_queue() -> None:
    pytorch = owner_resource_kind("kubeflow.org/v1", "PyTorchJob")
    assert pytorch is not None and pytorch.plural == "pytorchjobs"
    knative = owner_resource_kind("serving.knative.dev/v1", "Service")
    assert knative is not None and knative.plural == "services"
    apps = owner_resource_kind("apps/v1", "ReplicaSet")
    assert apps is not None and (apps.group, apps.version, apps.plural) == ("apps", "v1", "replicasets")
    assert owner_resource_kind("example.com/v1", "Widget") is None  # not read: its role does not grant it

    async def body() -> None:
        queue = KeyQueue()
        queue.add("a")
        queue.add("a")
        assert len(queue) == 1
        key = await queue.get()
        queue.add("a")  # while processing: comes back after done, once
        assert len(queue) == 0
        queue.done(key)
        assert len(queue) == 1
        assert await queue.get() == "a"
        queue.done("a")
        queue.add_after("b", 0.01)
        assert not queue.idle
        assert await asyncio.wait_for(queue.get(), 1) == "b"
        queue.done("b")
        assert queue.idle

    run(body())
