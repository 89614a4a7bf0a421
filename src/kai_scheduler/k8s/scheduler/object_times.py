"""An object's times as the scheduler's state reads them: its creation order key, and its timestamps and
PodGroup time annotations (and reservation) on the session clock.

A time that is missing or not RFC 3339 never stops the state from being built: it reads as none (and an
annotation that does not parse is logged, as a user wrote it), so one bad object cannot block a cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.reservations import annotated_reservation
from kai_scheduler.model.snapshot import JobTimes

log = logging.getLogger(__name__)


def creation_key(obj: JsonObject, key: str) -> tuple[float, str]:
    """Its place in creation order: `creationTimestamp` (none or unreadable: first), then namespace/name."""
    stamp = metadata_of(obj).get("creationTimestamp")
    try:
        seconds = parse_rfc3339(str(stamp)).timestamp() if stamp else 0.0
    except ValueError:
        seconds = 0.0
    return (seconds, key)


def incarnation_ended(previous: JsonObject, current: JsonObject | None, key: str) -> bool:
    """The object is gone, or was deleted and made again (another creation time, another rank)."""
    return current is None or creation_key(current, key) != creation_key(previous, key)


def stamp_at(clock: SessionClock, obj: JsonObject, field: str) -> float | None:
    """One of its metadata's timestamps on the session clock (None: none, or not a time)."""
    stamp = metadata_of(obj).get(field)
    try:
        return clock.seconds(str(stamp)) if stamp else None
    except ValueError:
        return None


def annotation_time(clock: SessionClock, annotations: Mapping[str, str], name: str, job: str) -> float | None:
    """A PodGroup time annotation on the session clock (None: none, or not RFC 3339, which is logged)."""
    raw = annotations.get(name)
    if not raw:
        return None
    try:
        return clock.seconds(raw)
    except ValueError:
        log.warning("PodGroup %s: ignoring annotation %s=%r (not RFC 3339)", job, name, raw)
        return None


def pod_group_times(clock: SessionClock, annotations: Mapping[str, str], job: str) -> JobTimes:
    """A PodGroup's job times from its annotations: KAI's last start, staleness and last eviction, and its
    reservation (`reservations.py`)."""
    return JobTimes(
        annotation_time(clock, annotations, c.LAST_START_TIMESTAMP_ANNOTATION, job),
        annotation_time(clock, annotations, c.STALE_PODGROUP_TIMESTAMP_ANNOTATION, job),
        annotation_time(clock, annotations, c.LAST_EVICTION_TIMESTAMP_ANNOTATION, job),
        annotated_reservation(clock, annotations, job),
    )


__all__ = ["annotation_time", "creation_key", "incarnation_ended", "pod_group_times", "stamp_at"]
