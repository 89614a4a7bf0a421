"""The `reservation` plugin: registers the cycle's `HoldBook` on the session (allocate tells it what it
places and fails to place), its node filter, and at the close hands the session what changed.

Arguments (KAI's configuration format, a tier's plugin): `maxReservations`, how many jobs may hold
capacity at once (the first that find no room in allocate's order; default 1).

How long pods run comes from the edge (`ClusterSnapshot.run_estimates`: a duration the user gave, else
what similar completed pods took); without estimates, no pod has an expected end: a job may still hold
capacity if it fits once releasing pods are gone, and nothing is backfilled.
"""

from __future__ import annotations

from typing import Any

from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.plugins.arguments import number
from kai_scheduler.plugins.reservation.book import REJECTION, HoldBook


class ReservationPlugin:
    name = "reservation"

    def __init__(self, arguments: dict[str, Any]) -> None:
        most = number(self.name, arguments, "maxReservations", 1)
        if most < 1 or not float(most).is_integer():
            given = arguments.get("maxReservations")
            raise ValueError(
                f"{self.name}.arguments.maxReservations: expected a whole number of at least 1, got {given!r}"
            )
        self.max_reservations = int(most)
        self._book: HoldBook | None = None

    def on_session_open(self, session: Session) -> None:
        estimates = session.snapshot.run_estimates or RunEstimates()
        book = self._book = HoldBook(session, estimates, self.max_reservations)
        points = session.points
        points.holds = book
        points.task_predicates.append(
            NamedPredicate(self.name, REJECTION, book.nodes_passing, book.depends_on)
        )
        points.on_allocate.append(book.on_allocate)
        points.on_deallocate.append(book.on_deallocate)

    def on_session_close(self, session: Session) -> None:
        book = self._book
        if book is None:
            return
        session.reservation_updates = book.updates()
        session.backfilled = book.backfilled()
        for time in book.wake_times():
            session.wake_at(time)
        self._book = None
