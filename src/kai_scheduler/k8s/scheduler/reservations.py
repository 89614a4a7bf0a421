"""Reservation and backfill on a live cluster's PodGroups (issue #24, `plugins.reservation`): a job's
reservation as the annotation `kai.scheduler/reservation`, the events that tell its owner it was made,
moved or let go, and the GPUs all reservations hold (for the `kai_cluster_reserved_gpus` gauge).

The annotation is what a restarted scheduler starts from (`state.py` reads it into the job's times), in
the format every edge shares (`model.reservation_annotation`). It is written only when what it says
changes: other nodes or GPUs, or a start that moved by a second or more from the written one (issue #23
counts API writes per pod; a start a few milliseconds later each cycle is no news). What it said last
stays the reference, so small moves do not add up unwritten.

Events (Normal, on the PodGroup, aggregated as client-go's recorder does): `Reserved` when a job gets a
reservation, `ReservationMoved` when its nodes change (a start that moves on the same nodes is not an
event: start times are estimates and move with every job that ends early), and `ReservationReleased` when
it is let go without the job starting (a job that starts loses its reservation silently: its pods'
`Scheduled` events say it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.model.reservation_annotation import format_reservation, parse_reservation
from kai_scheduler.model.reservations import Reservation

log = logging.getLogger(__name__)

RESERVED = "Reserved"
RESERVATION_MOVED = "ReservationMoved"
RESERVATION_RELEASED = "ReservationReleased"

# A start that moved by less than this from the written one is not written again.
START_TOLERANCE = 1.0
_GPU_TOLERANCE = 1e-9


def origin_of(clock: SessionClock) -> datetime:
    """The session clock's second 0 as an instant."""
    return datetime.fromtimestamp(clock.start, tz=UTC)


def annotation_value(reservation: Reservation, clock: SessionClock) -> str:
    """The annotation's value. Its start is written to the microsecond (the session clock's second 0 is
    rarely a whole second): what reads it back, a restarted scheduler, gets the very start it held."""
    return format_reservation(reservation, origin_of(clock))


def read_annotation(text: str, clock: SessionClock) -> Reservation:
    """The reservation the annotation's value holds, on the session clock; ValueError (one line saying
    what is wrong) when it holds none."""
    return parse_reservation(text, origin_of(clock))


def annotated_reservation(
    clock: SessionClock, annotations: Mapping[str, str], job: str
) -> Reservation | None:
    """The PodGroup's reservation (None: none, or an annotation that holds none, which is logged on one
    line and ignored: a bad value never stops a cycle, and the next reservation made replaces it)."""
    raw = annotations.get(c.RESERVATION_ANNOTATION)
    if not raw:
        return None
    try:
        return read_annotation(raw, clock)
    except ValueError as error:
        log.warning("PodGroup %s: ignoring annotation %s: %s", job, c.RESERVATION_ANNOTATION, error)
        return None


def needs_writing(current: str | None, reservation: Reservation | None, clock: SessionClock) -> bool:
    """Whether the annotation, holding `current` (None: absent), must change to say `reservation` (None:
    removed): it says something else, or nothing readable."""
    if reservation is None or current is None:
        return reservation is not None or current is not None
    try:
        written = read_annotation(current, clock)
    except ValueError:
        return True
    return (
        written.nodes != reservation.nodes
        or abs(written.gpus - reservation.gpus) > _GPU_TOLERANCE
        or abs(written.start - reservation.start) >= START_TOLERANCE
    )


def _gpus(amount: float) -> str:
    return f"{amount:g} GPU{'' if amount == 1 else 's'}"


def event_of(
    old: Reservation | None, new: Reservation | None, started: bool, clock: SessionClock
) -> tuple[str, str] | None:
    """The (reason, message) of the event for a job whose reservation went from `old` to `new`
    (`started`: the job runs now), or None."""
    if new is not None and (old is None or old.nodes != new.nodes):
        where = f"nodes {', '.join(new.nodes)}, expected to start at {clock.stamp(new.start)}"
        if old is None:
            return RESERVED, f"{_gpus(new.gpus)} reserved on {where}"
        return RESERVATION_MOVED, f"reservation moved from nodes {', '.join(old.nodes)} to {where}"
    if old is not None and new is None and not started:
        held = f"{_gpus(old.gpus)} on nodes {', '.join(old.nodes)}"
        return RESERVATION_RELEASED, f"reservation of {held} let go before the pod group started"
    return None


class HeldReservations:
    """The GPUs each job's reservation holds, as the loop's bookkeeping last saw its times."""

    def __init__(self) -> None:
        self.gpus_by_job: dict[str, float] = {}

    def note(self, job: str, reservation: Reservation | None) -> None:
        if reservation is None:
            self.gpus_by_job.pop(job, None)
        else:
            self.gpus_by_job[job] = reservation.gpus

    def gpus(self) -> float:
        return sum(self.gpus_by_job.values())


__all__ = [
    "RESERVATION_MOVED",
    "RESERVATION_RELEASED",
    "RESERVED",
    "START_TOLERANCE",
    "HeldReservations",
    "annotated_reservation",
    "annotation_value",
    "event_of",
    "needs_writing",
    "origin_of",
    "read_annotation",
]
