"""The metrics, liveness and readiness endpoints every component serves, through real HTTP (urllib)."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.parser import text_string_to_metric_families

from kai_scheduler.k8s.runtime.http_server import MetricsServer
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics


def get(
    url: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers), error.read()


class Flag:
    def __init__(self, value: bool) -> None:
        self.value = value

    def __call__(self) -> bool:
        return self.value


@pytest.fixture
def registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("kai_test_gauge", "A gauge", registry=registry).set(3)
    Counter("kai_test_requests", "A counter", ["path"], registry=registry).labels(path="/x").inc(2)
    return registry


@pytest.fixture
def ready() -> Flag:
    return Flag(False)


@pytest.fixture
def server(registry: CollectorRegistry, ready: Flag) -> Iterator[MetricsServer]:
    with MetricsServer(registry, host="127.0.0.1", port=0, ready=ready) as running:
        yield running


def samples(text: str) -> dict[str, float]:
    return {
        sample.name + str(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_expose_the_registry(server: MetricsServer) -> None:
    status, headers, body = get(f"{server.url}/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    values = samples(body.decode())
    assert values["kai_test_gauge[]"] == 3
    assert values["kai_test_requests_total[('path', '/x')]"] == 2


def test_metrics_carry_kai_metric_names(ready: Flag) -> None:
    metrics = SchedulerMetrics()
    metrics.observe_open_session(0.25)
    metrics.preemption_attempts.inc()
    with MetricsServer(metrics.registry, host="127.0.0.1", port=0) as server:
        _, _, body = get(f"{server.url}/metrics")
    text = body.decode()
    assert "kai_open_session_latency_milliseconds 250.0" in text
    assert "kai_total_preemption_attempts 1.0" in text
    assert "kai_task_scheduling_latency_milliseconds_bucket" in text


def test_metrics_follow_the_scrapers_wishes(server: MetricsServer) -> None:
    status, headers, body = get(
        f"{server.url}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.decode().endswith("# EOF\n")

    status, headers, body = get(f"{server.url}/metrics", headers={"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert "kai_test_gauge 3.0" in gzip.decompress(body).decode()

    _, _, body = get(f"{server.url}/metrics?name[]=kai_test_gauge")
    assert "kai_test_gauge" in body.decode()
    assert "kai_test_requests" not in body.decode()


def test_healthz_answers_while_alive(server: MetricsServer) -> None:
    status, _, body = get(f"{server.url}/healthz")
    assert (status, body) == (200, b"alive\n")


def test_healthz_follows_a_liveness_check(registry: CollectorRegistry) -> None:
    alive = Flag(True)
    with MetricsServer(registry, host="127.0.0.1", port=0, alive=alive) as server:
        assert get(f"{server.url}/healthz")[0] == 200
        alive.value = False
        assert get(f"{server.url}/healthz")[:3:2] == (503, b"not alive\n")


def test_readyz_follows_the_readiness_check(server: MetricsServer, ready: Flag) -> None:
    status, _, body = get(f"{server.url}/readyz")
    assert (status, body) == (503, b"not ready\n")
    ready.value = True
    status, _, body = get(f"{server.url}/readyz")
    assert (status, body) == (200, b"ready\n")
    ready.value = False
    assert get(f"{server.url}/readyz")[0] == 503


def test_a_failing_readiness_check_means_not_ready(registry: CollectorRegistry) -> None:
    def broken() -> bool:
        raise RuntimeError("informers not started")

    with MetricsServer(registry, host="127.0.0.1", port=0, ready=broken) as server:
        status, _, body = get(f"{server.url}/readyz")
        assert status == 503
        assert b"RuntimeError: informers not started" in body
        assert get(f"{server.url}/healthz")[0] == 200  # liveness does not depend on readiness


def test_without_a_readiness_check_the_server_is_ready(registry: CollectorRegistry) -> None:
    with MetricsServer(registry, host="127.0.0.1", port=0) as server:
        assert get(f"{server.url}/readyz")[0] == 200


def test_head_and_unknown_paths(server: MetricsServer) -> None:
    status, headers, body = get(f"{server.url}/healthz", method="HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Length"] == "6"
    status, _, body = get(f"{server.url}/nothing-here")
    assert status == 404
    assert b"/metrics" in body
    assert get(f"{server.url}/metrics", method="POST")[0] == 501


def test_concurrent_scrapes_and_probes(server: MetricsServer, ready: Flag) -> None:
    ready.value = True
    results: list[int] = []
    lock = threading.Lock()

    def hit(path: str) -> None:
        status = get(f"{server.url}{path}")[0]
        with lock:
            results.append(status)

    threads = [
        threading.Thread(target=hit, args=(path,)) for path in ("/metrics", "/healthz", "/readyz") * 10
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 30


def test_start_and_stop(registry: CollectorRegistry) -> None:
    server = MetricsServer(registry, host="127.0.0.1", port=0)
    assert not server.running
    server.start()
    server.start()  # idempotent
    port = server.port
    assert port != 0 and server.running
    assert get(f"{server.url}/healthz")[0] == 200
    server.stop()
    server.stop()  # idempotent
    assert not server.running
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_a_port_in_use_fails_at_start(registry: CollectorRegistry) -> None:
    with MetricsServer(registry, host="127.0.0.1", port=0) as first:
        second = MetricsServer(registry, host="127.0.0.1", port=first.port)
        with pytest.raises(OSError):
            second.start()
        assert not second.running


def test_usable_from_asyncio(registry: CollectorRegistry) -> None:
    async def main() -> tuple[int, int, int]:
        ready = Flag(False)
        async with MetricsServer(registry, host="127.0.0.1", port=0, ready=ready) as server:
            # The event loop stays free while the server answers from its own thread.
            before = (await asyncio.to_thread(get, f"{server.url}/readyz"))[0]
            ready.value = True
            after = (await asyncio.to_thread(get, f"{server.url}/readyz"))[0]
            port = server.port
        return before, after, port

    before, after, port = asyncio.run(main())
    assert (before, after) == (503, 200)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_ipv6_hosts_serve_both_families(registry: CollectorRegistry) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this environment")
    try:
        server = MetricsServer(registry, host="::", port=0)
        server.start()
    except OSError as error:
        pytest.skip(f"cannot bind [::] here: {error}")
    try:
        assert get(f"http://127.0.0.1:{server.port}/healthz")[0] == 200
        try:
            socket.create_connection(("::1", server.port), timeout=2).close()
        except OSError:
            return  # no IPv6 loopback configured; IPv4 through the dual-stack socket is what matters
        assert get(f"http://[::1]:{server.port}/healthz")[0] == 200
    finally:
        server.stop()
