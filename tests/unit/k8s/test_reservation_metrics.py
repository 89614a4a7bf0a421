"""Reservation and backfill's metrics (issue #24): the GPUs all reservations hold, and the pod groups a
cycle backfilled, by queue, counted up cycle after cycle."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.k8s.scheduler.reservation_metrics import backfilled_by_queue


def test_reserved_gpus_and_backfilled_pod_groups_by_queue() -> None:
    metrics = SchedulerMetrics()

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert sample("kai_cluster_reserved_gpus") == 0
    assert sample("kai_backfilled_pod_groups_total", queue_name="a") is None
    jobs = {key: SimpleNamespace(queue=queue) for key, queue in (("t/x", "a"), ("t/y", "a"), ("t/z", "b"))}
    snapshot = cast(Any, SimpleNamespace(jobs=jobs))
    result = SessionResult([], {}, {}, backfilled=["t/x", "t/z", "t/gone"])  # a job gone meanwhile: none
    assert backfilled_by_queue(snapshot, result) == {"a": 1, "b": 1}
    metrics.reservations.observe(16.0, backfilled_by_queue(snapshot, result))
    metrics.reservations.observe(8.0, {"a": 2})
    assert sample("kai_cluster_reserved_gpus") == 8
    assert sample("kai_backfilled_pod_groups_total", queue_name="a") == 3
    assert sample("kai_backfilled_pod_groups_total", queue_name="b") == 1
