"""Time-based usage from Prometheus (`k8s/prometheus_usage.py`): the PromQL queries (pure), reading the
answers, and the fetcher against a fake Prometheus (http.server in a thread).

Reference: kai-reference §5.5: sliding window query ≈
`sum_over_time((metric * 0.5^((now − time())/halfLife))[window:resolution])`, allocation metrics
`kai_queue_allocated_*` (label `queue_name`, §8), capacity `sum(kube_node_status_capacity{resource=…})`,
usage normalised by the capacity; fetchInterval 1m, stalenessPeriod 5m.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from fake_prometheus import FakePrometheus, closed_port_url
from kai_scheduler.framework.config import UsageDbConfig, parse_config
from kai_scheduler.k8s.scheduler.prometheus_usage import (
    PrometheusUsage,
    UsageQueryError,
    parse_vector,
    prometheus_duration,
    queue_usage,
    range_query,
    usage_queries,
    window_range,
)
from kai_scheduler.model.resources import Resources

NOW = datetime(2026, 1, 1, tzinfo=UTC).timestamp()  # 1767225600
HOUR = 3600.0
DAY = 24 * HOUR


def usage_db(params: dict[str, Any] | None = None, **section: Any) -> UsageDbConfig:
    config = parse_config(
        {"usageDBConfig": {"connectionString": "http://prom:9090", "usageParams": params or {}, **section}}
    ).usage_db
    assert config is not None
    return config


def queries(config: UsageDbConfig, now: float) -> dict[tuple[str, str], str]:
    return {(q.resource, q.kind): q.promql for q in usage_queries(config, now)}


# --- queries ------------------------------------------------------------------------------------------


def test_sliding_window_without_half_life() -> None:
    assert queries(usage_db(), NOW) == {
        ("gpu", "allocation"): "sum_over_time((kai_queue_allocated_gpus)[604800s:60s])",
        ("cpu", "allocation"): "sum_over_time((kai_queue_allocated_cpu_cores)[604800s:60s])",
        ("memory", "allocation"): "sum_over_time((kai_queue_allocated_memory_bytes)[604800s:60s])",
        ("gpu", "capacity"): 'sum_over_time((sum(kube_node_status_capacity{resource="nvidia_com_gpu"}))'
        "[604800s:60s])",
        ("cpu", "capacity"): 'sum_over_time((sum(kube_node_status_capacity{resource="cpu"}))[604800s:60s])',
        ("memory", "capacity"): 'sum_over_time((sum(kube_node_status_capacity{resource="memory"}))'
        "[604800s:60s])",
    }


def test_sliding_window_with_half_life_weights_each_step_by_its_age() -> None:
    config = usage_db({"windowSize": "2d", "halfLifePeriod": "1d", "extraParams": {"queryResolution": "5m"}})
    built = queries(config, NOW)
    assert built["gpu", "allocation"] == (
        "sum_over_time(((kai_queue_allocated_gpus) * 0.5^((1767225600 - time()) / 86400))[172800s:300s])"
    )
    assert built["cpu", "capacity"] == (
        'sum_over_time(((sum(kube_node_status_capacity{resource="cpu"}))'
        " * 0.5^((1767225600 - time()) / 86400))[172800s:300s])"
    )


def test_times_and_durations_keep_milliseconds() -> None:
    assert prometheus_duration(1.5) == "1500ms"
    assert prometheus_duration(60) == "60s"
    assert range_query("m", 90.25, 15, 1800, NOW + 0.25) == (
        "sum_over_time(((m) * 0.5^((1767225600.25 - time()) / 1800))[90250ms:15s])"
    )


def test_tumbling_window_ranges_from_the_last_boundary() -> None:
    config = usage_db(
        {"windowType": "tumbling", "windowSize": "1d", "tumblingWindowStartTime": "2025-12-20T06:00:00Z"}
    )
    now = NOW + 2 * DAY + 4.5 * HOUR  # 2026-01-03T04:30Z: the window started 2026-01-02T06:00Z
    assert window_range(config, now) == 22.5 * HOUR
    assert (
        queries(config, now)["gpu", "allocation"] == "sum_over_time((kai_queue_allocated_gpus)[81000s:60s])"
    )


def test_tumbling_window_without_a_start_counts_from_the_epoch() -> None:
    config = usage_db({"windowType": "tumbling", "windowSize": "1d"})
    assert window_range(config, NOW + HOUR) == HOUR  # daily windows start at 00:00 UTC


def test_tumbling_window_at_its_boundary_has_no_queries() -> None:
    config = usage_db({"windowType": "tumbling", "windowSize": "1d"})
    assert usage_queries(config, NOW) == []
    assert len(usage_queries(config, NOW + 1)) == 6


def test_extra_params_override_the_metrics() -> None:
    config = usage_db(
        {
            "extraParams": {
                "gpuAllocationMetric": "max by (queue_name) (kai_queue_allocated_gpus)",
                "gpuCapacityMetric": "sum(my_gpus)",
            }
        }
    )
    built = queries(config, NOW)
    assert built["gpu", "allocation"] == (
        "sum_over_time((max by (queue_name) (kai_queue_allocated_gpus))[604800s:60s])"
    )
    assert built["gpu", "capacity"] == "sum_over_time((sum(my_gpus))[604800s:60s])"
    assert built["cpu", "allocation"] == "sum_over_time((kai_queue_allocated_cpu_cores)[604800s:60s])"


# --- answers ------------------------------------------------------------------------------------------


def test_a_vector_answer_is_read() -> None:
    body = (
        b'{"status":"success","data":{"resultType":"vector","result":['
        b'{"metric":{"queue_name":"a"},"value":[1767225600,"120"]},'
        b'{"metric":{"queue_name":"b"},"value":[1767225600,"NaN"]}]}}'
    )
    assert parse_vector(200, body) == [({"queue_name": "a"}, 120.0)]


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, b"<html>\nhello</html>", "HTTP 200: not a JSON answer"),
        (
            400,
            b'{"status":"error","errorType":"bad_data","error":"parse error:\\nat 3"}',
            "HTTP 400: bad_data",
        ),
        (503, b'{"status":"success","data":{"resultType":"vector","result":[]}}', "HTTP 503"),
        (200, b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "expected a vector"),
        (200, b'{"status":"success","data":{"resultType":"vector","result":[{"value":1}]}}', "malformed"),
        (200, b"[1, 2]", "not a JSON object"),
    ],
)
def test_a_bad_answer_is_one_line(status: int, body: bytes, message: str) -> None:
    with pytest.raises(UsageQueryError) as error:
        parse_vector(status, body)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_usage_is_normalised_by_the_capacity_per_resource() -> None:
    usage = queue_usage(
        {
            "gpu": [({"queue_name": "a"}, 60.0), ({"queue_name": "b"}, 20.0), ({"queue_name": "a"}, 20.0)],
            "cpu": [({"queue_name": "b"}, 50.0), ({}, 1000.0)],
            "memory": [({"queue_name": "a"}, 10.0)],
        },
        {"gpu": [({}, 160.0)], "cpu": [({}, 100.0)], "memory": []},  # no memory capacity: no memory usage
    )
    assert usage == {"a": Resources(gpu=0.5), "b": Resources(gpu=0.125, cpu=0.5)}


# --- fetching from a fake Prometheus ------------------------------------------------------------------


class Wall:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def a_used_half() -> FakePrometheus:
    return FakePrometheus({"kai_queue_allocated_gpus": {"a": 120.0, "b": 30.0}, "nvidia_com_gpu": 240.0})


def test_fetch_reads_every_query_at_the_wall_clock_time() -> None:
    wall = Wall(NOW)
    with a_used_half() as prom:
        source = PrometheusUsage(usage_db(connectionString=prom.url), wall=wall)
        assert asyncio.run(source.fetch()) is True
    assert source.usage() == {"a": Resources(gpu=0.5), "b": Resources(gpu=0.125)}
    assert sorted(q for q, _ in prom.queries) == sorted(q.promql for q in usage_queries(source.config, NOW))
    assert {t for _, t in prom.queries} == {"1767225600"}


def test_the_last_answer_counts_until_it_is_stale() -> None:
    wall = Wall(NOW)
    with a_used_half() as prom:
        source = PrometheusUsage(usage_db({"stalenessPeriod": "5m"}, connectionString=prom.url), wall=wall)
        asyncio.run(source.fetch())
    assert source.usage(NOW + 300) == {"a": Resources(gpu=0.5), "b": Resources(gpu=0.125)}
    assert source.usage(NOW + 301) == {}


def test_prometheus_down_means_no_usage_and_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    source = PrometheusUsage(usage_db(connectionString=closed_port_url()), wall=Wall(NOW))
    with caplog.at_level(logging.DEBUG, logger="kai_scheduler.k8s.scheduler.prometheus_usage"):
        assert asyncio.run(source.fetch()) is False
        assert asyncio.run(source.fetch()) is False
    assert source.usage(NOW) == {}
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].exc_info is None and "\n" not in warnings[0].getMessage()


@pytest.mark.parametrize("mode", ["garbage", "error"])
def test_a_bad_answer_is_logged_in_one_line(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    with a_used_half() as prom:
        prom.mode = mode
        source = PrometheusUsage(usage_db(connectionString=prom.url), wall=Wall(NOW))
        with caplog.at_level(logging.WARNING, logger="kai_scheduler.k8s.scheduler.prometheus_usage"):
            assert asyncio.run(source.fetch()) is False
    assert source.latest is None
    [record] = caplog.records
    assert record.exc_info is None
    assert "\n" not in record.getMessage()
    assert ("not a JSON answer" if mode == "garbage" else "HTTP 400: bad_data") in record.getMessage()


def test_an_outage_warns_again_after_a_recovery(caplog: pytest.LogCaptureFixture) -> None:
    wall = Wall(NOW)
    with a_used_half() as prom:
        source = PrometheusUsage(usage_db(connectionString=prom.url), wall=wall)
        with caplog.at_level(logging.WARNING, logger="kai_scheduler.k8s.scheduler.prometheus_usage"):
            prom.mode = "error"
            asyncio.run(source.fetch())
            asyncio.run(source.fetch())
            prom.mode = "ok"
            assert asyncio.run(source.fetch()) is True
            prom.mode = "error"
            asyncio.run(source.fetch())
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2
    # A failed fetch keeps the last good answer (until it is stale).
    assert source.usage(NOW) == {"a": Resources(gpu=0.5), "b": Resources(gpu=0.125)}


def test_stale_data_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with a_used_half() as prom:
        source = PrometheusUsage(usage_db(connectionString=prom.url), wall=Wall(NOW))
        asyncio.run(source.fetch())
    with caplog.at_level(logging.WARNING, logger="kai_scheduler.k8s.scheduler.prometheus_usage"):
        source.usage(NOW + 3600)
        source.usage(NOW + 3700)
    [record] = caplog.records
    assert "stale" in record.getMessage()


def test_run_fetches_every_fetch_interval_until_stopped() -> None:
    with a_used_half() as prom:
        source = PrometheusUsage(usage_db({"fetchInterval": "0.05s"}, connectionString=prom.url))

        async def body() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(source.run(stop))
            while len(prom.queries) < 18:  # three fetches of six queries
                await asyncio.sleep(0.01)
            stop.set()
            await asyncio.wait_for(task, 5)

        asyncio.run(asyncio.wait_for(body(), 10))
    assert source.answered.is_set() and source.latest is not None


def test_without_a_connection_string_there_is_no_prometheus_source() -> None:
    config = parse_config({"usageDBConfig": {"clientType": "prometheus"}}).usage_db
    assert config is not None and not config.reads_prometheus
    with pytest.raises(ValueError, match="connectionString"):
        PrometheusUsage(config)
