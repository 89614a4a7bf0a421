"""Topology level aliases in live mode (KAI v0.17, #1788): the scheduler reads a Topology's aliases from the
API server, and a gang whose PodGroup names the rack level by its alias stays within one rack."""

from __future__ import annotations

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer

RACKS = {"n1": "r1", "n2": "r2", "n3": "r2"}


def test_a_gang_naming_the_rack_by_its_alias_stays_in_one_rack(server: FakeApiServer) -> None:
    store = server.store
    levels = [{"nodeLabel": "zone"}, {"nodeLabel": "example.com/rack", "alias": "rack"}]
    store.create(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "dc"},
            "spec": {"levels": levels},
        }
    )
    for name, rack in RACKS.items():
        store.create(node_manifest(name, gpus=4, labels={"zone": "z", "example.com/rack": rack}))
    store.create(queue_manifest("q", gpu=12))
    # Rack r1 is one node with 4 GPUs, rack r2 two: binpack alone would start on n1 and spill over.
    group = pod_group_manifest("train", "q", min_member=3)
    group["spec"]["topologyConstraint"] = {"topology": "dc", "requiredTopologyLevel": "rack"}
    store.create(group)
    for i in range(3):
        store.create(pod_manifest(f"train-{i}", "q", group="train", gpus=2))

    def bound() -> list[str]:
        return [p["spec"]["nodeName"] for p in store.list("pods", "default") if p["spec"].get("nodeName")]

    async def body() -> None:
        async with Live(server) as live:
            await live.until(lambda: len(bound()) == 3)

    run(body())
    assert {RACKS[node] for node in bound()} == {"r2"}
