"""How often a summary status may be written: `WritePace` spaces the writes of each object's status.

A Queue's status sums what many objects hold (its PodGroups' allocations and requests, its fair share
in the scheduler's division), so while pods stream in it changes every second. Writing it each time it
changes costs the API server a write per queue a second whatever the cluster's size (issue #23: 0.12
writes a pod at 10,000 pods, the only write that is not once per pod). A production controller writes
such a status on a period, as the kubelet writes a node's status at most every 10 seconds: the first
change after a quiet period is written at once (a single change shows within the pass that saw it),
and while changes keep coming, at most one write a `period`, of the latest value; the value written
last is always the current one, because a held write is retried once its period is over. What reads
the figures live (the queue metrics, the scheduler's own decisions) reads them in memory, not from the
status.
"""

from __future__ import annotations

import time
from collections.abc import Callable

QUEUE_STATUS_PERIOD = 10.0
"""Seconds between two writes of one queue's status, per writer (the queue status controller's fields;
the scheduler's `fairShare`), while it keeps changing."""


class WritePace:
    """When each object's status may be written next: at once, or `period` seconds after the last write
    (`clock`: monotonic seconds)."""

    def __init__(self, period: float = QUEUE_STATUS_PERIOD, clock: Callable[[], float] = time.monotonic):
        self.period = period
        self.clock = clock
        self._last: dict[str, float] = {}  # key -> when it was last written

    def wait(self, key: str) -> float:
        """Seconds until `key` may be written (0: now)."""
        last = self._last.get(key)
        if last is None:
            return 0.0
        return max(0.0, last + self.period - self.clock())

    def wrote(self, key: str) -> None:
        self._last[key] = self.clock()

    def unwrote(self, key: str) -> None:
        """A write that failed does not count: the next try may go at once."""
        self._last.pop(key, None)

    def keep(self, keys: set[str] | frozenset[str]) -> None:
        """Forget the objects not in `keys` (gone)."""
        for key in [k for k in self._last if k not in keys]:
            del self._last[key]

    def forget(self) -> None:
        self._last.clear()


__all__ = ["QUEUE_STATUS_PERIOD", "WritePace"]
