"""reservation: capacity held for jobs that cannot start now, and backfill onto it (issue #24).

Not one of KAI's plugins (KAI has none: its issues #1969 and #1987 ask for it); off unless configured.
See `plugin` for its arguments and `book` for what a hold is; the earliest start is found by the allocate
action's `start_planner`.
"""

from kai_scheduler.plugins.reservation.plugin import ReservationPlugin

__all__ = ["ReservationPlugin"]
