"""`run_components` with `--leader-elect`: two replicas of the binder, pod grouper and status controllers
share the work through one Lease each, and a standby takes over when the leader goes."""

from __future__ import annotations

import asyncio
from collections import Counter

from identities import client_as, run_as
from live_support import FakeGpuNodes, eventually, run

from chart_support import NAMESPACE
from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.components import LEASES, RunOptions, run_components

CONTROLLERS = frozenset({"binder", "podgrouper", "status-controllers"})


def options(components: frozenset[str], identity: str) -> RunOptions:
    return RunOptions(
        components=components,
        config=SchedulerConfig(),
        leader_elect=True,
        identity=identity,
        lease_namespace=NAMESPACE,  # the chart's: its Role grants the Leases there
        metrics_port=0,  # no servers: no fixed ports in tests
        plugin_server_port=0,
    )


def holders(store: Store) -> dict[str, str]:
    leases = {lease["metadata"]["name"]: lease for lease in store.list("leases", NAMESPACE)}
    return {
        component: str(leases[name]["spec"].get("holderIdentity") or "") if name in leases else ""
        for component, name in LEASES.items()
        if component in CONTROLLERS
    }


def bound(store: Store) -> set[str]:
    return {p["metadata"]["name"] for p in store.list("pods", "default") if p["spec"].get("nodeName")}


def test_replicas_share_work_through_leases(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=4, gpu_memory=40000))
    store.create(queue_manifest("q", gpu=4))

    async def replica(components: frozenset[str], identity: str, stop: asyncio.Event) -> None:
        async with client_as(server, run_as(components)) as client:
            await run_components(options(components, identity), stop, client)

    async def body() -> None:
        stops = {name: asyncio.Event() for name in ("scheduler", "one", "two")}
        async with FakeGpuNodes(server):
            tasks = [
                asyncio.create_task(replica(frozenset({"scheduler"}), "scheduler", stops["scheduler"])),
                asyncio.create_task(replica(CONTROLLERS, "one", stops["one"])),
                asyncio.create_task(replica(CONTROLLERS, "two", stops["two"])),
            ]
            # Each controller's Lease has one holder.
            await eventually(lambda: all(holders(store).values()), timeout=8)
            leaders = holders(store)
            for i in range(2):
                store.create(pod_manifest(f"whole-{i}", "q", gpus=1))
            store.create(pod_manifest("half", "q", fraction=0.5))
            await eventually(lambda: bound(store) == {"whole-0", "whole-1", "half"}, timeout=10)

            # The replica that leads the binder goes; the other takes every Lease over.
            going = leaders["binder"]
            staying = "two" if going == "one" else "one"
            stops[going].set()
            await eventually(lambda: set(holders(store).values()) == {staying}, timeout=10)
            store.create(pod_manifest("late", "q", gpus=1))
            await eventually(lambda: "late" in bound(store), timeout=10)

            for stop in stops.values():
                stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)

    run(body(), timeout=40)
    assert Counter(b.name for b in store.binds) == {"whole-0": 1, "whole-1": 1, "half": 1, "late": 1}
    # One PodGroup per pod, made once (two pod groupers would race to make them).
    creates = server.requests(verb="create", resource="podgroups")
    assert len(store.list("podgroups", "default")) == 4 and len(creates) == 4
