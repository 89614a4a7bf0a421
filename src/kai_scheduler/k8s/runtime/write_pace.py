"""How often a summary status may be written: `WritePace` spaces the writes of each object's status.

A Queue's status sums what many objects hold (its PodGroups' allocations and requests, its fair share
in the scheduler's division), so while pods stream in it changes every second. Writing it each time it
changes costs the API server a write per queue a second whatever the cluster's size (issue #23: 0.12
writes a pod at 10,000 pods, the only write that is not once per pod). A production controller writes
such a status on a period, as the kubelet writes a node's status on one. Here a changed status is
written

* at once when nothing was written for a `period` (30 s): a single change shows within the pass that
  sees it;
* once it has held still for `quiet` seconds (2 s): the end of a burst shows soon after it ends;
* else, while it keeps changing, when the `period` since the last write is over, with the latest value.

So a busy cluster's queues cost a write each per writer and period (10,000 pods streaming into 11 queues
for a minute: under 0.01 writes a pod, so that a pod's six writes stay six to two decimals; a 10 s
period gives about 0.011), and the value written last is always the current one. A queue's status seen
by `kubectl kai queues` lags by up to a period only while its pods keep changing; what reads the figures
live (the queue metrics, the scheduler's own decisions) reads them in memory, not from the status.
"""

from __future__ import annotations

import time
from collections.abc import Callable

QUEUE_STATUS_PERIOD = 30.0
"""Seconds between two writes of one queue's status, per writer (the queue status controller's fields;
the scheduler's `fairShare`), while it keeps changing."""
QUEUE_STATUS_QUIET = 2.0
"""Seconds a changed queue status holds still before it is written within the period."""


class WritePace:
    """When each object's status may be written next (`clock`: monotonic seconds); see the module doc."""

    def __init__(
        self,
        period: float = QUEUE_STATUS_PERIOD,
        quiet: float = QUEUE_STATUS_QUIET,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period = period
        self.quiet = quiet
        self.clock = clock
        self._last: dict[str, float] = {}  # key -> when it was last written
        self._seen: dict[str, tuple[object, float]] = {}  # key -> the value to write, since when

    def wait(self, key: str, value: object) -> float:
        """Seconds until `key`'s status, now to be `value`, may be written (0: now), if it stays so."""
        now = self.clock()
        seen = self._seen.get(key)
        if seen is None or seen[0] != value:
            seen = self._seen[key] = (value, now)
        last = self._last.get(key)
        if last is None:
            return 0.0
        return max(0.0, min(last + self.period, seen[1] + self.quiet) - now)

    def wrote(self, key: str) -> None:
        self._last[key] = self.clock()

    def unwrote(self, key: str) -> None:
        """A write that failed does not count: the next try may go at once."""
        self._last.pop(key, None)

    def keep(self, keys: set[str] | frozenset[str]) -> None:
        """Forget the objects not in `keys` (gone)."""
        for table in (self._last, self._seen):
            for key in [k for k in table if k not in keys]:
                del table[key]

    def forget(self) -> None:
        self._last.clear()
        self._seen.clear()


__all__ = ["QUEUE_STATUS_PERIOD", "QUEUE_STATUS_QUIET", "WritePace"]
