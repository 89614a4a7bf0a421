"""KAI's `usageDBConfig` section of the scheduler configuration (time-based fairness): `UsageDbConfig`,
how it is read from a configuration document and how it is written back into one."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from kai_scheduler.api.timestamps import format_rfc3339, parse_rfc3339
from kai_scheduler.framework.config_values import ConfigError, duration, duration_text
from kai_scheduler.model.usage import WEEK, WINDOW_TYPES, UsageParams

CLIENT_TYPES = ("prometheus", "fake", "fake-with-history")
# `usageParams.extraParams` keys naming the PromQL expression of a queue's allocated amount (a vector
# with a `queue_name` label) and of the cluster's capacity, per resource, with KAI's defaults. The
# allocation metrics are the queue metrics this project exports (`k8s/metrics.py`, namespace `kai`).
USAGE_METRIC_DEFAULTS: Final[dict[str, str]] = {
    "gpuAllocationMetric": "kai_queue_allocated_gpus",
    "cpuAllocationMetric": "kai_queue_allocated_cpu_cores",
    "memoryAllocationMetric": "kai_queue_allocated_memory_bytes",
    "gpuCapacityMetric": 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})',
    "cpuCapacityMetric": 'sum(kube_node_status_capacity{resource="cpu"})',
    "memoryCapacityMetric": 'sum(kube_node_status_capacity{resource="memory"})',
}


@dataclass(frozen=True, slots=True)
class UsageDbConfig:
    """KAI's `usageDBConfig`: time-based fairness.

    In live mode with `clientType: prometheus` and a `connectionString`, the usage is read from that
    Prometheus (`k8s/prometheus_usage.py`; the `fetch_interval`, `staleness_period`, `wait_timeout`,
    `query_timeout` and `metrics` fields are for it). Otherwise (the simulator, `fake`,
    `fake-with-history`, no `connectionString`) the history is kept by the edge from its own allocations
    (see `model.usage`)."""

    client_type: str = "prometheus"
    window_size: float = WEEK
    window_type: Literal["sliding", "tumbling"] = "sliding"
    tumbling_start: datetime | None = None
    half_life: float = 0.0
    resolution: float = 60.0
    connection_string: str | None = None
    fetch_interval: float = 60.0
    staleness_period: float = 300.0
    wait_timeout: float = 60.0
    query_timeout: float = 10.0  # extraParams.usageQueryTimeout
    # extraParams overrides of USAGE_METRIC_DEFAULTS (only the keys given).
    metrics: dict[str, str] = field(default_factory=dict)

    def params(self, origin: datetime) -> UsageParams:
        """The parameters on an edge clock whose second 0 is `origin`."""
        start = 0.0 if self.tumbling_start is None else (self.tumbling_start - origin).total_seconds()
        return UsageParams(self.window_size, self.window_type, start, self.half_life, self.resolution)

    @property
    def reads_prometheus(self) -> bool:
        """Whether a live scheduler reads the usage from Prometheus (else: its in-memory history)."""
        return self.client_type == "prometheus" and bool(self.connection_string)

    def metric(self, key: str) -> str:
        """The PromQL expression for a key of USAGE_METRIC_DEFAULTS (overridden or KAI's default)."""
        return self.metrics.get(key) or USAGE_METRIC_DEFAULTS[key]


def parse_usage_db_config(value: Any) -> UsageDbConfig | None:
    """Validate the `usageDBConfig` value of a configuration document (None: time-based fairness off)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError("usageDBConfig: expected a mapping")
    client = value.get("clientType", "prometheus")
    if client not in CLIENT_TYPES:
        raise ConfigError(
            f"usageDBConfig.clientType: expected one of {', '.join(CLIENT_TYPES)}, got {client!r}"
        )
    params = value.get("usageParams") or {}
    if not isinstance(params, dict):
        raise ConfigError("usageDBConfig.usageParams: expected a mapping")
    where = "usageDBConfig.usageParams"
    window_type = params.get("windowType", "sliding")
    if window_type not in WINDOW_TYPES:
        raise ConfigError(
            f"{where}.windowType: expected sliding or tumbling, got {window_type!r} (cron windows are not "
            "supported)"
        )
    extra = params.get("extraParams") or {}
    if not isinstance(extra, dict):
        raise ConfigError(f"{where}.extraParams: expected a mapping")
    window = duration(params, "windowSize", WEEK, where=where)
    resolution = duration(extra, "queryResolution", 60.0, where=f"{where}.extraParams")
    if window <= 0 or resolution <= 0:
        key = "windowSize" if window <= 0 else "extraParams.queryResolution"
        raise ConfigError(f"{where}.{key}: must be positive")
    return UsageDbConfig(
        client_type=client,
        window_size=window,
        window_type="tumbling" if window_type == "tumbling" else "sliding",
        tumbling_start=_time(params, "tumblingWindowStartTime", where),
        half_life=duration(params, "halfLifePeriod", 0.0, where=where),
        resolution=resolution,
        connection_string=_connection_string(value.get("connectionString")),
        fetch_interval=_positive(params, "fetchInterval", 60.0, where),
        staleness_period=_positive(params, "stalenessPeriod", 300.0, where),
        wait_timeout=_positive(params, "waitTimeout", 60.0, where, zero=True),
        query_timeout=_positive(extra, "usageQueryTimeout", 10.0, f"{where}.extraParams"),
        metrics=_usage_metrics(extra, f"{where}.extraParams"),
    )


def _connection_string(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigError(
            f"usageDBConfig.connectionString: expected the Prometheus base URL (http:// or https://), "
            f"got {value!r}"
        )
    return value


def _positive(document: dict[str, Any], key: str, default: float, where: str, *, zero: bool = False) -> float:
    value = duration(document, key, default, where=where)
    if value < 0 or (value == 0 and not zero):
        bound = "zero or more" if zero else "positive"
        raise ConfigError(f"{where}.{key}: must be {bound}, got {document.get(key)!r}")
    return value


def _usage_metrics(extra: dict[str, Any], where: str) -> dict[str, str]:
    metrics: dict[str, str] = {}
    for key in USAGE_METRIC_DEFAULTS:
        value = extra.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}.{key}: expected a PromQL expression, got {value!r}")
        metrics[key] = value.strip()
    return metrics


def _time(document: dict[str, Any], key: str, where: str) -> datetime | None:
    value = document.get(key)
    if value is None:
        return None
    try:
        return parse_rfc3339(str(value))
    except ValueError:
        raise ConfigError(f"{where}.{key}: {value!r} is not an RFC 3339 time") from None


def usage_db_config_document(usage: UsageDbConfig) -> dict[str, Any]:
    """The `usageDBConfig` section for `usage`, as `parse_usage_db_config` reads it back: the query
    resolution and window always, the other parameters only where they differ from the defaults."""
    usage_default = UsageDbConfig()
    extra: dict[str, Any] = {"queryResolution": duration_text(usage.resolution)}
    if usage.query_timeout != usage_default.query_timeout:
        extra["usageQueryTimeout"] = duration_text(usage.query_timeout)
    extra.update(usage.metrics)
    params: dict[str, Any] = {
        "windowSize": duration_text(usage.window_size),
        "windowType": usage.window_type,
        "halfLifePeriod": duration_text(usage.half_life),
        "extraParams": extra,
    }
    if usage.tumbling_start is not None:
        params["tumblingWindowStartTime"] = format_rfc3339(
            usage.tumbling_start, "microseconds_if_any", keep_offset=True
        )
    for key, seconds, default_seconds in (
        ("fetchInterval", usage.fetch_interval, usage_default.fetch_interval),
        ("stalenessPeriod", usage.staleness_period, usage_default.staleness_period),
        ("waitTimeout", usage.wait_timeout, usage_default.wait_timeout),
    ):
        if seconds != default_seconds:
            params[key] = duration_text(seconds)
    section: dict[str, Any] = {"clientType": usage.client_type, "usageParams": params}
    if usage.connection_string is not None:
        section["connectionString"] = usage.connection_string
    return section
