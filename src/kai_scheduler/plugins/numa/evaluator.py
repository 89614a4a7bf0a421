"""Whether the kubelet's Topology Manager would align a pod's units on a node, and in which zones.

Per unit, the node's policy chooses a mask (a set of zones) under the zones' room as the units before it
left it:

* `single-numa-node`: the lowest zone that holds all of the unit;
* `restricted`: the kubelet merges one hint per resource, each the narrowest width the zones' allocatable
  (not what is free now) allows; the widths must agree, and a mask of that width must hold the unit in
  what is free now (the lowest such mask). A unit that fits only in a wider mask is refused;
* `best-effort`: never refuses what fits the node; zones are added greedily, the one that covers most of
  what is still missing first, and their number is the span the score reads.

A unit is drawn from its mask lowest zone first; the kubelet does not fix the split at admission, and any
split inside the mask is one it could make. Amounts are keyed by zone index.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations

from kai_scheduler.plugins.numa.zones import BEST_EFFORT, SINGLE_NUMA_NODE, Amounts, NodeZones

Allocation = dict[int, Amounts]


class _Room:
    """What the zones have free, less what earlier units of the same pod drew."""

    __slots__ = ("consumed", "topology")

    def __init__(self, topology: NodeZones) -> None:
        self.topology = topology
        self.consumed: dict[tuple[int, str], float] = {}

    def free(self, zone: int, resource: str) -> float:
        value = self.topology.zones[zone].available.get(resource, 0.0)
        return value - self.consumed.get((zone, resource), 0.0) if self.consumed else value


def solve(
    topology: NodeZones,
    aware: Sequence[str],
    concurrent: Sequence[Amounts],
    serial: Sequence[Amounts] = (),
    allocation: Allocation | None = None,
) -> bool:
    """Whether every unit aligns on the node (`aware`: the resources aligned for this pod). The concurrent
    units draw from the zones one after the other; their draws are added to `allocation` when given."""
    room = _Room(topology)
    last = len(concurrent) - 1
    for index, unit in enumerate(concurrent):
        mask = choose_mask(topology, aware, unit, room)
        if mask is None:
            return False
        if allocation is not None or index < last:
            _draw(aware, mask, unit, room, allocation)
    fresh = _Room(topology)
    return all(choose_mask(topology, aware, unit, fresh) is not None for unit in serial)


def choose_mask(topology: NodeZones, aware: Sequence[str], unit: Amounts, room: _Room) -> list[int] | None:
    """The zones the node's policy would align `unit` to (empty: nothing of it is aligned), None: none."""
    needs = [(resource, unit[resource]) for resource in aware if unit.get(resource, 0.0) > 0]
    if topology.policy == SINGLE_NUMA_NODE:
        return _lowest_single_zone(topology, needs, room)
    if topology.policy == BEST_EFFORT:
        return _greedy_cover(topology, needs, room)
    return _restricted(topology, needs, room)


def _lowest_single_zone(topology: NodeZones, needs: list[tuple[str, float]], room: _Room) -> list[int] | None:
    for zone in range(len(topology.zones)):
        if all(room.free(zone, resource) >= need for resource, need in needs):
            return [zone]
    return None


def _restricted(topology: NodeZones, needs: list[tuple[str, float]], room: _Room) -> list[int] | None:
    width = 0
    for resource, need in needs:
        narrowest = _preferred_width(topology.allocatable_prefix[resource], need)
        if narrowest is None or (width and narrowest != width):
            return None
        width = narrowest
    if width == 0:
        return []
    if width == 1:
        return _lowest_single_zone(topology, needs, room)
    for mask in combinations(range(len(topology.zones)), width):
        if all(sum(room.free(zone, resource) for zone in mask) >= need for resource, need in needs):
            return list(mask)
    return None


def _preferred_width(prefix: list[float], need: float) -> int | None:
    """The fewest zones whose allocatable (largest first) add up to `need`; None: not even all of them."""
    for width, total in enumerate(prefix, start=1):
        if total >= need:
            return width
    return None


def _greedy_cover(topology: NodeZones, needs: list[tuple[str, float]], room: _Room) -> list[int] | None:
    missing = [need for _, need in needs]
    mask: list[int] = []
    unused = list(range(len(topology.zones)))
    while any(m > 0 for m in missing):
        best, best_cover = -1, 0.0
        for zone in unused:
            cover = sum(
                min(m, room.free(zone, resource))
                for (resource, _), m in zip(needs, missing, strict=True)
                if m > 0
            )
            if cover > best_cover:
                best, best_cover = zone, cover
        if best < 0:
            return None
        unused.remove(best)
        mask.append(best)
        missing = [m - room.free(best, resource) for (resource, _), m in zip(needs, missing, strict=True)]
    return mask


def _draw(
    aware: Sequence[str], mask: list[int], unit: Amounts, room: _Room, allocation: Allocation | None
) -> None:
    for resource in aware:
        remaining = unit.get(resource, 0.0)
        for zone in mask:
            if remaining <= 0:
                break
            take = min(room.free(zone, resource), remaining)
            if take <= 0:
                continue
            room.consumed[(zone, resource)] = room.consumed.get((zone, resource), 0.0) + take
            if allocation is not None:
                amounts = allocation.setdefault(zone, {})
                amounts[resource] = amounts.get(resource, 0.0) + take
            remaining -= take


def span(allocation: Allocation) -> int:
    """The zones a placement takes (a pod that takes nothing aligned counts as local: 1)."""
    return max(1, len(allocation))


def zones_in_order(allocation: Allocation) -> Iterator[tuple[int, Amounts]]:
    for zone in sorted(allocation):
        yield zone, allocation[zone]
