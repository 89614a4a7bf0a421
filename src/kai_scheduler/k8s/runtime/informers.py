"""The informers the live components read from (`InformerSet`): which kinds each component watches, and the
indexes they look objects up by (pods by node, by PodGroup, by queue; BindRequests by pod). One informer is
`informer.py`."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.runtime.backoff import DEFAULT_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.client import (
    ACCOUNTED_RESOURCES,
    BIND_REQUESTS,
    CONFIG_MAPS,
    DEVICE_CLASSES,
    NAMESPACES,
    NODE_RESOURCE_TOPOLOGIES,
    NODES,
    PDBS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    STORAGE_CLASSES,
    TOPOLOGIES,
    JsonObject,
    KubeClient,
    ResourceKind,
)
from kai_scheduler.k8s.runtime.informer import IndexFunc, Informer
from kai_scheduler.k8s.runtime.objects import labels_of, metadata_of

# --- the scheduler's informers ---------------------------------------------------------------------

POD_NODE_INDEX = "node"
POD_GROUP_INDEX = "podgroup"
QUEUE_INDEX = "queue"
POD_INDEX = "pod"


def pod_node(pod: JsonObject) -> list[str]:
    node = (pod.get("spec") or {}).get("nodeName")
    return [str(node)] if node else []


def pod_group_of_pod(pod: JsonObject) -> list[str]:
    """`namespace/<pod-group-name annotation>`."""
    meta = metadata_of(pod)
    group = (meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION)
    return [f"{meta.get('namespace') or 'default'}/{group}"] if group else []


def queue_of_pod(pod: JsonObject) -> list[str]:
    queue = labels_of(pod).get(c.QUEUE_LABEL)
    return [str(queue)] if queue else []


def queue_of_pod_group(group: JsonObject) -> list[str]:
    spec = group.get("spec") or {}
    labels = labels_of(group)
    queue = spec.get("queue") or labels.get(c.QUEUE_LABEL)
    return [str(queue)] if queue else []


def pod_of_bind_request(request: JsonObject) -> list[str]:
    meta = metadata_of(request)
    pod = (request.get("spec") or {}).get("podName")
    return [f"{meta.get('namespace') or 'default'}/{pod}"] if pod else []


INDEXERS: dict[ResourceKind, dict[str, IndexFunc]] = {
    PODS: {POD_NODE_INDEX: pod_node, POD_GROUP_INDEX: pod_group_of_pod, QUEUE_INDEX: queue_of_pod},
    POD_GROUPS: {QUEUE_INDEX: queue_of_pod_group},
    BIND_REQUESTS: {POD_INDEX: pod_of_bind_request},
}

# What each component reads from its informers (and so lists and watches: `k8s/needs.py`). A process
# running several components shares one set of their union (`components.py`).
BINDER_KINDS: tuple[ResourceKind, ...] = (PODS, BIND_REQUESTS)
PODGROUPER_KINDS: tuple[ResourceKind, ...] = (PODS, POD_GROUPS)
# The status controllers; nodes (GPU memory of gpu-memory pods) and PriorityClasses (preemptibility) are
# read by the PodGroup status.
STATUS_KINDS: tuple[ResourceKind, ...] = (PODS, NODES, QUEUES, POD_GROUPS, PRIORITY_CLASSES)
DRA_KINDS: tuple[ResourceKind, ...] = (RESOURCE_CLAIMS, RESOURCE_SLICES, DEVICE_CLASSES)
# What the ConfigMap and volume-binding predicates read (`scheduler/storage_state.py`).
STORAGE_KINDS: tuple[ResourceKind, ...] = (
    CONFIG_MAPS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
)
SCHEDULER_KINDS: tuple[ResourceKind, ...] = (
    PODS,
    NODES,
    QUEUES,
    POD_GROUPS,
    PRIORITY_CLASSES,
    BIND_REQUESTS,
    TOPOLOGIES,
    NAMESPACES,
    *DRA_KINDS,
    *STORAGE_KINDS,
    PDBS,
    NODE_RESOURCE_TOPOLOGIES,
    ACCOUNTED_RESOURCES,
)
"""The scheduler's: the cluster it models. Namespaces' labels are what pod (anti-)affinity's
namespaceSelector matches (`state.py`); DRA's claims, slices and device classes are `dra_state.py`'s;
PodDisruptionBudgets are there for the victim search; NodeResourceTopologies for the numa plugin
(`numa_state.py`; on a cluster without their CRD the informer finds the kind not served and stays empty,
as KAI watches them only where the CRD is installed); AccountedResources for the queues' accounted
limits (`accounted_state.py`)."""


def union_of(*sets: Sequence[ResourceKind]) -> tuple[ResourceKind, ...]:
    """The kinds of several components, each once, in the order first named."""
    return tuple(dict.fromkeys(kind for kinds in sets for kind in kinds))


class InformerSet:
    """The informers of `kinds` (default: the scheduler's), with the indexes above. `namespace` limits the
    namespaced kinds to one namespace (cluster-scoped kinds, Namespaces among them, are watched whole).

        async with InformerSet(client) as informers:
            await informers.wait_synced(30)
            informers.pods.by_index(POD_NODE_INDEX, "node-1")
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        kinds: Sequence[ResourceKind] = SCHEDULER_KINDS,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.informers: dict[ResourceKind, Informer] = {
            kind: Informer(
                client,
                kind,
                namespace,
                indexers=INDEXERS.get(kind),
                backoff=backoff,
                rng=rng,
            )
            for kind in kinds
        }

    def __getitem__(self, kind: ResourceKind) -> Informer:
        return self.informers[kind]

    def __contains__(self, kind: ResourceKind) -> bool:
        return kind in self.informers

    def __iter__(self) -> Any:
        return iter(self.informers.values())

    @property
    def pods(self) -> Informer:
        return self.informers[PODS]

    @property
    def nodes(self) -> Informer:
        return self.informers[NODES]

    @property
    def queues(self) -> Informer:
        return self.informers[QUEUES]

    @property
    def pod_groups(self) -> Informer:
        return self.informers[POD_GROUPS]

    @property
    def priority_classes(self) -> Informer:
        return self.informers[PRIORITY_CLASSES]

    @property
    def bind_requests(self) -> Informer:
        return self.informers[BIND_REQUESTS]

    @property
    def topologies(self) -> Informer:
        return self.informers[TOPOLOGIES]

    @property
    def namespaces(self) -> Informer | None:
        """None when this set does not watch Namespaces (every component but the scheduler)."""
        return self.informers.get(NAMESPACES)

    def namespace_labels(self) -> dict[str, dict[str, str]]:
        """Namespace name -> its labels, from the Namespace informer (empty without one)."""
        informer = self.namespaces
        if informer is None:
            return {}
        labels: dict[str, dict[str, str]] = {}
        for key, obj in informer.cache.items():
            meta = metadata_of(obj)
            raw = meta.get("labels") or {}
            if isinstance(raw, dict):
                labels[str(meta.get("name") or key)] = {str(k): str(v) for k, v in raw.items()}
        return labels

    def optional(self, kind: ResourceKind) -> Informer | None:
        """The informer of `kind` when this set has one (it watches what its components read)."""
        return self.informers.get(kind)

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self.informers.values()))

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers.values())

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every informer has its first list (False after `timeout` seconds)."""
        try:
            await asyncio.wait_for(
                asyncio.gather(*(i.synced.wait() for i in self.informers.values())), timeout
            )
        except TimeoutError:
            return False
        return True

    async def __aenter__(self) -> InformerSet:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


__all__ = [
    "BINDER_KINDS",
    "DRA_KINDS",
    "INDEXERS",
    "PODGROUPER_KINDS",
    "POD_GROUP_INDEX",
    "POD_INDEX",
    "POD_NODE_INDEX",
    "QUEUE_INDEX",
    "SCHEDULER_KINDS",
    "STATUS_KINDS",
    "STORAGE_KINDS",
    "InformerSet",
    "union_of",
]
