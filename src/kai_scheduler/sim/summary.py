"""`summary.json` of `simulate --report`: a run's numbers for people comparing policies (docs/reports.md).

Pure: a `Timeline` (the result document replayed) in, a JSON-able dict out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kai_scheduler.sim.timeline import Timeline, integral, time_weighted_mean


def _clean(value: float) -> float:
    """Round away float noise (as the result document does) without hiding real fractions."""
    rounded = round(value, 9)
    return 0.0 if rounded == 0 else rounded


def distribution(values: Sequence[float]) -> dict[str, Any]:
    """Count, mean, median and 99th percentile (numpy's linear interpolation); null when empty."""
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p99": None}
    array = np.asarray(values, dtype=float)
    return {
        "count": len(values),
        "mean": _clean(float(array.mean())),
        "p50": _clean(float(np.percentile(array, 50))),
        "p99": _clean(float(np.percentile(array, 99))),
    }


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index, (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when one has all;
    null for no values, 1 when all are zero (nobody got anything, equally)."""
    if not values:
        return None
    array = np.asarray(values, dtype=float)
    squares = float(np.sum(array * array))
    if squares == 0:
        return 1.0
    return float(np.sum(array)) ** 2 / (len(values) * squares)


def waits(timeline: Timeline) -> list[float]:
    """Seconds from arrival to start of each pod group that started in this run."""
    return [g.start - g.arrival for g in timeline.groups if g.start is not None and not g.preexisting]


def completion_times(timeline: Timeline) -> list[float]:
    """Seconds from arrival to completion of each pod group that started and completed in this run."""
    return [
        g.completion - g.arrival for g in timeline.groups if g.completion is not None and not g.preexisting
    ]


def queue_figures(timeline: Timeline) -> list[dict[str, Any]]:
    """Each leaf queue's time-weighted mean allocated GPUs and fair share, and their ratio (null when the
    queue was owed nothing)."""
    out = []
    for queue in timeline.leaf_queues:
        allocated = time_weighted_mean(timeline.times, timeline.allocated[queue], timeline.end)
        share = time_weighted_mean(timeline.fair_share_times, timeline.fair_share[queue], timeline.end)
        out.append(
            {
                "name": queue,
                "allocatedGpu": _clean(allocated),
                "fairShareGpu": _clean(share),
                "allocatedOverFairShare": _clean(allocated / share) if share > 0 else None,
                "gpuHours": _clean(integral(timeline.times, timeline.allocated[queue], timeline.end) / 3600),
            }
        )
    return out


def summary(timeline: Timeline) -> dict[str, Any]:
    end, capacity = timeline.end, timeline.capacity
    allocated = time_weighted_mean(timeline.times, timeline.total_allocated, end)
    queues = queue_figures(timeline)
    ratios = [q["allocatedOverFairShare"] for q in queues if q["allocatedOverFairShare"] is not None]
    jain = jain_index(ratios)
    started = sum(1 for g in timeline.groups if g.start is not None and not g.preexisting)
    return {
        "time": end,
        "gpuCapacity": capacity,
        "gpuAllocationRatio": _clean(allocated / capacity) if capacity > 0 else None,
        "waitSeconds": distribution(waits(timeline)),
        "jctSeconds": distribution(completion_times(timeline)),
        "podGroups": {
            "total": len(timeline.groups),
            "started": started,
            "completed": sum(1 for g in timeline.groups if g.completion is not None and not g.preexisting),
            "runningFromInput": sum(1 for g in timeline.groups if g.preexisting),
        },
        "evictions": len(timeline.evictions),
        "gpuHoursLostToPreemption": _clean(sum(e.ran_seconds * e.gpu for e in timeline.evictions) / 3600),
        "jainFairness": _clean(jain) if jain is not None else None,
        "fragmentedGpus": {
            "mean": _clean(time_weighted_mean(timeline.times, timeline.fragmented, end)),
            "max": _clean(float(timeline.fragmented.max())) if timeline.fragmented.size else 0.0,
        },
        "queues": queues,
    }


def what_ran(timeline: Timeline) -> dict[str, Any]:
    """The few numbers the text report ends a completed run with: the pod groups that ran, their mean and
    longest wait, the evictions and the GPU-hours used."""
    waited = waits(timeline)
    return {
        "podGroups": sum(1 for g in timeline.groups if g.start is not None and not g.preexisting),
        "waitMean": _clean(float(np.mean(waited))) if waited else None,
        "waitLongest": _clean(max(waited)) if waited else None,
        "evictions": len(timeline.evictions),
        "gpuHours": _clean(integral(timeline.times, timeline.total_allocated, timeline.end) / 3600),
    }
