"""Reservation and backfill's metrics (issue #24; this project's, not KAI's: KAI has no reservations),
under the scheduler's metrics namespace (`kai_` by default), set after each cycle the loop carries out:

* `kai_cluster_reserved_gpus`: the GPUs that reservations hold for pod groups that wait, summed over
  every reservation the scheduler keeps (beside the `kai_cluster_*_gpus` of `cycle_gauges.py`; not the
  binder's GPU reservation pods, which are shared GPUs in use).
* `kai_backfilled_pod_groups_total{queue_name}`: pod groups placed on reserved capacity because they are
  expected to end before the reservation starts (`SessionResult.backfilled`), by their queue.

Without the `reservation` plugin the gauge stays 0 and the counter has no sample.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.snapshot import ClusterSnapshot


class ReservationMetrics:
    def __init__(self, registry: CollectorRegistry, prefix: str) -> None:
        self.reserved_gpus = Gauge(
            prefix + "cluster_reserved_gpus",
            "GPUs held by reservations for pod groups that wait (reservation plugin)",
            registry=registry,
        )
        self.backfilled = Counter(
            prefix + "backfilled_pod_groups",  # exposed as ..._backfilled_pod_groups_total
            "Pod groups placed on reserved capacity, expected to end before the reservation starts",
            labelnames=("queue_name",),
            registry=registry,
        )

    def observe(self, reserved_gpus: float, backfilled: Mapping[str, int]) -> None:
        """The GPUs all reservations hold after a cycle, and queue -> the pod groups it backfilled."""
        self.reserved_gpus.set(reserved_gpus)
        for queue, count in backfilled.items():
            self.backfilled.labels(queue_name=queue).inc(count)


def backfilled_by_queue(snapshot: ClusterSnapshot, result: SessionResult) -> dict[str, int]:
    """Queue -> the pod groups the cycle backfilled."""
    counts: dict[str, int] = {}
    for key in result.backfilled:
        job = snapshot.jobs.get(key)
        if job is not None:
            counts[job.queue] = counts.get(job.queue, 0) + 1
    return counts


__all__ = ["ReservationMetrics", "backfilled_by_queue"]
