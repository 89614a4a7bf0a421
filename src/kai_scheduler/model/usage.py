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
    """Resource-seconds per queue and of the whole cluster, in time buckets (see the module doc)."""

    def __init__(self, params: UsageParams) -> None:
        self.params = params
        self._buckets: dict[int, _Bucket] = {}

    def record(
        self, start: float, end: float, allocated: Mapping[str, Resources], capacity: Resources
    ) -> None:
        """Queues held `allocated` (and the cluster had `capacity`) from `start` to `end`."""
        if end <= start:
            return
        step = self.params.resolution
        cap = [capacity.get(r) for r in RESOURCE_NAMES]
        held = {name: [res.get(r) for r in RESOURCE_NAMES] for name, res in allocated.items() if _any(res)}
        index = math.floor(start / step)
        while index * step < end:
            seconds = min(end, (index + 1) * step) - max(start, index * step)
            if seconds > 0:
                bucket = self._buckets.setdefault(index, _Bucket())
                for i, value in enumerate(cap):
                    bucket.capacity[i] += value * seconds
                for name, values in held.items():
                    sums = bucket.queues.setdefault(name, [0.0] * len(RESOURCE_NAMES))
                    for i, value in enumerate(values):
                        sums[i] += value * seconds
            index += 1

    def usage(self, now: float) -> dict[str, Resources]:
        """Each queue's share of the cluster's capacity over the window that ends at `now` (0..1 per
        resource); older buckets are forgotten."""
        begin = self._window_start(now)
        step = self.params.resolution
        for index in [i for i in self._buckets if (i + 1) * step <= begin]:
            del self._buckets[index]
        capacity = [0.0] * len(RESOURCE_NAMES)
        used: dict[str, list[float]] = {}
        for index, bucket in self._buckets.items():
            if index * step >= now:
                continue
            weight = self._decay(now - (index + 0.5) * step)
            for i, value in enumerate(bucket.capacity):
                capacity[i] += weight * value
            for name, values in bucket.queues.items():
                sums = used.setdefault(name, [0.0] * len(RESOURCE_NAMES))
                for i, value in enumerate(values):
                    sums[i] += weight * value
        return {
            name: Resources(
                *(sums[i] / capacity[i] if capacity[i] > 0 else 0.0 for i in range(len(RESOURCE_NAMES)))
            )
            for name, sums in used.items()
        }

    def _window_start(self, now: float) -> float:
        size = self.params.window_size
        if self.params.window_type == "tumbling":
            start = self.params.tumbling_start
            return start + math.floor((now - start) / size) * size
        return now - size

    def _decay(self, age: float) -> float:
        half_life = self.params.half_life
        return 0.5 ** (max(age, 0.0) / half_life) if half_life > 0 else 1.0


def _any(resources: Resources) -> bool:
    return any(resources.get(r) > 0 for r in RESOURCE_NAMES)


class UsageRecorder:
    """What an edge does each cycle: `before_cycle(now)` records the allocations held since the last
    cycle and returns the usage for this one's state; `after_cycle` remembers what the queues hold now
    (after the cycle's decisions) until the next cycle."""

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
