"""kube-state-metrics' node capacity series for tests that run a real Prometheus: the series the default
capacity queries of time-based fair share read (`framework/usage_config.py`), built from the fake API
server's nodes at every scrape.

with KubeStateExporter(server.store) as exporter:
    exporter.target   # host:port for Prometheus' static_configs
    exporter.scrapes  # [(time.time() of each scrape, the cluster's capacity per `resource` label)]

As kube-state-metrics v2 writes them: one `kube_node_status_capacity{node, resource, unit}` sample per node
and resource of the node's `status.capacity`, the resource name with `.`, `/` and `-` as `_`
(`nvidia_com_gpu`), the amount in the resource's base unit (`cpu` in cores, `memory` in bytes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_runner import ScrapeLog, Scrapes

from kai_fakeapi import Store
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.http_server import MetricsServer

CAPACITY = "kube_node_status_capacity"
_BYTES = ("memory", "ephemeral-storage", "hugepages-")


def resource_label(resource: str) -> str:
    """kube-state-metrics' label value for a resource name (`nvidia.com/gpu` -> `nvidia_com_gpu`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def unit(resource: str) -> str:
    if resource == "cpu":
        return "core"
    return "byte" if resource.startswith(_BYTES) else "integer"


def capacities(store: Store) -> Iterator[tuple[str, str, float]]:
    """(node, resource label, amount in the base unit) for every resource in the nodes' status.capacity."""
    for node in store.list("nodes"):
        for resource, amount in sorted(((node.get("status") or {}).get("capacity") or {}).items()):
            yield node["metadata"]["name"], resource, float(parse_quantity(amount))


class _NodeCapacity:
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            CAPACITY, "The capacity for different resources of a node.", labels=["node", "resource", "unit"]
        )
        for node, resource, amount in capacities(self.store):
            family.add_metric([node, resource_label(resource), unit(resource)], amount)
        yield family


class KubeStateExporter:
    """See the module doc."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.log = ScrapeLog(self.totals)
        registry = CollectorRegistry()
        registry.register(_NodeCapacity(store))
        registry.register(self.log)  # after the samples: a scrape's log entry says what it served
        self.server = MetricsServer(registry, host="127.0.0.1", port=0)

    def totals(self) -> dict[str, float]:
        """The cluster's capacity per `resource` label (what `sum(kube_node_status_capacity{...})` says)."""
        totals: dict[str, float] = {}
        for _, resource, amount in capacities(self.store):
            totals[resource_label(resource)] = totals.get(resource_label(resource), 0.0) + amount
        return totals

    @property
    def scrapes(self) -> Scrapes:
        return self.log.scrapes

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def __enter__(self) -> KubeStateExporter:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
