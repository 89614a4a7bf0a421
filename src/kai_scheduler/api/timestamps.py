"""Timestamps as Kubernetes writes them: RFC 3339 (`creationTimestamp`, KAI's PodGroup time annotations,
a Lease's times), read and written one way by both edges.

Reading: `Z` or an offset are accepted, and a time without either is UTC (as Kubernetes means it), so two
readers never disagree about when something happened. Writing: in UTC with `Z`, as apimachinery marshals
a Time (`2026-03-01T12:00:00Z`, to the second) or a MicroTime (always six fraction digits); each writer
names its precision, so what it wrote before it writes now, byte for byte.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

# seconds: metav1.Time; microseconds: metav1.MicroTime; milliseconds: log lines; microseconds_if_any:
# exported state, where a session time between seconds must read back as the same instant.
Precision = Literal["seconds", "milliseconds", "microseconds", "microseconds_if_any"]


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 timestamp (Kubernetes' format; `Z` or an offset; naive means UTC). ValueError if not."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def seconds_since(text: str | None, origin: datetime) -> float | None:
    """An RFC 3339 annotation on a clock that starts at `origin`; None when absent or not a time (as KAI
    ignores such a value)."""
    if not text:
        return None
    try:
        return (parse_rfc3339(text) - origin).total_seconds()
    except ValueError:
        return None


def format_rfc3339(moment: datetime, precision: Precision = "seconds", *, keep_offset: bool = False) -> str:
    """`moment` as RFC 3339: in UTC with `Z` (naive means UTC), or, with `keep_offset`, in its own offset
    (`Z` when zero), as Go's Format(time.RFC3339) writes a time in a location (the CronJob controller's
    scheduled-time annotation). Digits past `precision` are dropped, never rounded, as Go does."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if not keep_offset:
        moment = moment.astimezone(UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if precision == "microseconds" or (precision == "microseconds_if_any" and moment.microsecond):
        text += f".{moment.microsecond:06d}"
    elif precision == "milliseconds":
        text += f".{moment.microsecond // 1000:03d}"
    offset = moment.utcoffset()
    if not offset:
        return text + "Z"
    minutes = abs(offset) // timedelta(minutes=1)
    return f"{text}{'-' if offset < timedelta(0) else '+'}{minutes // 60:02d}:{minutes % 60:02d}"


def format_epoch(seconds: float, precision: Precision = "seconds") -> str:
    """Seconds since the Unix epoch (a `time.time()` reading) as RFC 3339 in UTC."""
    return format_rfc3339(datetime.fromtimestamp(seconds, tz=UTC), precision)


__all__ = ["Precision", "format_epoch", "format_rfc3339", "parse_rfc3339", "seconds_since"]
