"""PodGroup and Queue status controllers against the fake API server: usage, counters, the queue tree,
and no rewrites of unchanged status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from identities import ALL_IN_ONE
from live_support import eventually, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    NODES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    KubeClient,
)
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.status.metrics import QueueMetrics
from kai_scheduler.k8s.status.podgroups import PodGroupStatusController
from kai_scheduler.k8s.status.queues import QueueStatusController
from kai_scheduler.k8s.status.shared import StatusReconciler, Usage, format_milli, normalized_resource_list
from kai_scheduler.model.priorities import is_preemptible

MakeClient = Callable[..., LightkubeClient]
GIB = 2**30
KINDS = (PODS, POD_GROUPS, QUEUES, NODES, PRIORITY_CLASSES)


def resources(cpu: str, memory: int, gpu: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": str(memory), "nvidia.com/gpu": gpu}


ZERO = resources("0", 0, "0")


def seed(server: FakeApiServer) -> None:
    """research <- team-a (a train job: preemptible), team-b (an inference job: not)."""
    store = server.store
    store.kubelet = True  # bound pods start running
    store.create(node_manifest("n1", gpu_memory=40000))
    store.create(queue_manifest("research"))
    store.create(queue_manifest("team-a", parent="research"))
    store.create(queue_manifest("team-b", parent="research"))
    store.create(pod_group_manifest("train", "team-a", min_member=2, priority_class="train"))
    store.create(pod_group_manifest("serve", "team-b", priority_class="inference"))
    for i in range(2):
        store.create(pod_manifest(f"train-{i}", "team-a", group="train", gpus=1))
    store.create(pod_manifest("train-2", "team-a", group="train", fraction=0.5))
    store.create(
        pod_manifest("serve-0", "team-b", group="serve", cpu="500m", memory="512Mi", gpu_memory=20000)
    )
    store.create(pod_manifest("serve-old", "team-b", group="serve", phase="Succeeded"))


def status(server: FakeApiServer, kind: str, name: str) -> dict[str, Any]:
    obj = server.store.get(kind, name, "default" if kind == "podgroups" else None)
    return dict(obj.get("status") or {})


@asynccontextmanager
async def running(
    make_client: MakeClient, make: Callable[[KubeClient, InformerSet], StatusReconciler]
) -> AsyncIterator[StatusReconciler]:
    """The controller `make` builds, running on its own client and informers for the block."""
    async with (
        make_client("status-controllers") as client,
        InformerSet(client, backoff=FAST_BACKOFF, kinds=KINDS) as informers,
    ):
        controller = make(client, informers)
        stop = asyncio.Event()
        task = asyncio.create_task(controller.run(stop))
        try:
            yield controller
        finally:
            stop.set()
            await asyncio.wait_for(task, 5)


def status_writes(server: FakeApiServer) -> int:
    return len(server.requests(verb="patch", subresource="status"))


def test_pod_group_and_queue_status(server: FakeApiServer, make_client: MakeClient) -> None:
    seed(server)
    metrics = QueueMetrics()

    def allocated_gpus(queue: str) -> float | None:
        return metrics.registry.get_sample_value("kai_queue_allocated_gpus", {"queue_name": queue})

    async def body() -> None:
        async with (
            make_client("status-controllers") as client,
            InformerSet(client, backoff=FAST_BACKOFF, kinds=KINDS) as informers,
        ):
            groups = PodGroupStatusController(client, informers, resync_period=0.2, debounce=0.01, settle=0)
            queues = QueueStatusController(
                client, informers, metrics=metrics, resync_period=0.2, debounce=0.01, write_period=0
            )
            stop = asyncio.Event()
            tasks = [asyncio.create_task(groups.run(stop)), asyncio.create_task(queues.run(stop))]

            # Nothing bound yet: everything requested, nothing allocated.
            await eventually(
                lambda: status(server, "queues", "research").get("requested", {}).get("cpu") == "3500m"
            )
            train = status(server, "podgroups", "train")
            assert train["resourcesStatus"] == {
                "allocated": ZERO,
                "allocatedNonPreemptible": ZERO,
                "requested": resources("3", 3 * GIB, "2500m"),
            }
            assert (train["pending"], train["running"], train["succeeded"], train["failed"]) == (3, 0, 0, 0)

            for pod in ("train-0", "train-1", "serve-0"):
                server.store.bind("default", pod, "n1")
            await eventually(
                lambda: status(server, "queues", "research").get("allocated", {}).get("cpu") == "2500m"
            )
            await eventually(lambda: allocated_gpus("research") == 2.5)

            # Steady: resyncs and unrelated pod changes write nothing.
            writes = status_writes(server)
            passes = (groups.stats.passes, queues.stats.passes)
            server.store.patch(
                "pods", "train-2", {"metadata": {"labels": {"note": "x"}}}, namespace="default"
            )
            # Two passes of each since the change (the change's own or a resync, then a resync): counted
            # rather than slept for, so that a busy host only makes the wait longer.
            await eventually(
                lambda: groups.stats.passes >= passes[0] + 2 and queues.stats.passes >= passes[1] + 2,
                timeout=30,
            )
            assert status_writes(server) == writes

            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 5)
            assert groups.stats.failures == queues.stats.failures == 0

    run(body())

    train = status(server, "podgroups", "train")
    assert train["resourcesStatus"] == {
        "allocated": resources("2", 2 * GIB, "2"),
        "allocatedNonPreemptible": ZERO,  # train (50) is preemptible
        "requested": resources("3", 3 * GIB, "2500m"),
    }
    assert (train["running"], train["pending"], train["succeeded"], train["failed"]) == (2, 1, 0, 0)
    serve = status(server, "podgroups", "serve")
    half = resources("500m", GIB // 2, "500m")  # 20000 of the node's 40000 MiB: half a GPU
    # As KAI's podgroupcontroller, requested also names the GPU memory asked for.
    asked = half | {"run.ai/gpu.memory": "20000"}
    assert serve["resourcesStatus"] == {
        "allocated": half,
        "allocatedNonPreemptible": half,
        "requested": asked,
    }
    assert (serve["running"], serve["pending"], serve["succeeded"], serve["failed"]) == (1, 0, 1, 0)

    team_a, team_b, research = (status(server, "queues", q) for q in ("team-a", "team-b", "research"))
    assert {k: team_a[k] for k in ("allocated", "allocatedNonPreemptible", "requested")} == train[
        "resourcesStatus"
    ]
    assert team_b["allocated"] == team_b["allocatedNonPreemptible"] == half
    assert team_b["requested"] == asked
    assert team_a["childQueues"] == team_b["childQueues"] == []
    assert research["childQueues"] == ["team-a", "team-b"]
    assert research["allocated"] == resources("2500m", 2 * GIB + GIB // 2, "2500m")
    assert research["allocatedNonPreemptible"] == half
    assert research["requested"] == resources("3500m", 3 * GIB + GIB // 2, "3") | {
        "run.ai/gpu.memory": "20000"
    }


def test_status_follows_deletions_and_retries_failed_writes(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    store = server.store
    store.create(queue_manifest("q"))
    store.create(pod_group_manifest("job", "q", preemptibility="non-preemptible"))
    store.create(pod_manifest("job-0", "q", group="job", node_name="n1", cpu="2", memory="1Gi"))
    store.create(pod_manifest("job-1", "q", group="job", node_name="n1", cpu="2", memory="1Gi"))
    server.fail_next(2, 500, verb="patch", resource="podgroups", subresource="status")

    async def body() -> None:
        async with (
            make_client("status-controllers") as client,
            InformerSet(client, backoff=FAST_BACKOFF, kinds=KINDS) as informers,
        ):
            groups = PodGroupStatusController(
                client, informers, resync_period=5, debounce=0.01, settle=0, backoff=FAST_BACKOFF
            )
            queues = QueueStatusController(client, informers, resync_period=5, debounce=0.01, write_period=0)
            stop = asyncio.Event()
            tasks = [asyncio.create_task(groups.run(stop)), asyncio.create_task(queues.run(stop))]
            await eventually(
                lambda: status(server, "queues", "q").get("allocatedNonPreemptible", {}).get("cpu") == "4"
            )
            assert groups.stats.failures == 2
            store.delete("pods", "job-1", "default")
            await eventually(lambda: status(server, "queues", "q")["allocated"]["cpu"] == "2")
            assert status(server, "podgroups", "job")["running"] == 1
            store.delete("podgroups", "job", "default")
            await eventually(lambda: status(server, "queues", "q")["requested"] == ZERO)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 5)

    run(body())


def test_quantities_and_preemptibility() -> None:
    assert [format_milli(x) for x in (0, 1, 1.5, 0.1 + 0.2, 2.0004)] == ["0", "1", "1500m", "300m", "2"]
    assert Usage(1.5, 1024, 0.5).resource_list() == {
        "cpu": "1500m",
        "memory": "1024",
        "nvidia.com/gpu": "500m",
    }
    assert Usage.of_resource_list({"cpu": "1500m", "memory": "1Ki", "nvidia.com/gpu": "0.5"}) == Usage(
        1.5, 1024, 0.5
    )
    assert normalized_resource_list({"cpu": "1.5", "memory": "1Ki", "nvidia.com/gpu": "500m"}) == {
        "cpu": "1500m",
        "memory": "1024",
        "nvidia.com/gpu": "500m",
    }
    assert normalized_resource_list(None) is None
    assert is_preemptible("", 50) and not is_preemptible("", 100)
    assert is_preemptible("preemptible", 125) and not is_preemptible("non-preemptible", 50)


def test_a_node_s_gpu_memory_change_reaches_the_status_at_the_resync(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    """A gpu-memory pod's share of a GPU follows its node's memory: the nodes are read again after one
    changed, not kept from the first reconcile."""
    store = server.store
    store.create(node_manifest("n1", gpu_memory=40000))
    store.create(queue_manifest("q"))
    store.create(pod_group_manifest("serve", "q"))
    store.create(pod_manifest("serve-0", "q", group="serve", node_name="n1", gpu_memory=20000))

    def allocated_gpu() -> str | None:
        return (
            status(server, "podgroups", "serve")
            .get("resourcesStatus", {})
            .get("allocated", {})
            .get("nvidia.com/gpu")
        )

    def make(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return PodGroupStatusController(client, informers, resync_period=0.2, debounce=0.01, settle=0)

    async def body() -> None:
        async with running(make_client, make):
            await eventually(lambda: allocated_gpu() == "500m")
            store.patch("nodes", "n1", {"metadata": {"labels": {"nvidia.com/gpu.memory": "80000"}}})
            await eventually(lambda: allocated_gpu() == "250m")

    run(body())


def test_a_failed_queue_write_is_retried_alone(server: FakeApiServer, make_client: MakeClient) -> None:
    """Of the queues one pass writes, one refused: the retry writes it, and only it."""
    store = server.store
    store.create(queue_manifest("a"))
    store.create(queue_manifest("b"))
    for queue in ("a", "b"):
        store.create(pod_group_manifest(f"job-{queue}", queue))
        store.set_status(
            "podgroups", f"job-{queue}", {"resourcesStatus": {"requested": {"cpu": "1"}}}, "default"
        )
    server.fail_next(1, 500, verb="patch", resource="queues", subresource="status")

    def requested_cpu(queue: str) -> str | None:
        return status(server, "queues", queue).get("requested", {}).get("cpu")

    def make(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return QueueStatusController(
            client, informers, resync_period=60, debounce=0.01, write_period=0, backoff=FAST_BACKOFF
        )

    async def body() -> None:
        async with running(make_client, make) as queues:
            await eventually(lambda: requested_cpu("a") == requested_cpu("b") == "1")
            await eventually(lambda: queues.idle)
            assert queues.stats.failures == 1

    run(body())
    patches = server.requests(verb="patch", resource="queues", subresource="status")
    assert len(patches) == 3  # two, one of them refused, and that one again


def test_a_pod_group_s_own_status_write_is_not_computed_again(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    """Issue #23: the PodGroup the informer brings back after this controller's status write holds what
    was computed from its pods as they still are: it is not computed again; a change of its pod is."""
    store = server.store
    store.kubelet = True
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(pod_group_manifest("job", "q"))
    store.create(pod_manifest("job-0", "q", group="job", gpus=1))

    def make(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return PodGroupStatusController(client, informers, resync_period=60, debounce=0.01, settle=0)

    async def settled(groups: StatusReconciler) -> None:
        def caught_up() -> bool:
            cached = groups.informers.pod_groups.cache.get("default/job") or {}
            stored = store.get("podgroups", "job", "default")
            return cached.get("metadata", {}).get("resourceVersion") == stored["metadata"]["resourceVersion"]

        await eventually(caught_up)
        await eventually(lambda: groups.idle)

    async def body() -> None:
        async with running(make_client, make) as groups:
            await eventually(lambda: status(server, "podgroups", "job").get("pending") == 1)
            await settled(groups)
            # (Before the first write the status may be computed again as the informers' lists come in,
            # e.g. the node's after the PodGroup's: what is counted is what follows a write.)
            assert groups.stats.writes == 1
            computed = groups.stats.computed
            store.bind("default", "job-0", "n1")
            await eventually(lambda: status(server, "podgroups", "job").get("running") == 1)
            await settled(groups)
            assert (groups.stats.computed - computed, groups.stats.writes) == (1, 2)

    run(body())


def test_a_new_pod_group_s_first_status_waits_for_its_pod_to_run(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    """Issue #23: a new PodGroup whose pod is placed and runs within the settle window gets one status
    write, of where it ended (running), not pending and then running; one whose pod the scheduler found
    unschedulable gets its pending status when the window is over."""
    store = server.store
    store.kubelet = True  # a bound pod starts running
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    for name in ("quick", "slow"):
        store.create(pod_group_manifest(name, "q"))
        store.create(pod_manifest(f"{name}-0", "q", group=name, gpus=1))

    def make(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return PodGroupStatusController(client, informers, resync_period=60, debounce=0.01, settle=3600)

    async def body() -> None:
        async with running(make_client, make) as groups:
            await eventually(lambda: groups.reconcile_stats.requeued_after >= 2)  # both seen, both waiting
            assert status_writes(server) == 0
            store.bind("default", "quick-0", "n1")
            await eventually(lambda: status(server, "podgroups", "quick").get("running") == 1)
            assert status(server, "podgroups", "quick")["pending"] == 0
            assert status(server, "podgroups", "slow") == {}

    run(body())
    assert status_writes(server) == 1
    store.set_status("pods", "slow-0", {"conditions": [UNSCHEDULABLE]}, "default")

    def make_short(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return PodGroupStatusController(client, informers, resync_period=60, debounce=0.01, settle=0.2)

    async def short_window() -> None:
        async with running(make_client, make_short):
            await eventually(lambda: status(server, "podgroups", "slow").get("pending") == 1)

    run(short_window())
    assert status_writes(server) == 2


# The scheduler's answer for a pod it cannot place (scheduler/pod_conditions.py).
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no room"}


def placed_by(pod: dict[str, Any], node: str, phase: str | None = None) -> dict[str, Any]:
    """The BindRequest the scheduler writes for `pod` (whole GPUs), owned by that incarnation."""
    name = pod["metadata"]["name"]
    owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod["metadata"]["uid"]}
    request: dict[str, Any] = {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [owner]},
        "spec": {"podName": name, "selectedNode": node, "receivedResourceType": "Regular"},
    }
    if phase is not None:
        request["status"] = {"phase": phase}
    return request


def test_a_new_pod_group_waits_past_the_window_while_its_pod_is_on_its_way(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    """Issue #23: under load the scheduler's and the binder's queues hold pods past the settle window. A new
    PodGroup whose pending pod the scheduler has not answered yet, or has placed (a standing BindRequest,
    even after finding it unschedulable once), gets no pending status when the window is over, and one
    write once the pod runs; one whose pod the scheduler found unschedulable (no BindRequest, or a Failed
    one) waits for room, and its pending status is written when the window is over; so is the status of
    one that holds resources already (a pod bound, another not answered yet: the queue sums what it holds)."""
    store = server.store
    store.kubelet = True  # a bound pod starts running
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    pods = {}
    for name in ("untried", "placed", "waiting", "failed"):
        store.create(pod_group_manifest(name, "q"))
        pods[name] = store.create(pod_manifest(f"{name}-0", "q", group=name, gpus=1))
    for name in ("placed", "waiting", "failed"):
        store.set_status("pods", f"{name}-0", {"conditions": [UNSCHEDULABLE]}, "default")
    store.create(placed_by(pods["placed"], "n1"))
    store.create(placed_by(pods["failed"], "n1", phase="Failed"))
    store.create(pod_group_manifest("partial", "q", min_member=1))
    for i in range(2):
        store.create(pod_manifest(f"partial-{i}", "q", group="partial", gpus=1))
    store.bind("default", "partial-0", "n1")

    def make(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return PodGroupStatusController(client, informers, resync_period=60, debounce=0.01, settle=0.2)

    async def body() -> None:
        async with (
            make_client(ALL_IN_ONE) as client,  # watches BindRequests as `run --all` does
            InformerSet(client, backoff=FAST_BACKOFF, kinds=(*KINDS, BIND_REQUESTS)) as informers,
        ):
            groups = make(client, informers)
            stop = asyncio.Event()
            task = asyncio.create_task(groups.run(stop))
            for name in ("waiting", "failed", "partial"):
                await eventually(lambda name=name: status(server, "podgroups", name).get("pending") == 1)
            # Well past the window (and its checks every 0.2 s), the other two still wait.
            await eventually(lambda: groups.reconcile_stats.requeued_after >= 20)
            assert status(server, "podgroups", "untried") == status(server, "podgroups", "placed") == {}
            for name in ("untried", "placed"):
                store.bind("default", f"{name}-0", "n1")
                await eventually(lambda name=name: status(server, "podgroups", name).get("running") == 1)
            await eventually(lambda: groups.idle)
            stop.set()
            await asyncio.wait_for(task, 5)

    run(body())
    written = server.requests(verb="patch", resource="podgroups", subresource="status")
    assert sorted(record.name for record in written) == ["failed", "partial", "placed", "untried", "waiting"]


def test_a_queue_s_status_is_written_at_most_once_a_period(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    """Issue #23: PodGroups changing all the time (pods streaming in) give a queue pass once a `period`,
    however long the pass before took, and at most one write per queue once a `write_period` (here the
    same), the first at once and the last with the final sums."""
    store = server.store
    store.create(queue_manifest("q"))
    period = 0.25

    def make(client: KubeClient, informers: InformerSet) -> StatusReconciler:
        return QueueStatusController(
            client, informers, resync_period=60, debounce=0.01, period=period, write_period=period
        )

    async def body() -> float:
        async with running(make_client, make) as queues:
            await eventually(lambda: queues.stats.passes >= 1)
            server.clear_requests()
            loop = asyncio.get_running_loop()
            began = loop.time()
            for i in range(40):  # a new PodGroup asking for one more CPU every 25 ms
                store.create(pod_group_manifest(f"job-{i}", "q"))
                store.set_status(
                    "podgroups", f"job-{i}", {"resourcesStatus": {"requested": {"cpu": "1"}}}, "default"
                )
                await asyncio.sleep(0.025)
            await eventually(lambda: status(server, "queues", "q").get("requested", {}).get("cpu") == "40")
            return loop.time() - began

    elapsed = run(body())
    writes = len(server.requests(verb="patch", resource="queues", subresource="status"))
    assert 1 <= writes <= elapsed / period + 1
