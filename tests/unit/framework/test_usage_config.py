"""`usageDBConfig`: the time-based fairness section of the scheduler configuration.

Reference: kai-reference §5.5 (clientType prometheus | fake | fake-with-history, connectionString,
usageParams: windowSize default 1w, windowType sliding | tumbling | cron, tumblingWindowStartTime,
halfLifePeriod off if <= 0, extraParams.queryResolution 1m), §9 (the key in the configuration file).
Cron windows are not supported here and are rejected by name.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml

from kai_scheduler.framework.config import ConfigError, SchedulerConfig, UsageDbConfig, parse_config
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.usage import UsageHistory, UsageParams

DAY = 86400.0
WEEK = 7 * DAY


def usage_db(section: Any) -> UsageDbConfig:
    config = parse_config({"usageDBConfig": section})
    assert config.usage_db is not None
    return config.usage_db


def test_off_unless_configured() -> None:
    assert SchedulerConfig().usage_db is None
    assert parse_config({}).usage_db is None
    assert parse_config(yaml.safe_load("usageDBConfig:\n")).usage_db is None  # an empty key: off


@pytest.mark.parametrize("section", [{}, {"usageParams": {}}, {"usageParams": {"extraParams": {}}}])
def test_defaults(section: dict[str, Any]) -> None:
    config = usage_db(section)
    assert config.client_type == "prometheus"
    assert config.window_size == WEEK
    assert config.window_type == "sliding"
    assert config.tumbling_start is None
    assert config.half_life == 0.0
    assert config.resolution == 60.0
    assert config.connection_string is None
    assert (config.fetch_interval, config.staleness_period, config.wait_timeout) == (60.0, 300.0, 60.0)
    assert config.query_timeout == 10.0
    assert config.metrics == {}
    assert config.metric("gpuAllocationMetric") == "kai_queue_allocated_gpus"
    assert config.metric("gpuCapacityMetric") == 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})'
    assert not config.reads_prometheus


def test_a_full_section_as_kai_writes_it() -> None:
    config = parse_config(
        yaml.safe_load(
            """
usageDBConfig:
  clientType: prometheus
  connectionString: http://prometheus-operated.kai-scheduler.svc.cluster.local:9090
  usageParams:
    windowSize: 2d
    windowType: tumbling
    tumblingWindowStartTime: "2026-01-05T06:00:00Z"
    halfLifePeriod: 12h
    fetchInterval: 1m
    stalenessPeriod: 5m
    extraParams:
      queryResolution: 5m
      usageQueryTimeout: 10s
"""
        )
    ).usage_db
    assert config == UsageDbConfig(
        client_type="prometheus",
        window_size=2 * DAY,
        window_type="tumbling",
        tumbling_start=datetime(2026, 1, 5, 6, tzinfo=UTC),
        half_life=12 * 3600.0,
        resolution=300.0,
        connection_string="http://prometheus-operated.kai-scheduler.svc.cluster.local:9090",
        fetch_interval=60.0,
        staleness_period=300.0,
        wait_timeout=60.0,
        query_timeout=10.0,
    )


@pytest.mark.parametrize("client", ["prometheus", "fake", "fake-with-history"])
def test_every_kai_client_type_is_accepted(client: str) -> None:
    assert usage_db({"clientType": client}).client_type == client


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1w", WEEK), ("1d", DAY), ("2d12h", 2.5 * DAY), ("90m", 5400.0), ("3600", 3600.0), (86400, DAY)],
)
def test_durations_take_days_and_weeks(text: str | int, seconds: float) -> None:
    assert usage_db({"usageParams": {"windowSize": text}}).window_size == seconds
    assert usage_db({"usageParams": {"halfLifePeriod": text}}).half_life == seconds
    assert usage_db({"usageParams": {"extraParams": {"queryResolution": text}}}).resolution == seconds


@pytest.mark.parametrize("value", ["0", "0s", "-1h"])
def test_a_half_life_of_zero_or_less_means_no_decay(value: str) -> None:
    params = usage_db({"usageParams": {"halfLifePeriod": value}}).params(datetime(2026, 1, 1, tzinfo=UTC))
    history = UsageHistory(params)
    history.record(0, 60, {"old": Resources(gpu=1)}, Resources(gpu=1))
    history.record(60, 7200, {"new": Resources(gpu=1)}, Resources(gpu=1))
    usage = history.usage(7200)
    # Undecayed: each second of the last two hours weighs the same.
    assert usage["old"].gpu == pytest.approx(60 / 7200)
    assert usage["new"].gpu == pytest.approx(7140 / 7200)


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-01-05T06:00:00Z",
        "2026-01-05T07:00:00+01:00",
        "2026-01-05T06:00:00",  # no offset: UTC
    ],
)
def test_tumbling_start_is_rfc3339(stamp: str) -> None:
    start = usage_db(
        {"usageParams": {"windowType": "tumbling", "tumblingWindowStartTime": stamp}}
    ).tumbling_start
    assert start == datetime(2026, 1, 5, 6, tzinfo=UTC)


def test_an_unquoted_yaml_timestamp_is_a_tumbling_start_too() -> None:
    # YAML reads an unquoted timestamp as a datetime, not a string.
    section = yaml.safe_load(
        "usageParams: {windowType: tumbling, tumblingWindowStartTime: 2026-01-05T06:00:00Z}"
    )
    assert usage_db(section).tumbling_start == datetime(2026, 1, 5, 6, tzinfo=UTC)


def test_params_put_the_tumbling_start_on_the_edge_clock() -> None:
    origin = datetime(2026, 1, 1, tzinfo=UTC)
    config = usage_db(
        {
            "usageParams": {
                "windowType": "tumbling",
                "windowSize": "1d",
                "tumblingWindowStartTime": "2026-01-01T06:00:00Z",
            }
        }
    )
    assert config.params(origin) == UsageParams(
        window_size=DAY, window_type="tumbling", tumbling_start=6 * 3600.0, half_life=0.0, resolution=60.0
    )
    # A start before the edge's second 0 is a negative second.
    assert config.params(origin + timedelta(hours=8)).tumbling_start == -2 * 3600.0
    # Without a start time, windows start at the edge's second 0.
    assert usage_db({"usageParams": {"windowType": "tumbling"}}).params(origin).tumbling_start == 0.0


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ("weekly", "usageDBConfig"),
        ([{"clientType": "prometheus"}], "usageDBConfig"),
        ({"clientType": "influxdb"}, "usageDBConfig.clientType"),
        ({"clientType": None}, "usageDBConfig.clientType"),
        ({"usageParams": "1w"}, "usageDBConfig.usageParams"),
        ({"usageParams": {"windowType": "cron"}}, "usageDBConfig.usageParams.windowType"),
        ({"usageParams": {"windowType": "hopping"}}, "usageDBConfig.usageParams.windowType"),
        ({"usageParams": {"windowSize": "a week"}}, "usageDBConfig.usageParams.windowSize"),
        ({"usageParams": {"windowSize": "0s"}}, "usageDBConfig.usageParams.windowSize"),
        ({"usageParams": {"windowSize": "-1d"}}, "usageDBConfig.usageParams.windowSize"),
        ({"usageParams": {"halfLifePeriod": "soon"}}, "usageDBConfig.usageParams.halfLifePeriod"),
        (
            {"usageParams": {"tumblingWindowStartTime": "Monday 6am"}},
            "usageDBConfig.usageParams.tumblingWindowStartTime",
        ),
        ({"usageParams": {"extraParams": "1m"}}, "usageDBConfig.usageParams.extraParams"),
        (
            {"usageParams": {"extraParams": {"queryResolution": "0"}}},
            "usageDBConfig.usageParams.extraParams.queryResolution",
        ),
        (
            {"usageParams": {"extraParams": {"queryResolution": "fine"}}},
            "usageDBConfig.usageParams.extraParams.queryResolution",
        ),
        ({"connectionString": "prometheus:9090"}, "usageDBConfig.connectionString"),
        ({"connectionString": 9090}, "usageDBConfig.connectionString"),
        ({"usageParams": {"fetchInterval": "0s"}}, "usageDBConfig.usageParams.fetchInterval"),
        ({"usageParams": {"fetchInterval": "often"}}, "usageDBConfig.usageParams.fetchInterval"),
        ({"usageParams": {"stalenessPeriod": "-5m"}}, "usageDBConfig.usageParams.stalenessPeriod"),
        ({"usageParams": {"waitTimeout": "-1s"}}, "usageDBConfig.usageParams.waitTimeout"),
        (
            {"usageParams": {"extraParams": {"usageQueryTimeout": "0"}}},
            "usageDBConfig.usageParams.extraParams.usageQueryTimeout",
        ),
        (
            {"usageParams": {"extraParams": {"gpuAllocationMetric": ""}}},
            "usageDBConfig.usageParams.extraParams.gpuAllocationMetric",
        ),
        (
            {"usageParams": {"extraParams": {"memoryCapacityMetric": 5}}},
            "usageDBConfig.usageParams.extraParams.memoryCapacityMetric",
        ),
    ],
)
def test_bad_values_name_the_key_path(section: Any, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"usageDBConfig": section})
    message = str(error.value)
    assert message.startswith(f"{key}:"), message
    assert "\n" not in message


def test_cron_windows_are_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match="cron windows are not supported"):
        parse_config({"usageDBConfig": {"usageParams": {"windowType": "cron", "cronString": "0 6 * * 1"}}})


def test_unknown_client_types_are_listed_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"prometheus, fake, fake-with-history.*'influxdb'"):
        parse_config({"usageDBConfig": {"clientType": "influxdb"}})


def test_the_key_is_spelt_as_kai_spells_it() -> None:
    with pytest.raises(ConfigError, match="usageDbConfig: unknown key"):
        parse_config({"usageDbConfig": {}})


def test_prometheus_settings() -> None:
    config = usage_db(
        {
            "clientType": "prometheus",
            "connectionString": "https://prom.example:9090/prefix",
            "usageParams": {
                "fetchInterval": "30s",
                "stalenessPeriod": "10m",
                "waitTimeout": "0s",  # do not wait for the first answer
                "extraParams": {
                    "usageQueryTimeout": "3s",
                    "gpuAllocationMetric": " max by (queue_name) (kai_queue_allocated_gpus) ",
                    "cpuCapacityMetric": "sum(my_cpus)",
                    "someOtherParam": "ignored",
                },
            },
        }
    )
    assert config.reads_prometheus
    assert config.connection_string == "https://prom.example:9090/prefix"
    assert (config.fetch_interval, config.staleness_period, config.wait_timeout) == (30.0, 600.0, 0.0)
    assert config.query_timeout == 3.0
    assert config.metrics == {
        "gpuAllocationMetric": "max by (queue_name) (kai_queue_allocated_gpus)",
        "cpuCapacityMetric": "sum(my_cpus)",
    }
    assert config.metric("gpuAllocationMetric") == "max by (queue_name) (kai_queue_allocated_gpus)"
    assert config.metric("memoryAllocationMetric") == "kai_queue_allocated_memory_bytes"


@pytest.mark.parametrize(
    ("section", "reads"),
    [
        ({"clientType": "prometheus", "connectionString": "http://prom:9090"}, True),
        ({"connectionString": "http://prom:9090"}, True),  # clientType defaults to prometheus
        ({"clientType": "prometheus"}, False),
        ({"clientType": "prometheus", "connectionString": ""}, False),
        ({"clientType": "fake", "connectionString": "http://prom:9090"}, False),
        ({"clientType": "fake-with-history", "connectionString": "http://prom:9090"}, False),
    ],
)
def test_only_prometheus_with_a_connection_string_reads_prometheus(section: Any, reads: bool) -> None:
    assert usage_db(section).reads_prometheus is reads
