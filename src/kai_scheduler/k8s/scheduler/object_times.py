"""An object's times as the scheduler's state reads them: its creation order key, and its timestamps and
PodGroup time annotations (and reservation) on the session clock.

A time that is missing or not RFC 3339 never stops the state from being built: it reads as none (and an
annotation that does not parse is logged, as a user wrote it), so one bad object cannot block a cycle.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping

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
    return (_creation_seconds(str(stamp)) if stamp else 0.0, key)


@functools.lru_cache(maxsize=1024)
def _creation_seconds(stamp: str) -> float:
    """A creation timestamp in seconds (unreadable: 0): read several times a pass over an object, and the
    objects created in one second share one text."""
    try:
        return parse_rfc3339(stamp).timestamp()
    except ValueError:
        return 0.0


def in_creation_order(keys: Iterable[str], cache: Mapping[str, JsonObject]) -> list[str]:
    """`keys` in the creation order of their objects in `cache` (a key without one first), for the ranks
    (`CreationRanks`) to be handed out in their own order: a batch of new objects handed in any other order
    (a set's) puts most of them between two others, and making room there moves other objects' ranks, which
    are then handed to the cache again (at 10,000 pods created over HTTP by 16 clients, some 27,000 moved
    ranks, each a pod looked at again and its job made again for nothing)."""

    def order(key: str) -> tuple[float, str]:
        obj = cache.get(key)
        return creation_key(obj, key) if obj is not None else (0.0, key)

    return sorted(keys, key=order)


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


__all__ = [
    "annotation_time",
    "creation_key",
    "in_creation_order",
    "incarnation_ended",
    "pod_group_times",
    "stamp_at",
]
