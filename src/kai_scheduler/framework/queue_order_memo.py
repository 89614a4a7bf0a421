"""Queue order keys carried from one session to the next (issue #23, point 1).

The proportion plugin remembers each queue order key by the queue, its allocation and the request of the
job it ranks the queue by (`ProportionPlugin.queue_order_key`): the rest of what the key reads (the
queue's fair share, deserved quota, allocatable shares, priority and creation rank) is fixed for the
session. A session starts with no key known, so a cycle after one change ranks each queue afresh for every
shape its jobs ask for: some 2,600 keys a cycle at 5,000 nodes, a tenth of the walk over the waiting jobs.
`CarriedQueueOrder` hands a session the last session's keys of the queues whose fixed inputs are the same
and whose allocation is the one they were worked out at: the keys the session would work out again.
"""

from __future__ import annotations

from typing import Any

from kai_scheduler.model.jobs import JobInfo

# (queue name, allocated gpu, cpu, memory, requested gpu, cpu, memory)
OrderMemo = tuple[str, float, float, float, float, float, float]


class CarriedQueueOrder:
    """The queue order keys of the last session, for the next (see the module doc)."""

    __slots__ = ("_fixed", "_keys", "read_numbers", "reads_kept", "weakly_ordered")

    def __init__(self) -> None:
        self._fixed: dict[str, tuple[Any, ...]] = {}  # per queue: what its keys read besides the memo
        self._keys: dict[OrderMemo, tuple[Any, ...]] = {}
        # What the queue order reads of each job, carried too (`ProportionPlugin._order_reads`: each
        # number kept with the job's version and the smallest GPU memory it was read at).
        self.read_numbers: dict[tuple[float, float, float], int] = {}
        self.reads_kept: dict[JobInfo, tuple[int, float, int]] = {}
        # Whether siblings of these allocatable shares are ranked by a strict weak ordering
        # (`ProportionPlugin._siblings_weakly_ordered`: it reads nothing else), carried too.
        self.weakly_ordered: dict[tuple[tuple[float, float, float], ...], bool] = {}

    def keys_for(
        self, fixed: dict[str, tuple[Any, ...]], allocated: dict[str, tuple[float, float, float]]
    ) -> dict[OrderMemo, tuple[Any, ...]]:
        """The keys a session whose queues read `fixed` and start at `allocated` (both by queue name) may
        give again; the session adds its own to the same dict, and they are carried to the next."""
        current = {
            name: allocation
            for name, allocation in allocated.items()
            if self._fixed.get(name) == fixed.get(name)
        }
        self._keys = {memo: key for memo, key in self._keys.items() if current.get(memo[0]) == memo[1:4]}
        self._fixed = fixed
        return self._keys
