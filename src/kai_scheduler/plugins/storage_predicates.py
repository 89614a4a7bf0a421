"""The predicates on what a pod mounts and reads (`model.storage`): KAI's ConfigMap and VolumeBinding
pre-filters (the pod cannot be scheduled at all) and the VolumeBinding filter (the nodes its claims allow).

Pods without ConfigMap references or claims (nearly all) cost one look at two empty tuples; the node filters
are registered only when the cluster has PersistentVolumeClaims, and are computed once per placement.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kai_scheduler.framework.session import StaticPredicate
from kai_scheduler.model.jobs import Placement, TaskInfo
from kai_scheduler.model.nodes import BoolArray, NodeTable
from kai_scheduler.model.storage import BIND_CONFLICT, NODE_CONFLICT, PV_NOT_EXIST, Storage


class StorageChecks:
    """One session's checks over its snapshot's `Storage`."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._failures: dict[str, str | None] = {}  # placement key -> why no node will do

    def pre_filter(self, task: TaskInfo) -> str | None:
        """ConfigMaps first, then claims (one failure is enough to say why)."""
        placement = task.placement
        if not placement.config_maps and not placement.claims:
            return None
        if placement.key not in self._failures:
            storage = self.storage
            self._failures[placement.key] = storage.missing_config_maps(
                placement.config_maps
            ) or storage.claims_problem(placement.claims)
        return self._failures[placement.key]

    def node_filters(self) -> list[tuple[str, str, StaticPredicate]]:
        """The VolumeBinding filter's three reasons, each a static predicate (none without claims)."""
        if not self.storage.claims:
            return []
        storage = self.storage

        def bound_volume_missing(placement: Placement, labels: dict[str, str], node: str) -> bool:
            return storage.bound_conflict(placement.claims, labels, node) != PV_NOT_EXIST

        def bound_volume_elsewhere(placement: Placement, labels: dict[str, str], node: str) -> bool:
            return storage.bound_conflict(placement.claims, labels, node) != NODE_CONFLICT

        def unbound_cannot_bind(placement: Placement, labels: dict[str, str], node: str) -> bool:
            return storage.unbound_binds(placement.claims, labels, node)

        return [
            ("volumebinding", PV_NOT_EXIST, _per_node(bound_volume_missing)),
            ("volumebinding", NODE_CONFLICT, _per_node(bound_volume_elsewhere)),
            ("volumebinding", BIND_CONFLICT, _per_node(unbound_cannot_bind)),
        ]


def _per_node(passes: Callable[[Placement, dict[str, str], str], bool]) -> StaticPredicate:
    def nodes_passing(placement: Placement, nodes: NodeTable) -> BoolArray:
        if not placement.claims:
            return np.ones(nodes.size, dtype=np.bool_)
        return np.array([passes(placement, spec.labels, spec.name) for spec in nodes.specs], dtype=np.bool_)

    return nodes_passing
