"""Topology-aware placement in live mode: the scheduler reads Topology objects from the API server and
keeps a constrained gang within one rack."""

from __future__ import annotations

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store

RACKS = {"n1": "r1", "n2": "r2", "n3": "r2"}


def seed(store: Store, *, constrained: bool) -> None:
    store.create(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]},
        }
    )
    for name, rack in RACKS.items():
        store.create(node_manifest(name, gpus=4, labels={"zone": "z", "rack": rack}))
    store.create(queue_manifest("q", gpu=12))
    # Rack r1 is one node with 4 GPUs, rack r2 two: binpack alone would start on n1 and spill over.
    group = pod_group_manifest("train", "q", min_member=3)
    if constrained:
        group["spec"]["topologyConstraint"] = {"topology": "dc", "requiredTopologyLevel": "rack"}
    store.create(group)
    for i in range(3):
        store.create(pod_manifest(f"train-{i}", "q", group="train", gpus=2))


def racks_used(store: Store) -> set[str]:
    return {RACKS[p["spec"]["nodeName"]] for p in store.list("pods", "default") if p["spec"].get("nodeName")}


def place(server: FakeApiServer) -> set[str]:
    store = server.store

    async def body() -> None:
        async with Live(server) as live:
            await live.until(
                lambda: sum(1 for p in store.list("pods", "default") if p["spec"].get("nodeName")) == 3
            )

    run(body())
    return racks_used(store)


def test_constrained_gang_stays_in_one_rack(server: FakeApiServer) -> None:
    seed(server.store, constrained=True)
    assert place(server) == {"r2"}


def test_without_the_constraint_the_gang_spans_racks(server: FakeApiServer) -> None:
    seed(server.store, constrained=False)
    assert place(server) == {"r1", "r2"}
