"""Time-based fairness: how much of the cluster each queue used recently (KAI's usage database).

KAI asks Prometheus for every queue's allocated resources over a window (sliding, or tumbling from a
start time), optionally decayed with a half-life, and divides by the cluster's capacity over the same
window. The proportion plugin then leans each over-quota round toward the queues that used less than
their weight says they should have (`shareWeight = w' + kValue * (w' - usage')`).

Here the edge keeps that history itself: after each cycle it records every queue's allocation and the
cluster's capacity for the time until the next cycle (`record`), in buckets of `resolution` seconds (the
resolution of KAI's range query), and asks for the usage when it builds the next cycle's state
(`usage`). Times are seconds on the edge's clock (simulated seconds, or the live session clock).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import RESOURCE_NAMES, Resources

WINDOW_TYPES: Final = ("sliding", "tumbling")
WEEK: Final = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class UsageParams:
    """KAI's `usageDBConfig.usageParams`, as far as they shape the numbers."""

    window_size: float = WEEK
    window_type: Literal["sliding", "tumbling"] = "sliding"
    # Tumbling windows start at this time (edge clock seconds) and every `window_size` after it.
    tumbling_start: float = 0.0
    half_life: float = 0.0  # <= 0: no decay
    resolution: float = 60.0


@dataclass(slots=True)
class _Bucket:
    capacity: list[float] = field(default_factory=lambda: [0.0] * len(RESOURCE_NAMES))  # resource-seconds
    queues: dict[str, list[float]] = field(default_factory=dict)  # queue -> resource-seconds


class UsageHistory:
    """Resource-seconds per queue and of the whole cluster, in time buckets (see the module doc).

    Besides the buckets (kept to forget them when they leave the window), it keeps their running sums,
    each bucket weighted by 2 ** ((its middle - origin) / half_life) (1 without decay): the decay at any
    later time is a common factor of a queue's and the cluster's sums, so it cancels in their ratio and
    `usage` costs one pass over the queues, not over the window. The origin moves forward before the
    exponents grow large."""

    def __init__(self, params: UsageParams) -> None:
        self.params = params
        self._buckets: dict[int, _Bucket] = {}
        self._origin = 0.0
        self._capacity = [0.0] * len(RESOURCE_NAMES)
        self._used: dict[str, list[float]] = {}

    def record(
        self, start: float, end: float, allocated: Mapping[str, Resources], capacity: Resources
    ) -> None:
        """Queues held `allocated` (and the cluster had `capacity`) from `start` to `end`."""
        if end <= start:
            return
        self._rebase(end)
        step = self.params.resolution
        cap = [capacity.get(r) for r in RESOURCE_NAMES]
        held = {name: [res.get(r) for r in RESOURCE_NAMES] for name, res in allocated.items() if _any(res)}
        index = math.floor(start / step)
        while index * step < end:
            seconds = min(end, (index + 1) * step) - max(start, index * step)
            if seconds > 0:
                weight = self._weight(index)
                bucket = self._buckets.setdefault(index, _Bucket())
                for i, value in enumerate(cap):
                    bucket.capacity[i] += value * seconds
                    self._capacity[i] += weight * value * seconds
                for name, values in held.items():
                    sums = bucket.queues.setdefault(name, [0.0] * len(RESOURCE_NAMES))
                    totals = self._used.setdefault(name, [0.0] * len(RESOURCE_NAMES))
                    for i, value in enumerate(values):
                        sums[i] += value * seconds
                        totals[i] += weight * value * seconds
            index += 1

    def usage(self, now: float) -> dict[str, Resources]:
        """Each queue's share of the cluster's capacity over the window that ends at `now` (0..1 per
        resource); older buckets are forgotten."""
        self._forget_before(self._window_start(now))
        capacity = self._capacity
        usage: dict[str, Resources] = {}
        for name, totals in self._used.items():
            shares = [
                max(totals[i], 0.0) / capacity[i] if capacity[i] > 0 else 0.0
                for i in range(len(RESOURCE_NAMES))
            ]
            if any(share > _NEGLIGIBLE for share in shares):
                usage[name] = Resources(*shares)
        return usage

    def _forget_before(self, begin: float) -> None:
        step = self.params.resolution
        for index in sorted(i for i in self._buckets if (i + 1) * step <= begin):
            bucket = self._buckets.pop(index)
            weight = self._weight(index)
            for i, value in enumerate(bucket.capacity):
                self._capacity[i] = max(self._capacity[i] - weight * value, 0.0)
            for name, values in bucket.queues.items():
                totals = self._used[name]
                for i, value in enumerate(values):
                    totals[i] -= weight * value
        if not self._buckets:
            # Nothing left: start the sums afresh rather than carry rounding residue.
            self._capacity = [0.0] * len(RESOURCE_NAMES)
            self._used.clear()

    def _weight(self, index: int) -> float:
        half_life = self.params.half_life
        if half_life <= 0:
            return 1.0
        return float(2.0 ** (((index + 0.5) * self.params.resolution - self._origin) / half_life))

    def _rebase(self, now: float) -> None:
        """Move the origin to `now` when the weights of new buckets would grow past 2 ** 256."""
        half_life = self.params.half_life
        if half_life <= 0 or (now - self._origin) / half_life < _REBASE_EXPONENT:
            return
        factor = 2.0 ** (-min((now - self._origin) / half_life, 1000.0))
        self._capacity = [value * factor for value in self._capacity]
        for totals in self._used.values():
            totals[:] = [value * factor for value in totals]
        self._origin = now

    def _window_start(self, now: float) -> float:
        size = self.params.window_size
        if self.params.window_type == "tumbling":
            start = self.params.tumbling_start
            return start + math.floor((now - start) / size) * size
        return now - size


_REBASE_EXPONENT = 256.0
_NEGLIGIBLE = 1e-12


def _any(resources: Resources) -> bool:
    return any(resources.get(r) > 0 for r in RESOURCE_NAMES)


class UsageRecorder:
    """What an edge does each cycle: `before_cycle(now)` records the allocations held since the last
    cycle and returns the usage for this one's state; `after_cycle` remembers what the queues hold now
    (after the cycle's decisions) until the next cycle; `interrupt` after a gap in its cycles."""

    def __init__(self, params: UsageParams) -> None:
        self.history = UsageHistory(params)
        self._held: tuple[float, dict[str, Resources], Resources] | None = None

    def before_cycle(self, now: float) -> dict[str, Resources]:
        if self._held is not None:
            since, allocated, capacity = self._held
            self.history.record(since, now, allocated, capacity)
        return self.history.usage(now)

    def after_cycle(self, now: float, queues: Iterable[QueueInfo], capacity: Resources) -> None:
        self._held = (now, {queue.name: queue.allocated.copy() for queue in queues}, capacity.copy())

    def interrupt(self) -> None:
        """The edge stopped deciding for a while (it lost leadership): what the queues held since its last
        cycle is unknown, so that stretch is left out of the history rather than charged to them."""
        self._held = None
