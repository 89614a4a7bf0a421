"""Scheduler loop + binder against the fake API server, with faults: every pod ends bound exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from identities import ALL_IN_ONE, client_as
from live_support import FakeGpuNodes, Live, eventually, evicted, in_thread, run

from chart_support import NAMESPACE
from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.components import run_live
from kai_scheduler.k8s.runtime.kai_objects import bind_request_succeeded
from kai_scheduler.k8s.runtime.objects import object_key
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics


def seed(store: Store) -> list[str]:
    """Two 4-GPU nodes, two queues, whole-GPU pods, a gang, shared-GPU pods; returns the pod names."""
    store.create(node_manifest("n1", gpus=4, gpu_memory=40000))
    store.create(node_manifest("n2", gpus=4, gpu_memory=40000))
    store.create(queue_manifest("team-a", gpu=4))
    store.create(queue_manifest("team-b", gpu=4))
    names = []
    for i in range(3):
        store.create(pod_manifest(f"whole-{i}", "team-a", gpus=1))
        names.append(f"whole-{i}")
    store.create(pod_group_manifest("gang", "team-b", min_member=3))
    for i in range(3):
        store.create(pod_manifest(f"gang-{i}", "team-b", group="gang", gpus=1))
        names.append(f"gang-{i}")
    for i in range(2):
        store.create(pod_manifest(f"half-{i}", "team-a", fraction=0.5))
        names.append(f"half-{i}")
    return names


def bound(store: Store) -> dict[str, str]:
    """The workload's pods that have a node (the GPU reservation pods, created on their node, aside)."""
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in store.list("pods", "default")
        if p["spec"].get("nodeName")
    }


def phases(store: Store) -> dict[str, str]:
    """Each BindRequest's phase as every reader takes it: Succeeded once its pod is bound to its selected
    node (the binder writes no Succeeded of its own), else the phase written."""
    out = {}
    for request in store.list("bindrequests"):
        pod = store.try_get("pods", request["spec"]["podName"], request["metadata"].get("namespace"))
        done = bind_request_succeeded(request, pod)
        out[request["metadata"]["name"]] = (
            "Succeeded" if done else (request.get("status") or {}).get("phase", "")
        )
    return out


def assert_bound_once(store: Store, names: list[str]) -> None:
    assert sorted(bound(store)) == sorted(names)
    counts = Counter(b.name for b in store.binds)
    assert set(counts) == set(names) and set(counts.values()) == {1}, counts


def test_everything_ends_bound_exactly_once(server: FakeApiServer) -> None:
    store = server.store
    names = seed(store)
    # A refused bind (409, nothing written), a bind whose answer is lost (written, then 500), and a lost
    # status update after a failed attempt: each must still end in exactly one binding per pod.
    server.fail_next(1, 409, verb="create", resource="pods/binding", name="whole-0")
    server.fail_next(1, 500, verb="create", resource="pods/binding", name="gang-1", after_commit=True)
    server.fail_next(1, 409, verb="create", resource="pods/binding", name="half-0")
    server.fail_next(1, 500, verb="patch", resource="bindrequests/status", name="half-0")

    async def body() -> Any:
        async with Live(server) as live:
            await live.until(
                lambda: len(bound(store)) == len(names) and set(phases(store).values()) == {"Succeeded"}
            )
            await live.settle()  # a few more cycles, then nothing more happens
            return live.binder.stats

    stats = run(body())
    assert_bound_once(store, names)
    assert server.pending_faults() == []
    assert stats.already_bound >= 1  # gang-1 (answer lost) was found done
    bindings = Counter(r.name for r in server.requests(verb="create", resource="pods", subresource="binding"))
    # whole-0: refused, then bound; gang-1: bound, and the retry finds it bound (no second POST); half-0:
    # refused (its failed attempt's status lost), then bound.
    assert (bindings["whole-0"], bindings["gang-1"], bindings["half-0"]) == (2, 1, 2)
    # A success is not written (the bound pod says it), unless the status shows a failed attempt before.
    statuses = {r["metadata"]["name"]: r.get("status") or {} for r in store.list("bindrequests")}
    for name in names:
        expected = {"whole-0": "Succeeded", "gang-1": "Succeeded"}.get(name)
        assert statuses[name].get("phase") == expected, (name, statuses[name])
    assert len([r for r in server.requests(verb="create", resource="bindrequests")]) == len(names)
    nodes = bound(store)
    assert nodes["gang-0"] == nodes["gang-1"] == nodes["gang-2"] or len(set(nodes.values())) == 2
    # One Scheduled event per pod: gang-1's from the retry that found it bound (its bind's answer was
    # lost).
    scheduled = Counter(
        e["involvedObject"]["name"]
        for e in store.list("events", "default")
        if e["reason"] == "Scheduled" and e["involvedObject"]["kind"] == "Pod"
    )
    assert scheduled == Counter(names), scheduled

    gang = store.get("podgroups", "gang")
    assert "kai.scheduler/last-start-timestamp" not in gang["metadata"]["annotations"]  # its pods say it
    assert not (gang.get("status") or {}).get("schedulingConditions")
    for name in ("half-0", "half-1"):
        pod = store.get("pods", name)
        request = store.get("bindrequests", name)
        group = pod["metadata"]["labels"]["runai-gpu-group"]
        assert [group] == request["spec"]["selectedGPUGroups"]
        assert pod["metadata"]["annotations"]["received-resource-type"] == "Fraction"
        config = store.get("configmaps", f"{name}-gpu")
        # The GPU's UUID, as the group's reservation pod published it.
        [reservation] = store.list("pods", "kai-resource-reservation", labels=f"runai-gpu-group={group}")
        device = reservation["metadata"]["annotations"]["run.ai/reserve_for_gpu_index"]
        assert device == f"GPU-{pod['spec']['nodeName']}-0"
        assert config["data"] == {
            "NVIDIA_VISIBLE_DEVICES": device,
            "GPU_PORTION": "0.50",
            "RUNAI_NUM_OF_GPUS": "0.50",
        }
        assert config["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    # Both halves share one GPU (gpupack).
    assert (
        store.get("pods", "half-0")["metadata"]["labels"] == store.get("pods", "half-1")["metadata"]["labels"]
    )
    assert store.get("pods", "whole-0")["metadata"]["annotations"]["received-resource-type"] == "Regular"


def test_backoff_limit_then_a_new_bind_request(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("p", gpus=1))
    server.fail_next(3, 500, verb="create", resource="pods/binding", name="p")

    async def body() -> Any:
        async with Live(server, backoff_limit=3) as live:
            await live.until(lambda: "p" in bound(store) and phases(store).get("p") == "Succeeded")
            return live.binder.stats

    stats = run(body())
    assert_bound_once(store, ["p"])
    assert stats.failures == 3 and stats.failed == 1  # three attempts, then the request Failed
    assert len([r for r in server.requests(verb="create", resource="bindrequests")]) == 2  # then a new one
    assert not store.get("bindrequests", "p").get("status")  # the new one bound at once: nothing to write


@pytest.mark.parametrize("downtime", [1.5, 10.0], ids=["brief", "ten-seconds"])
def test_api_server_down_mid_run(server: FakeApiServer, downtime: float) -> None:
    """The API server goes away mid-run (ten seconds is the issue's outage); afterwards every pod,
    including one created while the scheduler could not see it, is bound exactly once."""
    store = server.store
    names = seed(store)

    async def body() -> None:
        async with Live(server) as live:
            await live.until(lambda: len(bound(store)) >= 1)
            await in_thread(server.stop)
            store.create(pod_manifest("late", "team-a", gpus=1))
            await asyncio.sleep(downtime)
            await in_thread(server.start)
            await live.until(
                lambda: len(bound(store)) == len(names) + 1 and set(phases(store).values()) == {"Succeeded"},
                timeout=20,
            )

    run(body(), timeout=downtime + 35)
    assert_bound_once(store, [*names, "late"])


def test_scheduler_restarted_mid_cycle(server: FakeApiServer) -> None:
    store = server.store
    names = seed(store)

    async def first_life() -> None:
        # Requests are written, then the scheduler dies before the binder ran.
        async with Live(server, binder=False, loop=False) as live:
            report = await live.loop.run_once()
            assert len(report.bind_requests) == len(names)

    async def second_life() -> None:
        async with Live(server) as live:
            await live.until(
                lambda: len(bound(store)) == len(names) and set(phases(store).values()) == {"Succeeded"}
            )
            await live.settle()

    run(first_life())
    run(second_life())
    assert_bound_once(store, names)
    assert len([r for r in server.requests(verb="create", resource="bindrequests")]) == len(names)
    assert sorted(object_key(b) for b in store.list("bindrequests")) == sorted(f"default/{n}" for n in names)


def test_reclaim_end_to_end(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("node0", gpus=4, cpu="32", memory="256Gi"))
    store.create(queue_manifest("team-a", gpu=2))
    store.create(queue_manifest("team-b", gpu=2))
    for i in range(4):
        store.create(pod_manifest(f"a-{i}", "team-a", gpus=1, cpu=None, memory=None, node_name="node0"))
    for i in range(2):
        store.create(pod_manifest(f"b-{i}", "team-b", gpus=1, cpu=None, memory=None))

    async def body() -> None:
        async with Live(server) as live:
            await live.until(lambda: {"b-0", "b-1"} <= set(bound(store)))
            await live.settle()

    run(body())
    assert sorted(evicted(server)) == ["a-2", "a-3"]
    assert bound(store) == {"a-0": "node0", "a-1": "node0", "b-0": "node0", "b-1": "node0"}
    assert Counter(b.name for b in store.binds) == {"b-0": 1, "b-1": 1}


def test_run_live_with_leader_election_and_metrics(server: FakeApiServer) -> None:
    store = server.store
    names = seed(store)
    metrics = SchedulerMetrics()

    async def body() -> None:
        stop, ready = asyncio.Event(), asyncio.Event()
        async with client_as(server, ALL_IN_ONE) as client, FakeGpuNodes(server):
            task = asyncio.create_task(
                run_live(
                    client,
                    SchedulerConfig(),
                    stop,
                    period=0.05,
                    leader_election=True,
                    lease_namespace=NAMESPACE,  # the chart's, where its Role grants Leases
                    identity="me",
                    metrics=metrics,
                    ready=ready,
                )
            )
            await asyncio.wait_for(ready.wait(), 5)
            await eventually(
                lambda: len(bound(store)) == len(names) and set(phases(store).values()) == {"Succeeded"},
                timeout=8,
            )
            assert holder_of_lease(store) == "me"
            stop.set()
            await asyncio.wait_for(task, 5)

    run(body())
    assert_bound_once(store, names)
    assert holder_of_lease(store) == ""  # released on the way out
    assert metrics.podgroups_scheduled.value(action="allocate") >= 3
    assert metrics.task_scheduling_latency.collect()[0].samples


def holder_of_lease(store: Store) -> str:
    return str(store.get("leases", "kai-scheduler", NAMESPACE)["spec"].get("holderIdentity") or "")
