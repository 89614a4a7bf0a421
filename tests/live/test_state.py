"""The live ClusterState from informer caches: runtime facts, BindRequests, ranks, classes, job times (the
scheduler's informers, as its ServiceAccount)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from identities import ADMIN, client_as, refusals, strict_server
from live_support import run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.client import BIND_REQUESTS, PODS, ApiStatusError
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler.live_state import LiveState, Placed, SessionClock
from kai_scheduler.k8s.scheduler.state import StateBuilder
from kai_scheduler.model.cache import build_snapshot

MakeClient = Callable[..., LightkubeClient]
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class Ticking:
    """A wall clock for the store that moves one second per object created."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        self.now += 1
        return self.now


def bind_request(
    pod: dict[str, Any],
    node: str,
    *,
    groups: list[str] | None = None,
    uid: str | None = None,
    phase: str | None = None,
) -> dict[str, Any]:
    meta = pod["metadata"]
    request: dict[str, Any] = {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": uid or meta["uid"]}
            ],
        },
        "spec": {"podName": meta["name"], "selectedNode": node, "selectedGPUGroups": groups or []},
    }
    if phase:
        request["status"] = {"phase": phase}
    return request


async def built(client: LightkubeClient, **kwargs: Any) -> tuple[LiveState, SessionClock]:
    clock = SessionClock(start=START)
    async with InformerSet(client, backoff=FAST_BACKOFF) as informers:
        assert await informers.wait_synced(5)
        return StateBuilder(informers, clock).build(**kwargs), clock


def test_runtime_facts_and_bind_requests() -> None:
    store = Store(clock=Ticking())
    store.create(node_manifest("n1", gpu_memory=40000))
    store.create(node_manifest("n2"))
    store.create(queue_manifest("q"))
    running = store.create(
        pod_manifest("running", fraction=0.5, node_name="n1", labels={"runai-gpu-group": "g1"})
    )
    binding = store.create(pod_manifest("binding", gpus=1))
    failed = store.create(pod_manifest("failed", gpus=1))
    stale = store.create(pod_manifest("stale", gpus=1))
    store.create(pod_manifest("pending", gpus=1))
    store.create(pod_manifest("bad", fraction=1.5))  # fails KAI's admission rules: skipped, not fatal
    store.create(pod_manifest("foreign", scheduler="default-scheduler", node_name="n2", cpu="4"))
    store.create(pod_manifest("done", node_name="n2", phase="Succeeded"))
    store.create(bind_request(binding, "n2", groups=["x"]))
    store.create(bind_request(failed, "n2", phase="Failed"))
    store.create(bind_request(stale, "n2", uid="an-older-incarnation"))

    with strict_server(store=store, bookmark_interval=0.1) as server:

        async def body() -> LiveState:
            async with client_as(server, "scheduler") as client:
                live, _ = await built(client, evicting={"default/running": running["metadata"]["uid"]})
                return live

        live = run(body())
        assert refusals(server) == []
    pods = {p.pod.key: p for p in live.state.pods}
    assert "default/bad" not in pods and "Pod default/bad" in live.skipped
    assert (pods["default/running"].node_name, pods["default/running"].gpu_groups) == ("n1", ("g1",))
    assert pods["default/running"].terminating  # evicted by us, not yet seen terminating
    assert (pods["default/binding"].node_name, pods["default/binding"].gpu_groups) == ("n2", ("x",))
    assert pods["default/failed"].node_name is None and pods["default/stale"].node_name is None
    assert pods["default/pending"].phase == "Pending" and pods["default/pending"].node_name is None
    assert pods["default/foreign"].pod.spec.scheduler_name != "kai-scheduler"
    assert (pods["default/done"].phase, pods["default/done"].node_name) == ("Succeeded", None)
    assert [p.pod.metadata.name for p in live.state.pods] == [
        "running",
        "binding",
        "failed",
        "stale",
        "pending",
        "foreign",
        "done",
    ]
    assert [p.rank for p in live.state.pods] == sorted(p.rank for p in live.state.pods)
    assert live.active_jobs == {"default/pg-running", "default/pg-binding"}
    assert live.job_of_pod["default/pending"] == "default/pg-pending"

    snapshot = build_snapshot(live.state)
    result = Scheduler(SchedulerConfig()).run(snapshot, cycle=1, now=0.0)
    placed = {d.pod: d.node for d in result.decisions if d.type == "bind"}
    # n2 has 8 GPUs, one held by the binding pod: failed, stale and pending get one each.
    assert set(placed) == {"default/failed", "default/stale", "default/pending"}


def test_classes_groups_times_and_nominations(make_client: MakeClient, server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "train"},
            "value": 40,
            "globalDefault": True,
        }
    )
    group = pod_group_manifest("gang", min_member=2)
    group["metadata"]["annotations"] = {
        "kai.scheduler/last-start-timestamp": "2026-01-01T00:01:40Z",
        "kai.scheduler/stale-podgroup-timestamp": "2025-12-31T23:59:00Z",
    }
    store.create(group)
    store.create(pod_manifest("gang-0", group="gang"))
    store.create(pod_manifest("gang-1", group="gang"))

    async def body() -> LiveState:
        async with make_client("scheduler") as client:
            live, clock = await built(client, nominated={"default/gang-0": Placed("n1", ("g",))})
            assert clock.stamp(100.0) == "2026-01-01T00:01:40Z"
            return live

    live = run(body())
    state = live.state
    assert state.priority_classes["train"] == 40 and state.priority_classes["inference"] == 125
    assert state.default_priority == 40
    assert [g.pod_group.key for g in state.pod_groups] == ["default/gang"]
    times = state.job_times["default/gang"]
    assert (times.last_start, times.stale_since) == (100.0, -60.0)
    gang0 = next(p for p in state.pods if p.pod.metadata.name == "gang-0")
    assert (gang0.nominated_node, gang0.nominated_gpu_groups) == ("n1", ("g",))
    assert live.pod_groups["default/gang"]["kind"] == "PodGroup"


def test_gpu_group_labels() -> None:
    assert pod_gpu_groups({"runai-gpu-group": "a"}) == ("a",)
    assert pod_gpu_groups({"runai-gpu-group": "a", "runai-gpu-group/1": "c", "runai-gpu-group/0": "b"}) == (
        "b",
        "c",
    )
    assert pod_gpu_groups({}) == ()


def test_unknown_kind_does_not_block_sync(make_client: MakeClient, server: FakeApiServer) -> None:
    server.store.delete("customresourcedefinitions", "topologies.kai.scheduler")

    async def body() -> None:
        async with make_client(ADMIN) as client, InformerSet(client, backoff=FAST_BACKOFF) as informers:
            assert await informers.wait_synced(5)
            assert not informers.topologies.served and informers.topologies.cache == {}
            try:
                await client.list_objects(BIND_REQUESTS)
                await client.get(PODS, "nope", "default")
            except ApiStatusError as error:
                assert error.code == 404

    run(body())


class _NoClient:
    """Informers that are fed by hand never call their client."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected client call: {name}")


def test_another_scheduler_name() -> None:
    from kai_scheduler.k8s.runtime.client import WatchEvent

    informers = InformerSet(_NoClient())  # type: ignore[arg-type]
    mine = pod_manifest("mine", scheduler="kai-shard-b")
    other_shard = pod_manifest("other-shard", scheduler="kai-scheduler", node_name="n1")
    for i, obj in enumerate([mine, other_shard]):
        obj["metadata"].update({"namespace": "default", "uid": f"u{i}", "resourceVersion": str(i + 1)})
        informers.pods.apply_event(WatchEvent("ADDED", obj))
    node = node_manifest("n1")
    node["metadata"]["resourceVersion"] = "9"
    informers.nodes.apply_event(WatchEvent("ADDED", node))
    builder = StateBuilder(informers, SessionClock(start=START), scheduler_name="kai-shard-b")
    live = builder.build()
    by_name = {p.pod.metadata.name: p.pod.spec.scheduler_name for p in live.state.pods}
    assert by_name == {"mine": "kai-scheduler", "other-shard": "other-scheduler"}
    assert list(live.job_of_pod) == ["default/mine"]
    # Models are reused while the version stays; a deletion takes the pod out of the state.
    first = {p.pod.metadata.name: p.pod for p in live.state.pods}
    again = {p.pod.metadata.name: p.pod for p in builder.build().state.pods}
    assert again["mine"] is first["mine"]
    informers.pods.apply_event(WatchEvent("DELETED", mine))
    assert {p.pod.metadata.name for p in builder.build().state.pods} == {"other-shard"}


def test_pending_pods_wait_for_their_pod_group_when_a_grouper_runs() -> None:
    from kai_scheduler.k8s.runtime.client import WatchEvent

    informers = InformerSet(_NoClient())  # type: ignore[arg-type]
    ungrouped = pod_manifest("ungrouped")
    grouped = pod_manifest("grouped")
    grouped["metadata"]["annotations"] = {"pod-group-name": "g"}
    running = pod_manifest("running", node_name="n1")
    for i, obj in enumerate([ungrouped, grouped, running]):
        obj["metadata"].update({"namespace": "default", "uid": f"u{i}", "resourceVersion": str(i + 1)})
        informers.pods.apply_event(WatchEvent("ADDED", obj))
    node = node_manifest("n1")
    node["metadata"]["resourceVersion"] = "9"
    informers.nodes.apply_event(WatchEvent("ADDED", node))

    def names(require: bool) -> set[str]:
        builder = StateBuilder(informers, SessionClock(start=START), require_pod_groups=require)
        return {p.pod.metadata.name for p in builder.build().state.pods}

    assert names(False) == {"ungrouped", "grouped", "running"}
    # An ungrouped pending pod is left for the pod grouper; a running one still holds its node.
    assert names(True) == {"grouped", "running"}
