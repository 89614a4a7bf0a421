"""Timestamps as Kubernetes writes them: RFC 3339 (`creationTimestamp`, KAI's PodGroup time annotations,
a Lease's times), read one way by both edges.

`Z` or an offset are accepted, and a time without either is UTC (as Kubernetes means it), so two readers
never disagree about when something happened.
"""

from __future__ import annotations

from datetime import UTC, datetime


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


__all__ = ["parse_rfc3339", "seconds_since"]
