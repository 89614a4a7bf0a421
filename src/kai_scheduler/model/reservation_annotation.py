"""A job's `Reservation` as the PodGroup annotation `kai.scheduler/reservation` carries it, read and
written one way by every edge: `simulate`'s input and the state export (so a replay or the start-time
look-ahead starts from the reservations the cluster holds), and live mode's PodGroups.

The value is compact JSON, `{"nodes": ["n1", "n2"], "start": "2026-01-01T01:00:00Z", "gpus": 16}`: the
nodes held, when the job is expected to start there (RFC 3339; on a session clock, seconds since an
`origin` instant) and the GPUs held. `gpus` may be left out (none counted).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

from kai_scheduler.api.timestamps import format_rfc3339, parse_rfc3339
from kai_scheduler.model.reservations import Reservation

_KEYS = ("nodes", "start", "gpus")
_SHAPE = '{"nodes": [...], "start": "<RFC 3339>", "gpus": n}'


def format_reservation(reservation: Reservation, origin: datetime) -> str:
    """The annotation's value for `reservation` (its start on the clock whose second 0 is `origin`).
    Microseconds are written when the start has any, so that it reads back as the same time."""
    gpus = reservation.gpus
    value: dict[str, Any] = {
        "nodes": list(reservation.nodes),
        "start": format_rfc3339(origin + timedelta(seconds=reservation.start), "microseconds_if_any"),
        # A whole number reads as one (16, not 16.0): people read this annotation with kubectl.
        "gpus": int(gpus) if gpus == int(gpus) else gpus,
    }
    return json.dumps(value, separators=(",", ":"))


def parse_reservation(text: str, origin: datetime) -> Reservation:
    """The reservation an annotation's value holds, its start in seconds since `origin`. ValueError, with
    a message that says what is wrong (one line), for anything else."""
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"not JSON: expected {_SHAPE}, got {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object {_SHAPE}, got {text!r}")
    unknown = sorted(key for key in value if key not in _KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (the keys are nodes, start and gpus)")
    nodes, start = _nodes(value.get("nodes")), _start(value.get("start"), origin)
    return Reservation(nodes, start, _gpus(value.get("gpus", 0)))


def _nodes(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(n, str) and n for n in value):
        raise ValueError(f"nodes: expected a non-empty list of node names, got {json.dumps(value)}")
    return tuple(sorted(set(value)))


def _start(value: object, origin: datetime) -> float:
    if not isinstance(value, str):
        raise ValueError(f"start: expected an RFC 3339 time, got {json.dumps(value)}")
    try:
        return (parse_rfc3339(value) - origin).total_seconds()
    except ValueError:
        raise ValueError(f"start: not an RFC 3339 time: {value!r}") from None


def _gpus(value: object) -> float:
    number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number) or number < 0:
        raise ValueError(f"gpus: expected a number of GPUs, 0 or more, got {json.dumps(value)}")
    return float(number)


__all__ = ["format_reservation", "parse_reservation"]
