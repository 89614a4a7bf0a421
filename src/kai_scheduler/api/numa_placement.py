"""A pod's NUMA placement as KAI writes it down (`NUMAZonePlacement`): the BindRequest's
`predictedNUMAZones`, and JSON `[{"zone": <zone name>, "amount": {<resource>: <quantity>}}]` in the pod's
`kai.scheduler/numa-placement-predicted` (the binder's) and `-observed` (KAI's placement exporter's)
annotations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NumaZonePlacement:
    """What a pod takes of one NUMA zone of its node: the zone as its NodeResourceTopology names it, and
    the amounts as quantities."""

    zone: str
    amount: tuple[tuple[str, str], ...]  # (resource, quantity), by resource name


def placement_json(zones: Sequence[NumaZonePlacement]) -> list[dict[str, object]]:
    return [{"zone": zone.zone, "amount": dict(zone.amount)} for zone in zones]


def placement_text(zones: Sequence[NumaZonePlacement]) -> str:
    """As the annotations hold it."""
    return json.dumps(placement_json(zones), separators=(",", ":"))
