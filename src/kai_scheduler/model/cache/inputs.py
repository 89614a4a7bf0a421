"""The cluster-scoped kinds the cluster cache holds, each set as a whole: nodes, queues, topologies,
priority classes, namespace labels, DRA slices and classes (with the claims, `dra_inputs`), storage,
PodDisruptionBudgets and NodeResourceTopologies.

A setter whose value equals what is held changes nothing; those the model is made of say whether they
changed, and the cache decides what that makes dirty. With a partition only the shard's nodes and queues
are held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import compress
from operator import is_not
from typing import NamedTuple

from kai_scheduler.api.objects import (
    AccountedResource,
    ConfigMap,
    DeviceClass,
    Node,
    NodeResourceTopology,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    Queue,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.model.accounted import AccountedInputs, Definition, definitions_of
from kai_scheduler.model.builder import NodeRow, node_rows, queue_specs, queue_tree_of
from kai_scheduler.model.cache.dra_inputs import DraInputs
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.snapshot import PodState
from kai_scheduler.model.storage import Storage
from kai_scheduler.model.topology import TopologyTree, build_topology

StorageObjects = tuple[
    list[ConfigMap], list[PersistentVolumeClaim], list[PersistentVolume], list[StorageClass]
]


class NodesSet(NamedTuple):
    """What `ClusterInputs.set_nodes` changed: whether the same nodes are held, and which of them are new
    objects (each with the one held before); nothing is replaced when the names changed."""

    same_names: bool
    replaced: dict[str, Node]


class ClusterInputs:
    def __init__(self, partition: Partition | None) -> None:
        self._partition = partition
        self.nodes: dict[str, Node] = {}
        # Each node's row of the node table (`builder.node_rows`), read as its object arrives: a table is made
        # of the rows (`builder.node_table_of`) when the nodes or what DRA adds to them change.
        self.node_rows: dict[str, NodeRow] = {}
        self.queues: list[Queue] = []
        # What the queues' objects say (`builder.queue_specs`), read once per change: each snapshot makes
        # its tree of them (`builder.queue_tree_of`).
        self.queue_specs: list[QueueInfo] = []
        self.queue_tree = queue_tree_of([])
        self.topologies: list[Topology] = []
        self.priorities = Priorities()
        self.namespace_labels: Mapping[str, Mapping[str, str]] = {}
        self.dra = DraInputs()  # claims, slices, device classes; which pods use which claims
        self.storage = Storage()
        self.storage_objects: StorageObjects = ([], [], [], [])
        self.disruption_budgets: list[PodDisruptionBudget] = []
        self.node_topologies: dict[str, NodeResourceTopology] = {}  # by name (its node's)
        self.accounted_resources: list[AccountedResource] = []
        self._definitions: dict[str, Definition] = {}

    def set_nodes(self, nodes: Iterable[Node]) -> NodesSet | None:
        """None when the nodes equal those held (which stay); else whether the names are the same and the
        nodes they replaced (name -> the object held before, in the new order): every one not the same
        object, an equal one too."""
        partition = self._partition
        given = (
            list(nodes)
            if partition is None
            else [node for node in nodes if partition.holds(node.metadata.labels)]
        )
        held = self.nodes
        if len(given) == len(held):
            # An informer hands the nodes in the order they came, most of them the objects held (so under
            # the names held): only the rows whose object is another have their names read (a cordon at
            # 5,000 nodes: 1.25 -> 0.58 ms, half of it the names).
            names = list(held)
            rows = list(compress(range(len(given)), map(is_not, given, held.values())))
            if all(given[row].metadata.name == names[row] for row in rows):  # the same names, in order
                if all(given[row] == held[names[row]] for row in rows):
                    return None
                self.nodes = dict(zip(names, given, strict=True))
                self._read_rows(given[row] for row in rows)
                return NodesSet(same_names=True, replaced={names[row]: held[names[row]] for row in rows})
        by_name = {node.metadata.name: node for node in given}
        if by_name == held:
            return None
        self.nodes = by_name
        self._read_rows(node for name, node in by_name.items() if node is not held.get(name))
        if len(self.node_rows) > len(by_name):
            self.node_rows = {name: self.node_rows[name] for name in by_name}
        if by_name.keys() != held.keys():
            return NodesSet(same_names=False, replaced={})
        replaced = {name: held[name] for name, node in by_name.items() if node is not held[name]}
        return NodesSet(same_names=True, replaced=replaced)

    def _read_rows(self, nodes: Iterable[Node]) -> None:
        """The rows of `nodes`, objects new to the inputs (their names held or not)."""
        rows = self.node_rows
        for row in node_rows(nodes):
            rows[row.spec.name] = row

    def set_queues(self, queues: Sequence[Queue]) -> bool:
        partition = self._partition
        if partition is not None:
            queues = [queue for queue in queues if partition.holds(queue.metadata.labels)]
        if list(queues) == self.queues:
            return False
        self.queues = list(queues)
        self.queue_specs = queue_specs(self.queues)
        self.queue_tree = queue_tree_of(self.queue_specs)
        return True

    def set_topologies(self, topologies: Sequence[Topology]) -> bool:
        if list(topologies) == self.topologies:
            return False
        self.topologies = list(topologies)
        return True

    def set_priorities(self, priorities: Priorities) -> bool:
        if priorities == self.priorities:
            return False
        self.priorities = priorities
        return True

    def set_dra(
        self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass], *, enabled: bool
    ) -> bool:
        """True when the nodes' DRA GPUs changed."""
        self.dra.enabled = enabled
        return self.dra.set_cluster(slices, classes)

    def set_storage(
        self,
        config_maps: Sequence[ConfigMap],
        claims: Sequence[PersistentVolumeClaim],
        volumes: Sequence[PersistentVolume],
        classes: Sequence[StorageClass],
    ) -> None:
        self.storage_objects = (list(config_maps), list(claims), list(volumes), list(classes))
        self.storage = Storage.of(config_maps, claims, volumes, classes)

    def set_node_topologies(self, topologies: Sequence[NodeResourceTopology]) -> None:
        self.node_topologies = {topology.metadata.name: topology for topology in topologies}

    def set_accounted_resources(self, resources: Sequence[AccountedResource]) -> None:
        self.accounted_resources = list(resources)
        self._definitions = definitions_of(resources)

    def accounted(self, pods: Mapping[str, PodState]) -> AccountedInputs | None:
        """What the accounted-resource limits read; None when there is nothing to limit: no
        AccountedResource and no queue naming one."""
        if not self._definitions and not any(q.spec.accounted_resources for q in self.queues):
            return None
        return AccountedInputs(self._definitions, pods)

    def topology_trees(self, table: NodeTable) -> dict[str, TopologyTree]:
        """Each Topology's tree of domains over the nodes of `table`."""
        labels = [spec.labels for spec in table.specs]
        return {
            t.metadata.name: build_topology(
                t.metadata.name,
                [level.node_label for level in t.spec.levels],
                labels,
                {level.alias: level.node_label for level in t.spec.levels if level.alias},
            )
            for t in self.topologies
        }
