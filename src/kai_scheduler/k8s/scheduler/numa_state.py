"""The live edge's feed for the numa plugin: NodeResourceTopologies from their informer into the
`ClusterCache` (`ClusterCache.set_node_topologies`), and a binding pod's predicted NUMA zones.

KAI reads a pod's placement, in this order, from its `kai.scheduler/numa-placement-observed` annotation (KAI's
placement exporter), from its outstanding BindRequest's `predictedNUMAZones`, and from its
`kai.scheduler/numa-placement-predicted` annotation (which the binder copies from the BindRequest when it
binds). Between the BindRequest and the bind the pod has no record yet: `with_predicted_zones` puts the
request's zones on the pod the cache holds as its predicted record (the plugin reads observed before
predicted), so the zones count from the cycle after the decision on.
"""

from __future__ import annotations

import json
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import NodeResourceTopology, Pod
from kai_scheduler.k8s.runtime.client import NODE_RESOURCE_TOPOLOGIES, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.object_feed import ObjectsFeed
from kai_scheduler.model.cache import ClusterCache


class NodeTopologyFeed(ObjectsFeed[NodeResourceTopology]):
    """NodeResourceTopologies into the cache (`ClusterCache.set_node_topologies`), as they change."""

    def __init__(self, informers: InformerSet) -> None:
        super().__init__(
            informers, NODE_RESOURCE_TOPOLOGIES, NodeResourceTopology, ClusterCache.set_node_topologies
        )


def with_predicted_zones(pod: Pod, request: JsonObject | None) -> Pod:
    """The pod with the predicted zones of its outstanding bind (its BindRequest's `predictedNUMAZones`)
    as its predicted record (the freshest prediction, as KAI reads
    it), unless it carries an observed one."""
    annotations = pod.metadata.annotations
    if annotations.get(c.NUMA_PLACEMENT_OBSERVED_ANNOTATION):
        return pod
    text = _request_zones(request)
    if not text or annotations.get(c.NUMA_PLACEMENT_PREDICTED_ANNOTATION) == text:
        return pod
    metadata = pod.metadata.model_copy(
        update={"annotations": {**annotations, c.NUMA_PLACEMENT_PREDICTED_ANNOTATION: text}}
    )
    return pod.model_copy(update={"metadata": metadata})


def _request_zones(request: JsonObject | None) -> str:
    zones: Any = ((request or {}).get("spec") or {}).get("predictedNUMAZones")
    if not zones or not isinstance(zones, list):
        return ""
    return json.dumps(zones, separators=(",", ":"))
