"""MaxNodePoolResources with an extended resource only some nodes have (KAI v0.17, #1852): the largest of
each resource is taken over every node, so a resource on one node of five is not "on no node".

Ported by name from KAI v0.17.0 `pkg/scheduler/k8s_internal/predicates/maxNodeResources_test.go`
(`Test_maxNodeResourcesExtendedResourceOnSubsetOfNodes`, `Test_maxNodeResourcesExtendedResourceOnNoNode`).
KAI's `ResourceVector.SetMax` cases (`resource_vector_test.go`) test the Go vector growing to the longer
of two; here the node table has one column per resource any node has, so there is nothing to grow.
"""

from __future__ import annotations

from typing import Any

from helpers import cluster_state, node_manifest, objects_of, pod_manifest, queue_manifest
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import parse_config
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.plugins.max_node_resources import MaxNodeResources

FOO = "example.com/foo"


def core_node(name: str, **extra: str) -> dict[str, Any]:
    manifest = node_manifest(name, gpus=0)
    manifest["status"]["allocatable"] = {"cpu": "4", "memory": "16Gi", "pods": "110", **extra}
    return manifest


FIVE_NODES = [*(core_node(f"n{i}") for i in range(1, 5)), core_node("n5", **{FOO: "5"})]


def unschedulable(nodes: list[dict[str, Any]], requests: dict[str, str]) -> str | None:
    pod = pod_manifest("name1", "q", namespace="n1", cpu=None, memory=None)
    pod["spec"]["containers"][0]["resources"] = {"requests": requests}
    snapshot = ClusterCache.of(cluster_state(objects_of(*nodes, queue_manifest("q"), pod))).snapshot()
    reason = Scheduler(parse_config({})).run(snapshot, cycle=1, now=0.0).unschedulable.get("n1/pg-name1")
    return None if reason is None else str(reason)


def test_pod_requesting_the_resource_within_capacity_fits() -> None:
    """ "pod requesting the resource within capacity fits"."""
    assert unschedulable(FIVE_NODES, {FOO: "1"}) is None


def test_pod_requesting_more_than_any_node_has_is_rejected() -> None:
    """ "pod requesting more than any node has is rejected": the message names the resource."""
    reason = unschedulable(FIVE_NODES, {FOO: "10"})
    assert reason is not None and FOO in reason


def test_max_resources_track_the_highest_capacity_across_all_nodes() -> None:
    """ "max resources track the highest capacity across all nodes", whichever node is read first."""
    for nodes in (FIVE_NODES, list(reversed(FIVE_NODES))):
        snapshot = ClusterCache.of(cluster_state(objects_of(*nodes))).snapshot()
        assert MaxNodeResources(snapshot.nodes, "default").scalars[FOO] == 5


def test_extended_resource_on_no_node() -> None:
    """`Test_maxNodeResourcesExtendedResourceOnNoNode`."""
    reason = unschedulable([core_node("n1"), core_node("n2")], {"example.com/bar": "1"})
    assert reason is not None
    assert "No node in the default node-pool has example.com/bar resources" in reason
