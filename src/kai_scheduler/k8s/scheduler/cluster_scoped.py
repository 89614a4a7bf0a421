"""The cluster-scoped kinds into the scheduler's cache: nodes, queues, topologies, priority classes and
namespaces' labels.

Each kind is parsed again only when one of its objects changed (a queue's status write does not make every
node parsed again), and as a whole: the cache takes a kind's objects at once. What does not validate is
kept by kind for the loop to report; a queue's warnings and refusals are said by one shard only.
"""

from __future__ import annotations

from collections.abc import Callable

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Node, PriorityClass, Queue, Topology
from kai_scheduler.api.reasons import INVALID_QUEUE
from kai_scheduler.k8s.runtime.client import (
    NAMESPACES,
    NODES,
    PRIORITY_CLASSES,
    QUEUES,
    TOPOLOGIES,
    JsonObject,
)
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.notices import Noticed, notices_of
from kai_scheduler.k8s.scheduler.object_times import creation_key
from kai_scheduler.k8s.scheduler.parsing import Parsed, checked, schema_only
from kai_scheduler.k8s.scheduler.waiting import problem_text
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.priorities import Priorities

CLUSTER_SCOPED = (NODES, QUEUES, TOPOLOGIES, PRIORITY_CLASSES, NAMESPACES)


class ClusterScopedFeed:
    """Keeps the cache's cluster-scoped kinds current from the informers (see the module doc)."""

    def __init__(self, informers: InformerSet, partition: Partition | None) -> None:
        self.informers = informers
        self.partition = partition
        self._nodes = Parsed("node", schema_only(Node))
        self._queues = Parsed("queue", checked(Queue))
        self._classes = Parsed("priorityclass", schema_only(PriorityClass))
        self._topologies = Parsed("topology", checked(Topology))
        self.class_names: set[str] = set(c.BUILTIN_PRIORITY_CLASSES)  # the cluster's PriorityClasses
        # Objects that do not validate, by kind (in the order they are read).
        self.skipped: dict[str, list[str]] = {kind.plural: [] for kind in CLUSTER_SCOPED}
        self._dirty = {kind.plural for kind in CLUSTER_SCOPED}  # kinds changed since the last update
        self._watch(informers)

    def _watch(self, informers: InformerSet) -> None:
        def changed_kind(kind: str) -> Callable[..., None]:
            def changed(*objs: JsonObject) -> None:
                self._dirty.add(kind)

            return changed

        cluster_scoped = [informers.nodes, informers.queues, informers.topologies, informers.priority_classes]
        if informers.namespaces is not None:
            cluster_scoped.append(informers.namespaces)
        for informer in cluster_scoped:
            handler = changed_kind(informer.kind.plural)
            informer.add_handler(handler, handler, handler)

    def update(self, cache: ClusterCache, noticed: list[Noticed]) -> set[str]:
        """The kinds that changed into `cache`, with warnings about them added to `noticed`; returns the
        names of the priority classes that are gone (the pods naming them are to be read again)."""
        informers = self.informers
        dirty, self._dirty = self._dirty, set()
        skipped = self.skipped
        gone: set[str] = set()
        if NODES.plural in dirty:
            skipped[NODES.plural] = []
            nodes = self._nodes.parse_all(informers.nodes.cache, "Node", skipped[NODES.plural])
            cache.set_nodes(node for _, _, node in nodes)
        if QUEUES.plural in dirty:
            skipped[QUEUES.plural] = []
            queues = self._queues.parse_all(informers.queues.cache, "Queue", skipped[QUEUES.plural])
            if self.partition is None or self.partition.value is None:  # one shard speaks for queues
                for _, obj, queue in queues:
                    noticed += notices_of(obj, queue, self.class_names)
                for key, error in self._queues.errors.items():
                    refused = informers.queues.cache.get(key)
                    if refused is not None:
                        noticed.append(Noticed(refused, INVALID_QUEUE, problem_text(error)))
            cache.set_queues([q for _, _, q in sorted(queues, key=lambda q: creation_key(q[1], q[0]))])
        if TOPOLOGIES.plural in dirty:
            skipped[TOPOLOGIES.plural] = []
            topologies = self._topologies.parse_all(
                informers.topologies.cache, "Topology", skipped[TOPOLOGIES.plural]
            )
            cache.set_topologies([t for _, _, t in topologies])
        if PRIORITY_CLASSES.plural in dirty:
            skipped[PRIORITY_CLASSES.plural] = []
            classes = self._classes.parse_all(
                informers.priority_classes.cache, "PriorityClass", skipped[PRIORITY_CLASSES.plural]
            )
            cache.set_priorities(Priorities.of(pc for _, _, pc in classes))
            names = set(c.BUILTIN_PRIORITY_CLASSES) | {pc.metadata.name for _, _, pc in classes}
            gone, self.class_names = self.class_names - names, names
        if NAMESPACES.plural in dirty:
            cache.set_namespace_labels(informers.namespace_labels())
        return gone

    def node_models(self) -> list[Node]:
        """The nodes that parsed, as last read."""
        return [model for _, model in self._nodes.entries.values() if model is not None]


__all__ = ["CLUSTER_SCOPED", "ClusterScopedFeed"]
