"""The numa plugin in live mode, on the fake API server: the scheduler watches NodeResourceTopologies (NFD's
CRD, installed here as NFD's chart would), writes each bound pod's predicted zones into its BindRequest
(`spec.predictedNUMAZones`), the binder copies them onto the pod (`kai.scheduler/numa-placement-predicted`,
as KAI v0.17's binder), and the next cycles read them back: a pod that fits the node but no zone waits,
and says why."""

from __future__ import annotations

import json
from typing import Any

from live_support import Live, run

from helpers import node_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.api import constants as c
from numa_support import cpu_zone_nrt_manifest, guaranteed_pod_manifest, numa_config

NRT_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "noderesourcetopologies.topology.node.k8s.io"},
    "spec": {
        "group": "topology.node.k8s.io",
        "scope": "Cluster",
        "names": {
            "kind": "NodeResourceTopology",
            "plural": "noderesourcetopologies",
            "singular": "noderesourcetopology",
            "listKind": "NodeResourceTopologyList",
            "shortNames": ["node-res-topo"],
        },
        "versions": [
            {
                "name": "v1alpha2",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def pod_of(server: FakeApiServer, name: str) -> dict[str, Any]:
    return server.store.try_get("pods", name) or {}


def waits_for_numa(server: FakeApiServer, name: str) -> bool:
    conditions = (pod_of(server, name).get("status") or {}).get("conditions") or []
    return any("cannot NUMA-align" in str(condition.get("message")) for condition in conditions)


def test_zones_predicted_at_bind_are_written_on_the_pod_and_count_in_later_cycles(
    server: FakeApiServer,
) -> None:
    store = server.store
    store.create(NRT_CRD)
    store.create(node_manifest("n0", gpus=0, cpu=8, memory="64Gi"))
    store.create(cpu_zone_nrt_manifest("n0", "single-numa-node", ["4", "4"]))
    store.create(queue_manifest("q"))
    for name, cpus in (("first", "3"), ("second", "3")):
        store.create(guaranteed_pod_manifest(name, cpus))

    def bound(*names: str) -> bool:
        return all((pod_of(server, n).get("spec") or {}).get("nodeName") for n in names)

    async def body() -> None:
        async with Live(server, config=numa_config(), gpus=False) as live:
            await live.until(lambda: bound("first", "second"), timeout=20)
            store.create(guaranteed_pod_manifest("third", "2"))  # 2 of 8 CPUs free, but 1 in each zone
            await live.until(lambda: waits_for_numa(server, "third"), timeout=20)

    run(body(), timeout=40)
    zones = {}
    for name in ("first", "second"):
        request = store.get("bindrequests", name)
        predicted = request["spec"]["predictedNUMAZones"]
        annotation = pod_of(server, name)["metadata"]["annotations"][c.NUMA_PLACEMENT_PREDICTED_ANNOTATION]
        assert json.loads(annotation) == predicted
        zones[name] = predicted
    assert zones == {
        "first": [{"zone": "node-0", "amount": {"cpu": "3"}}],
        "second": [{"zone": "node-1", "amount": {"cpu": "3"}}],
    }
    assert not bound("third")
