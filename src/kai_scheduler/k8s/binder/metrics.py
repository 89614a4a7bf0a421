"""The binder's Prometheus metrics. KAI's binder exposes only controller-runtime's defaults; these three
counters, read from the binder's own `BinderStats` at each scrape, are what the chart's dashboard shows
of binding: `kai_binder_binds_total` (BindRequests carried out: the pod bound, or found bound by an
earlier attempt), `kai_binder_bind_failures_total` (failed attempts, each retried with backoff) and
`kai_binder_failed_bind_requests_total` (requests given up after `backoffLimit` attempts, or at once
when they cannot succeed; the scheduler then places the pod anew)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric

from kai_scheduler.k8s.binder.binder import BinderStats


class BinderMetrics:
    """A collector over `stats`, registered in `registry` (one binder per registry)."""

    def __init__(self, registry: CollectorRegistry, stats: BinderStats, *, namespace: str = "kai") -> None:
        self.stats = stats
        self.prefix = f"{namespace}_" if namespace else ""
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        for name, documentation, value in (
            ("binder_binds", "BindRequests carried out (the pod bound)", stats.binds + stats.already_bound),
            ("binder_bind_failures", "Failed bind attempts (each retried with backoff)", stats.failures),
            ("binder_failed_bind_requests", "BindRequests given up (phase Failed)", stats.failed),
        ):
            yield CounterMetricFamily(self.prefix + name, documentation, value=value)


__all__ = ["BinderMetrics"]
