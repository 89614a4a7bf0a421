"""A node's NUMA zones as the numa plugin models them, made of its NodeResourceTopology.

Only zones of type `Node` (NUMA nodes) are kept: the kubelet's Topology Manager aligns at that level
alone, whatever else (sockets, dies) an exporter reports. Zones are ordered by the number their name
ends with (`node-0`, `node-1`, ...), not by their place in the object: among equally narrow masks the
kubelet prefers the numerically lowest NUMA node, so the lowest fitting zone in this order is the one the
kubelet would pick.

Amounts are numbers in each resource's base unit, CPU in millicores (as KAI's resource vectors hold them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from kai_scheduler.api.objects import NodeResourceTopology
from kai_scheduler.api.quantity import quantity_text

NONE: Final = "none"
BEST_EFFORT: Final = "best-effort"
RESTRICTED: Final = "restricted"
SINGLE_NUMA_NODE: Final = "single-numa-node"
CONTAINER_SCOPE: Final = "container"
POD_SCOPE: Final = "pod"

# The policies whose kubelet refuses a pod it cannot align (the plugin filters nodes for them), and those
# it also accounts and scores (best-effort admits anything, but locality is still preferred).
FILTERING: Final = frozenset({RESTRICTED, SINGLE_NUMA_NODE})
SCORED: Final = frozenset({BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE})

_POLICY_ATTRIBUTE: Final = "topologyManagerPolicy"
_SCOPE_ATTRIBUTE: Final = "topologyManagerScope"
_NUMA_NODE_ZONE: Final = "Node"
# The deprecated `topologyPolicies` values: policy and scope in one word.
_LEGACY: Final = {
    "SingleNUMANodePodLevel": (SINGLE_NUMA_NODE, POD_SCOPE),
    "SingleNUMANodeContainerLevel": (SINGLE_NUMA_NODE, CONTAINER_SCOPE),
    "RestrictedPodLevel": (RESTRICTED, POD_SCOPE),
    "Restricted": (RESTRICTED, CONTAINER_SCOPE),
    "RestrictedContainerLevel": (RESTRICTED, CONTAINER_SCOPE),
    "BestEffortPodLevel": (BEST_EFFORT, POD_SCOPE),
    "BestEffort": (BEST_EFFORT, CONTAINER_SCOPE),
    "BestEffortContainerLevel": (BEST_EFFORT, CONTAINER_SCOPE),
}
_TRAILING_NUMBER = re.compile(r"(\d+)$")

Amounts = dict[str, float]


def amount(resource: str, quantity: Fraction) -> float:
    """A quantity in the unit the plugin counts in: millicores for CPU, the base unit otherwise."""
    return float(quantity * 1000) if resource == "cpu" else float(quantity)


def quantity_of(resource: str, value: float) -> str:
    """An amount back as a quantity, as KAI writes a placement: CPU in whole millicores, others whole."""
    if resource == "cpu":
        return quantity_text(Fraction(round(value), 1000))
    return quantity_text(Fraction(round(value)))


@dataclass(slots=True)
class Zone:
    id: str
    allocatable: Amounts
    available: Amounts


@dataclass(slots=True)
class NodeZones:
    """One node's zones, with what the evaluators read over and over kept ready."""

    policy: str
    scope: str
    zones: list[Zone]
    # The resources reported per zone (the only ones the kubelet aligns), by name.
    aware: tuple[str, ...]
    # Per aware resource, the running sums of the zones' allocatable from the largest down: [k] is what
    # the k+1 largest zones hold together (the restricted policy's preferred width reads it).
    allocatable_prefix: dict[str, list[float]] = field(default_factory=dict)

    def zone_index(self, zone_id: str) -> int | None:
        for index, zone in enumerate(self.zones):
            if zone.id == zone_id:
                return index
        return None


def node_zones(topology: NodeResourceTopology) -> NodeZones | None:
    """The node's zones, or None when its object reports no NUMA-node zone."""
    zones: list[Zone] = []
    for nrt_zone in topology.zones:
        if nrt_zone.type != _NUMA_NODE_ZONE:
            continue
        zones.append(
            Zone(
                nrt_zone.name,
                {r.name: amount(r.name, r.allocatable) for r in nrt_zone.resources},
                {r.name: amount(r.name, r.available) for r in nrt_zone.resources},
            )
        )
    if not zones:
        return None
    zones.sort(key=_zone_order)
    aware = tuple(sorted({name for zone in zones for name in zone.allocatable}))
    policy, scope = policy_and_scope(topology)
    prefix = {}
    for name in aware:
        running, sums = 0.0, []
        for value in sorted((zone.allocatable.get(name, 0.0) for zone in zones), reverse=True):
            running += value
            sums.append(running)
        prefix[name] = sums
    return NodeZones(policy, scope, zones, aware, prefix)


def _zone_order(zone: Zone) -> tuple[int, int, str]:
    """Numbered zones first, by number; the rest by name."""
    match = _TRAILING_NUMBER.search(zone.id)
    return (0, int(match.group(1)), zone.id) if match else (1, 0, zone.id)


def policy_and_scope(topology: NodeResourceTopology) -> tuple[str, str]:
    """The kubelet's Topology Manager policy and scope from the object's attributes, else from its
    deprecated `topologyPolicies`; what neither names is `none` and `container` (the kubelet's defaults)."""
    attributes = {attribute.name: attribute.value for attribute in topology.attributes}
    policy = attributes.get(_POLICY_ATTRIBUTE, "")
    if policy:
        known = policy in (NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE)
        scope = attributes.get(_SCOPE_ATTRIBUTE, "")
        return (policy if known else NONE), (
            scope if scope in (POD_SCOPE, CONTAINER_SCOPE) else CONTAINER_SCOPE
        )
    if topology.topology_policies:
        return _LEGACY.get(topology.topology_policies[0], (NONE, CONTAINER_SCOPE))
    return NONE, CONTAINER_SCOPE
