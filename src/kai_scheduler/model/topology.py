"""Topology trees (`kai.scheduler/v1alpha1 Topology`): which nodes share a domain at each level.

A Topology lists node-label keys from the widest level (say, zone) to the narrowest (rack, or the host).
A node's domain at level i is the values of its labels for levels 0..i joined with "." (so a rack id is
unique across zones, as in KAI). A node missing any level's label is outside the topology: a job that
asks for this topology is never placed there.

A level may have an alias (KAI v0.17, #1788) that workloads name instead of its node label; a name that is
neither passes through unchanged (and is then no level of the topology).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Domain:
    """One domain of a level: its id and the nodes in it."""

    level: int
    id: str
    nodes: BoolArray


@dataclass(eq=False, slots=True)
class TopologyTree:
    name: str
    levels: tuple[str, ...]  # node-label keys, widest first
    members: BoolArray  # nodes inside the topology
    # Per level: the domain index of every node (-1 outside the topology), and the domains.
    node_domain: tuple[IntArray, ...]
    domains: tuple[tuple[Domain, ...], ...]
    _by_id: dict[tuple[int, str], Domain] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> node-label key
    _ancestors: dict[int, IntArray] = field(default_factory=dict)

    def resolve(self, name: str) -> str:
        """The node-label key a level name stands for (KAI's ResolveAliases): an alias's, else itself."""
        return self.aliases.get(name, name)

    def level_of(self, label: str) -> int | None:
        """The level index of a node-label key or alias, or None when the topology has no such level."""
        label = self.aliases.get(label, label)
        return self.levels.index(label) if label in self.levels else None

    def domain_of(self, node: int, level: int) -> Domain | None:
        index = int(self.node_domain[level][node])
        return self.domains[level][index] if index >= 0 else None

    def ancestors(self, level: int) -> IntArray:
        """For each domain of `level` (rows), the index of the domain holding it at every level 0..`level`
        (columns; the last is itself)."""
        cached = self._ancestors.get(level)
        if cached is None:
            first = np.array([int(np.argmax(d.nodes)) for d in self.domains[level]], dtype=np.int64)
            columns = [self.node_domain[up][first] for up in range(level + 1)]
            cached = (
                np.stack(columns, axis=1) if columns and first.size else np.zeros((0, level + 1), np.int64)
            )
            self._ancestors[level] = cached
        return cached

    def domain(self, level: int, domain_id: str) -> Domain | None:
        if not self._by_id:
            self._by_id.update({(d.level, d.id): d for ds in self.domains for d in ds})
        return self._by_id.get((level, domain_id))


def build_topology(
    name: str,
    levels: Sequence[str],
    node_labels: Sequence[Mapping[str, str]],
    aliases: Mapping[str, str] | None = None,
) -> TopologyTree:
    """The tree of one Topology over the snapshot's nodes (in node-table order); `aliases`: alias ->
    node-label key."""
    n = len(node_labels)
    members = np.array([all(level in labels for level in levels) for labels in node_labels], dtype=np.bool_)
    node_domain: list[IntArray] = []
    domains: list[tuple[Domain, ...]] = []
    for depth in range(len(levels)):
        ids: dict[str, int] = {}
        column = np.full(n, -1, dtype=np.int64)
        for node, labels in enumerate(node_labels):
            if members[node]:
                domain_id = ".".join(labels[level] for level in levels[: depth + 1])
                column[node] = ids.setdefault(domain_id, len(ids))
        node_domain.append(column)
        domains.append(tuple(Domain(depth, domain_id, column == i) for domain_id, i in ids.items()))
    return TopologyTree(
        name, tuple(levels), members, tuple(node_domain), tuple(domains), aliases=dict(aliases or {})
    )
