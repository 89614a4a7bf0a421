"""A pod's NUMA placement as it is written down: JSON `[{"zone": <zone name>, "amount": {<resource>:
<quantity>}}]`, in the pod's annotations and the BindRequest's `predictedNUMAZones`.

Which record counts: the one KAI's placement exporter observed on the node, else the scheduler's own
prediction. A pod with neither, or whose record names a zone its node no longer reports, counts in no
zone: no zone is ever guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.api.numa_placement import NumaZonePlacement
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.plugins.numa.evaluator import Allocation, zones_in_order
from kai_scheduler.plugins.numa.zones import NodeZones, amount, quantity_of

Record = list[tuple[str, dict[str, float]]]  # (zone name, amounts)


def placement_record(annotations: Mapping[str, str]) -> Record | None:
    """The record that counts (observed first), None when the pod has no readable one."""
    for key in (c.NUMA_PLACEMENT_OBSERVED_ANNOTATION, c.NUMA_PLACEMENT_PREDICTED_ANNOTATION):
        text = annotations.get(key)
        if text:
            record = parse_record(text)
            if record:
                return record
    return None


def parse_record(text: str) -> Record | None:
    """A record, or None when it is not one (a malformed record is passed over, as KAI does)."""
    try:
        entries = json.loads(text)
        record: Record = []
        for entry in entries:
            amounts = {
                name: amount(name, parse_quantity(value))
                for name, value in (entry.get("amount") or {}).items()
            }
            record.append((str(entry["zone"]), amounts))
        return record
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def allocation_of(record: Record, topology: NodeZones) -> Allocation | None:
    """The record by zone index; None when it names a zone the node does not report."""
    allocation: Allocation = {}
    for zone_name, amounts in record:
        index = topology.zone_index(zone_name)
        if index is None:
            return None
        merged = allocation.setdefault(index, {})
        for name, value in amounts.items():
            merged[name] = merged.get(name, 0.0) + value
    return allocation


def zone_placements(allocation: Allocation, topology: NodeZones) -> tuple[NumaZonePlacement, ...]:
    """The allocation as the bind decision carries it, by zone index (so by zone number)."""
    placements = []
    for index, amounts in zones_in_order(allocation):
        items = tuple(
            (name, quantity_of(name, value)) for name, value in sorted(amounts.items()) if round(value) > 0
        )
        if items:
            placements.append(NumaZonePlacement(topology.zones[index].id, items))
    return tuple(placements)
