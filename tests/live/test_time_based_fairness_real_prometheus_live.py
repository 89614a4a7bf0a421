"""Time-based fair share against a real Prometheus (the `prometheus` binary; skipped, saying how to get it,
when it is not installed): the scheduler's queries (`prometheus_usage.py`, kai-reference §5.5) answered
from what Prometheus scraped, not with canned numbers as by `tests/fake_prometheus.py`.

Prometheus scrapes, every second, the scheduler process's /metrics (one registry for the scheduler's and
the queue controller's metrics, as when the components run in one process: `kai_queue_allocated_gpus` and
the like) and a kube-state-metrics stand-in serving the node's capacity (`kube_state_exporter.py`). The
cluster: one node of 4 GPUs, 32 CPUs and 256 GiB, queues a and b (GPU quota 0, weight 1). At first nothing
runs; after a few seconds a runs four pods of 1 GPU, 2 CPUs and 16 GiB (all the GPUs, a quarter of the
CPUs and of the memory), b nothing. The window (a minute) holds the whole run, so a's usage is the time it
held the GPUs over the time Prometheus has seen the node: it grows while a holds them, and it is the
integral of the gauges as they were scraped (within the sampling's error). Then a's pods complete, and
four pods of a and four of b are pending: with a's usage above two thirds, b's fair share is the node.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kube_state_exporter import KubeStateExporter
from live_support import Live, eventually, run
from prometheus_client import CollectorRegistry, Gauge
from prometheus_runner import MISSING, PROMETHEUS, ScrapeLog, Scrapes, integral, running_prometheus

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.k8s.runtime.http_server import MetricsServer
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.k8s.scheduler.prometheus_usage import PrometheusUsage
from kai_scheduler.k8s.status.metrics import QueueMetrics
from kai_scheduler.k8s.status.podgroups import PodGroupStatusController
from kai_scheduler.k8s.status.queues import QueueStatusController
from kai_scheduler.model.resources import Resources

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason=MISSING)

SCRAPE = 1.0  # seconds between scrapes
RESOLUTION = 0.25  # the queries' step: a quarter of a scrape interval, so that a step's error is small
HALF_LIFE = 4.0
IDLE = 2.0  # seconds Prometheus sees the node before a's pods start
ENOUGH = 0.75  # a's GPU usage when its pods complete (b's fair share is the node above 2/3)
FETCH_EVERY = 0.5
# How much earlier Prometheus may stamp a scrape than the scrape log notes it (it takes the time before
# asking), added to a step's error at each of the two edges that count: a's start, the node's first scrape.
LAG = 0.1
NODE_GPUS = 4
CAPACITY_LABEL = {"gpu": "nvidia_com_gpu", "cpu": "cpu", "memory": "memory"}
ONE_GPU: dict[str, Any] = {"gpus": 1, "cpu": None, "memory": None}
GROWING = 60.0  # seconds a's usage may take to reach ENOUGH before the test gives up


def with_prometheus(url: str, **params: str) -> SchedulerConfig:
    """A window of a minute (the whole run) in steps of RESOLUTION."""
    usage_params = {"windowSize": "1m", "extraParams": {"queryResolution": f"{RESOLUTION}s"}, **params}
    return parse_config(
        {"usageDBConfig": {"clientType": "prometheus", "connectionString": url, "usageParams": usage_params}}
    )


class Scheduler:
    """The scheduler process's metrics, served on /metrics, with a log of queue a's allocation gauges as
    each scrape served them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.metrics = SchedulerMetrics(self.registry)
        self.queues = QueueMetrics(self.registry)
        self.log = ScrapeLog(self.queue_a)
        self.registry.register(self.log)
        self.server = MetricsServer(self.registry, host="127.0.0.1", port=0)

    def queue_a(self) -> dict[str, float]:
        gauges = {
            "gpu": self.queues.allocated_gpus,
            "cpu": self.queues.allocated_cpu_cores,
            "memory": self.queues.allocated_memory_bytes,
        }
        return {resource: gauge_value(gauge, queue_name="a") for resource, gauge in gauges.items()}


def gauge_value(gauge: Gauge, **labels: str) -> float:
    """The gauge's sample with these labels (0 without one), read from the gauge itself: through the
    registry, the scrape log would note a scrape."""
    for family in gauge.collect():
        for sample in family.samples:
            if sample.labels == labels:
                return float(sample.value)
    return 0.0


@dataclass(frozen=True)
class Answer:
    """One fetch: its time, the queues' usage, and a's usage with a half-life at the same time."""

    at: float
    usage: dict[str, Resources]
    decayed: Resources

    @property
    def a(self) -> Resources:
        return self.usage.get("a", Resources())


class Fetcher:
    """The scheduler loop's fetches, each followed by one with a half-life at the same time."""

    def __init__(self, usage: PrometheusUsage, url: str) -> None:
        self.usage = usage
        self.at = 0.0
        decaying = with_prometheus(url, halfLifePeriod=f"{HALF_LIFE}s").usage_db
        assert decaying is not None
        self.decayed = PrometheusUsage(decaying, wall=lambda: self.at)

    async def fetch(self) -> Answer:
        assert await self.usage.fetch(), "the scheduler's fetch from Prometheus failed"
        assert self.usage.latest is not None
        self.at, usage = self.usage.latest
        assert await self.decayed.fetch(), "the fetch with a half-life failed"
        assert self.decayed.latest is not None
        return Answer(self.at, usage, self.decayed.latest[1].get("a", Resources()))


def cluster(store: Store) -> None:
    node = node_manifest("n0", gpus=NODE_GPUS, cpu="32", memory="256Gi")
    node["status"]["capacity"] = dict(node["status"]["allocatable"])  # what kube-state-metrics reads
    store.create(node)
    for queue in ("a", "b"):
        store.create(queue_manifest(queue, gpu=0))
    store.create(pod_group_manifest("a-early", "a"))  # the controllers count a's pods through it


def a_holds_the_gpus(store: Store) -> None:
    for i in range(NODE_GPUS):
        store.create(
            pod_manifest(f"a-early-{i}", "a", group="a-early", node_name="n0", gpus=1, cpu="2", memory="16Gi")
        )


def then_both_queues_want_the_node(store: Store) -> None:
    for i in range(NODE_GPUS):
        store.set_status("pods", f"a-early-{i}", {"phase": "Succeeded"})
    for queue in ("a", "b"):
        for i in range(NODE_GPUS):
            store.create(pod_manifest(f"{queue}-late-{i}", queue, **ONE_GPU))


def late_pods_seen(live: Live) -> bool:
    pods = live.informers.pods.cache
    early_done = all(
        (pods.get(f"default/a-early-{i}") or {}).get("status", {}).get("phase") == "Succeeded"
        for i in range(NODE_GPUS)
    )
    return early_done and all(f"default/{q}-late-{i}" in pods for q in ("a", "b") for i in range(NODE_GPUS))


def expected_usage(resource: str, queue: Scrapes, node: Scrapes, at: float, half_life: float = 0.0) -> float:
    """a's share of `resource` at `at` from the scraped gauges: its allocation's integral over the node's."""
    return integral(queue, resource, at, half_life) / integral(node, CAPACITY_LABEL[resource], at, half_life)


def tolerance(node: Scrapes, at: float, half_life: float = 0.0) -> float:
    """The sampling error of a share at `at`: a step and the lag at each of its two edges, over the
    (weighted) seconds Prometheus has seen the node."""
    seen = integral(node, CAPACITY_LABEL["gpu"], at, half_life) / NODE_GPUS
    return 2 * (RESOLUTION + LAG) / seen


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    scheduler = Scheduler()
    with scheduler.server:
        yield scheduler


def test_usage_and_fair_share_from_a_real_prometheus(
    server: FakeApiServer, scheduler: Scheduler, tmp_path: Path
) -> None:
    store = server.store
    cluster(store)
    answers: list[Answer] = []

    async def body(exporter: KubeStateExporter, url: str) -> tuple[list[str], dict[str, float]]:
        config = with_prometheus(url)
        async with Live(server, binder=False, loop=False, config=config, metrics=scheduler.metrics) as live:
            stop = asyncio.Event()
            controllers = [
                PodGroupStatusController(live.client, live.informers, debounce=0.01),
                QueueStatusController(
                    live.client, live.informers, metrics=scheduler.queues, debounce=0.01, write_period=0
                ),
            ]
            tasks = [asyncio.create_task(controller.run(stop)) for controller in controllers]
            assert live.loop.prometheus is not None
            fetcher = Fetcher(live.loop.prometheus, url)

            await eventually(lambda: bool(exporter.scrapes), timeout=30)
            start = exporter.scrapes[0][0] + IDLE
            await eventually(lambda: time.time() >= start, timeout=30)
            a_holds_the_gpus(store)
            give_up = time.monotonic() + GROWING
            while not answers or answers[-1].a.gpu < ENOUGH:
                if time.monotonic() > give_up:
                    raise AssertionError(f"a's GPU usage stayed below {ENOUGH}: {[x.a.gpu for x in answers]}")
                answers.append(await fetcher.fetch())
                await asyncio.sleep(FETCH_EVERY)

            # The cycle takes the latest answer, the last one above.
            then_both_queues_want_the_node(store)
            await live.until(lambda: late_pods_seen(live))
            report = await live.loop.run_once()
            assert report.errors == []
            assert report.result is not None
            stop.set()
            await asyncio.gather(*tasks)
            shares = {queue: share[0] for queue, share in report.result.fair_share.items()}
            return report.bind_requests, shares

    with KubeStateExporter(store) as exporter:
        targets = {
            "kai-scheduler": f"127.0.0.1:{scheduler.server.port}",
            "kube-state-metrics": exporter.target,
        }
        with running_prometheus(tmp_path, targets, interval=SCRAPE) as url:
            bind_requests, fair_shares = run(body(exporter, url), timeout=120)
    node, queue = exporter.scrapes, scheduler.log.scrapes

    # a's usage grows while it holds the GPUs (fetches at least half a second apart, two steps or more),
    # and each answer is what the scraped gauges integrate to.
    gpu = [answer.a.gpu for answer in answers]
    assert gpu == sorted(gpu) and gpu[-1] > gpu[0] + 0.5, gpu
    for answer in answers:
        error = tolerance(node, answer.at)
        for resource in ("gpu", "cpu", "memory"):
            expected = expected_usage(resource, queue, node, answer.at)
            assert getattr(answer.a, resource) == pytest.approx(expected, abs=error), (answer, resource)
        # a's pods held a quarter of the CPUs and of the memory as long as all the GPUs: a quarter of its
        # GPU share (cores over cores, bytes over bytes).
        assert answer.a.cpu == pytest.approx(answer.a.gpu / 4, abs=0.01)
        assert answer.a.memory == pytest.approx(answer.a.gpu / 4, abs=0.01)
        decayed = expected_usage("gpu", queue, node, answer.at, HALF_LIFE)
        assert answer.decayed.gpu == pytest.approx(decayed, abs=tolerance(node, answer.at, HALF_LIFE))
        assert "b" not in answer.usage  # b held nothing: no usage
    # With a half-life, a's recent use weighs more than the idle seconds before it.
    assert answers[-1].decayed.gpu > answers[-1].a.gpu + 0.1

    # The cycle after a's pods completed: a's usage gives b the whole node.
    assert fair_shares == {"a": 0.0, "b": float(NODE_GPUS)}
    assert sorted(name.rsplit("/", 1)[-1] for name in bind_requests) == [f"b-late-{i}" for i in range(4)]
    assert gauge_value(scheduler.metrics.queue_gpu_usage, queue_name="a") == answers[-1].a.gpu
