"""The live components' reconcile loops as Prometheus metrics, under the names controller-runtime gives
its controllers' and their work queues' (KAI's binder, pod grouper, status controllers and node scale
adjuster are controller-runtime controllers), read from each `Reconciler`'s `ReconcileStats` at every
scrape. The `controller` label (and the queue's `name`, as controller-runtime sets both) is the
reconciler's `controller`: KAI's counterpart's name.

- `controller_runtime_reconcile_total{controller,result}`: reconciles by outcome, `success`, `requeue_after`
  (a `Result(requeue_after=s)`, s > 0), `requeue` (s <= 0), `error` (retried or permanent);
- `controller_runtime_reconcile_errors_total{controller}`, of which
  `controller_runtime_terminal_reconcile_errors_total{controller}` were permanent (`PermanentError`);
- `controller_runtime_reconcile_time_seconds{controller}`: a histogram, controller-runtime's buckets;
- `controller_runtime_max_concurrent_reconciles{controller}` (workers) and
  `controller_runtime_active_workers{controller}` (keys being reconciled);
- `workqueue_depth{name,controller,priority}` (keys waiting for a worker, not those due later; priority
  empty, as controller-runtime's queue without priorities), `workqueue_adds_total{name,controller}` and
  `workqueue_retries_total{name,controller}` (failures queued again after a backoff).

What our loop does not measure is not exported: panics and timeouts (a reconcile has no deadline here),
how long keys wait in the queue, and how long work in progress has run.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from kai_scheduler.k8s.runtime.reconciler import RECONCILE_TIME_BUCKETS, Reconciler, ReconcileStats


def reconcile_results(stats: ReconcileStats) -> dict[str, int]:
    """Reconciles by controller-runtime's `result` label."""
    requeued = stats.requeued_after + stats.requeued
    return {
        "success": stats.reconciled - requeued,
        "requeue_after": stats.requeued_after,
        "requeue": stats.requeued,
        "error": stats.retried + stats.failed,
    }


class ReconcileMetrics:
    """The collector of one registry over the reconcilers `export` adds to it."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._reconcilers: dict[str, Reconciler] = {}
        registry.register(self)

    def add(self, reconciler: Reconciler) -> None:
        """Export `reconciler`'s stats under its `controller` name, or its own `name` where another of the
        process has that controller name already (KAI runs each controller in a process of its own; the
        pod grouper and the scale adjuster are both `pod` there)."""
        label = reconciler.controller
        if self._reconcilers.get(label, reconciler) is not reconciler:
            label = reconciler.name
        self._reconcilers[label] = reconciler

    def collect(self) -> Iterator[Metric]:
        controller = ["controller"]
        queue = ["name", "controller"]
        total = CounterMetricFamily(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            labels=[*controller, "result"],
        )
        errors = CounterMetricFamily(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            labels=controller,
        )
        terminal = CounterMetricFamily(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            labels=controller,
        )
        times = HistogramMetricFamily(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            labels=controller,
        )
        workers = GaugeMetricFamily(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            labels=controller,
        )
        active = GaugeMetricFamily(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            labels=controller,
        )
        depth = GaugeMetricFamily(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            labels=[*queue, "priority"],
        )
        adds = CounterMetricFamily(
            "workqueue_adds", "Total number of adds handled by workqueue", labels=queue
        )
        retries = CounterMetricFamily(
            "workqueue_retries", "Total number of retries handled by workqueue", labels=queue
        )
        for name, reconciler in sorted(self._reconcilers.items()):
            stats = reconciler.reconcile_stats
            for result, count in reconcile_results(stats).items():
                total.add_metric([name, result], count)
            errors.add_metric([name], stats.retried + stats.failed)
            terminal.add_metric([name], stats.failed)
            times.add_metric([name], _buckets(stats), sum_value=stats.times.total)
            workers.add_metric([name], reconciler.workers)
            active.add_metric([name], stats.in_progress)
            depth.add_metric([name, name, ""], stats.depth)
            adds.add_metric([name, name], stats.adds)
            retries.add_metric([name, name], stats.retried)
        yield from (total, errors, terminal, times, workers, active, depth, adds, retries)


def _buckets(stats: ReconcileStats) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs, `+Inf` last."""
    pairs: list[tuple[str, float]] = []
    running = 0
    for bound, count in zip((*RECONCILE_TIME_BUCKETS, math.inf), stats.times.counts, strict=True):
        running += count
        pairs.append(("+Inf" if math.isinf(bound) else repr(float(bound)), running))  # as prometheus-client
    return pairs


_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, ReconcileMetrics] = weakref.WeakKeyDictionary()


def export(registry: CollectorRegistry, reconciler: Reconciler) -> None:
    """Serve `reconciler`'s metrics from `registry` (one collector per registry, shared by the process's
    components)."""
    metrics = _BY_REGISTRY.get(registry)
    if metrics is None:
        metrics = _BY_REGISTRY[registry] = ReconcileMetrics(registry)
    metrics.add(reconciler)


__all__ = ["ReconcileMetrics", "export", "reconcile_results"]
