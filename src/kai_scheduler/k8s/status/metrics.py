"""The queue controller's Prometheus metrics, with KAI's exact names (reference §8): `kai_queue_info` and each
queue's deserved GPUs, quota and allocated resources, with extra labels copied from queue labels (KAI's
`queueLabelToMetricLabel`). Quota in CPU cores and memory in bytes (the Queue spec holds millicores and MB).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from prometheus_client import CollectorRegistry, Gauge

from kai_scheduler.api.constants import (
    CPU_RESOURCE,
    GPU_RESOURCE,
    MEMORY_RESOURCE,
    QUEUE_MEMORY_UNIT_BYTES,
)
from kai_scheduler.api.objects import Queue, is_unlimited

MILLICORES_PER_CORE = 1000


class QueueMetrics:
    """The queue controller's metrics: one label set per queue, replaced on each `observe_queues`.

    `label_map` copies queue labels into metric labels (queue label key -> metric label name, KAI's
    `queueLabelToMetricLabel`); `default_label_values` gives the value when a queue lacks the label
    (queue label key -> value, KAI's `queueLabelToDefaultMetricValue`; otherwise empty)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        namespace: str = "kai",
        label_map: Mapping[str, str] | None = None,
        default_label_values: Mapping[str, str] | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.label_map = dict(label_map or {})
        self.default_label_values = dict(default_label_values or {})
        prefix = f"{namespace}_" if namespace else ""
        labels = ("queue_name", *self.label_map.values())

        def gauge(name: str, documentation: str) -> Gauge:
            return Gauge(prefix + name, documentation, labelnames=labels, registry=self.registry)

        self.info = gauge("queue_info", "Queues known to the queue controller (always 1)")
        self.deserved_gpus = gauge("queue_deserved_gpus", "GPU quota (deserved GPUs) of a queue")
        self.quota_cpu_cores = gauge("queue_quota_cpu_cores", "CPU quota of a queue, in cores")
        self.quota_memory_bytes = gauge("queue_quota_memory_bytes", "Memory quota of a queue, in bytes")
        self.allocated_gpus = gauge("queue_allocated_gpus", "GPUs allocated to a queue's pods")
        self.allocated_cpu_cores = gauge("queue_allocated_cpu_cores", "CPU cores allocated to a queue's pods")
        self.allocated_memory_bytes = gauge(
            "queue_allocated_memory_bytes", "Memory allocated to a queue's pods"
        )
        self._label_sets: set[tuple[str, ...]] = set()

    def _gauges(self) -> tuple[Gauge, ...]:
        return (
            self.info,
            self.deserved_gpus,
            self.quota_cpu_cores,
            self.quota_memory_bytes,
            self.allocated_gpus,
            self.allocated_cpu_cores,
            self.allocated_memory_bytes,
        )

    def observe_queues(
        self, queues: Iterable[Queue], allocated: Mapping[str, Mapping[str, Fraction | float | int]]
    ) -> None:
        """Set every queue's gauges; `allocated` is queue name -> its status `allocated` resource list
        (cpu in cores, memory in bytes, nvidia.com/gpu in GPUs). Queues gone since the last call are
        dropped. A quota of -1 (unlimited) is reported as -1 in every unit."""
        current: set[tuple[str, ...]] = set()
        for queue in queues:
            name = queue.metadata.name
            values = tuple(
                queue.metadata.labels.get(key, self.default_label_values.get(key, ""))
                for key in self.label_map
            )
            label_set = (name, *values)
            current.add(label_set)
            quota = queue.spec.resources
            used = allocated.get(name, {})
            self.info.labels(*label_set).set(1)
            self.deserved_gpus.labels(*label_set).set(quota.gpu.quota)
            self.quota_cpu_cores.labels(*label_set).set(_scaled(quota.cpu.quota, 1 / MILLICORES_PER_CORE))
            self.quota_memory_bytes.labels(*label_set).set(
                _scaled(quota.memory.quota, QUEUE_MEMORY_UNIT_BYTES)
            )
            self.allocated_gpus.labels(*label_set).set(float(used.get(GPU_RESOURCE, 0)))
            self.allocated_cpu_cores.labels(*label_set).set(float(used.get(CPU_RESOURCE, 0)))
            self.allocated_memory_bytes.labels(*label_set).set(float(used.get(MEMORY_RESOURCE, 0)))
        for label_set in self._label_sets - current:
            for gauge in self._gauges():
                gauge.remove(*label_set)
        self._label_sets = current


def _scaled(amount: float, factor: float) -> float:
    return amount if is_unlimited(amount) else amount * factor


__all__ = ["QueueMetrics"]
