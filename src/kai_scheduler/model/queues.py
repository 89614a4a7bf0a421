"""The queue tree: quotas from the Queue objects, and the live accounting that fair share works on."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kai_scheduler.api.constants import UNLIMITED
from kai_scheduler.api.objects import is_unlimited
from kai_scheduler.model.resources import RESOURCE_NAMES, Resources


@dataclass(eq=False, slots=True)
class QueueInfo:
    """One queue. `deserved`, `limit` and `weight` come from its spec (-1 = unlimited); `allocated`,
    `allocated_non_preemptible`, `request` and `fair_share` are computed for the session."""

    name: str
    parent: str | None
    priority: int
    rank: int  # creation order: smaller is older
    deserved: Resources
    limit: Resources
    weight: Resources
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None
    children: list[str] = field(default_factory=list)
    allocated: Resources = field(default_factory=Resources)
    allocated_non_preemptible: Resources = field(default_factory=Resources)
    request: Resources = field(default_factory=Resources)
    fair_share: Resources = field(default_factory=Resources)
    # Time-based fairness: the queue's recent usage as a share of the cluster's capacity (0..1 per
    # resource), from the edge's usage history; zero when that is off.
    usage: Resources = field(default_factory=Resources)
    # Its `spec.accountedResources`: a limit per AccountedResource name (-1: unlimited), additive to
    # `limit` (`plugins.accounted_limits`).
    accounted_limits: dict[str, float] = field(default_factory=dict)
    # Opted in to queue admission gating (`spec.admissionGating`).
    admission_gating: bool = False

    @property
    def is_leaf(self) -> bool:
        return not self.children


class QueueTree:
    """Queues by name, with parent links resolved. Queues whose parent is missing are dropped with their
    descendants (as KAI does), and remembered so jobs in them can say why they wait."""

    def __init__(self, queues: list[QueueInfo]) -> None:
        by_name = {queue.name: queue for queue in queues}
        self.orphans: dict[str, str] = {}
        # Parent queues taken out of the tree by `flattened`, with the leaves that were under them.
        self.detached: dict[str, tuple[QueueInfo, list[str]]] = {}
        kept: dict[str, QueueInfo] = {}
        for queue in queues:
            missing = self._missing_ancestor(queue, by_name)
            if missing is None:
                kept[queue.name] = queue
            else:
                self.orphans[queue.name] = missing
        self.queues = kept
        for queue in kept.values():
            queue.children.clear()
        for queue in sorted(kept.values(), key=lambda q: q.rank):
            if queue.parent is not None:
                kept[queue.parent].children.append(queue.name)
        self.roots = [q.name for q in sorted(kept.values(), key=lambda q: q.rank) if q.parent is None]

    @staticmethod
    def _missing_ancestor(queue: QueueInfo, by_name: dict[str, QueueInfo]) -> str | None:
        seen = {queue.name}
        current = queue
        while current.parent is not None:
            parent = by_name.get(current.parent)
            if parent is None or parent.name in seen:
                return current.parent
            seen.add(parent.name)
            current = parent
        return None

    def __getitem__(self, name: str) -> QueueInfo:
        return self.queues[name]

    def __contains__(self, name: object) -> bool:
        return name in self.queues

    def __iter__(self) -> Iterator[QueueInfo]:
        return iter(self.queues.values())

    def __len__(self) -> int:
        return len(self.queues)

    def ancestry(self, name: str) -> list[QueueInfo]:
        """The queue itself, then its parent, up to the root."""
        chain = []
        current: str | None = name
        while current is not None:
            queue = self.queues[current]
            chain.append(queue)
            current = queue.parent
        return chain

    def flattened(self) -> QueueTree:
        """The tree as KAI sees it with fullHierarchyFairness off: every leaf queue directly under one
        synthetic root. Parent queues leave the tree but are remembered, to report their leaves' sums."""
        leaves_under = {q.name: [leaf.name for leaf in self.leaves(q.name)] for q in self if not q.is_leaf}
        parents = {q.name: q for q in self if not q.is_leaf}
        leaves = [q for q in self if q.is_leaf]
        for leaf in leaves:
            leaf.parent = None
        flat = QueueTree(leaves)
        flat.orphans = dict(self.orphans)
        flat.detached = {name: (parents[name], names) for name, names in leaves_under.items()}
        return flat

    def leaves(self, name: str) -> list[QueueInfo]:
        queue = self.queues[name]
        if queue.is_leaf:
            return [queue]
        return [leaf for child in queue.children for leaf in self.leaves(child)]


def effective_limit(queue: QueueInfo, resource: str) -> float:
    """The limit as a number: unlimited is infinity."""
    value = queue.limit.get(resource)
    return float("inf") if is_unlimited(value) else value


def effective_deserved(queue: QueueInfo, resource: str, total: float) -> float:
    """The deserved quota as a number: unlimited is `total`, the cluster's capacity."""
    value = queue.deserved.get(resource)
    return total if is_unlimited(value) else value


__all__ = [
    "RESOURCE_NAMES",
    "UNLIMITED",
    "QueueInfo",
    "QueueTree",
    "effective_deserved",
    "effective_limit",
    "is_unlimited",
]
