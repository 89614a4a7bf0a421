"""Time-based fairness from Prometheus, as KAI's usage database reads it (kai-reference §5.5).

With `usageDBConfig.clientType: prometheus` and a `connectionString` (the Prometheus base URL), the live
scheduler loop takes every queue's usage from Prometheus instead of its in-memory history
(`model.usage`). For each resource (gpu, cpu, memory) two instant queries over a range vector go to
`/api/v1/query`, evaluated at the fetch time `now` (wall clock, seconds since the epoch):

* allocation: `sum_over_time((<allocation metric>)[<range>:<resolution>])`, one series per queue
  (label `queue_name`; series of one queue are added up);
* capacity: the same over the capacity expression (one series; all series are added up).

With a half-life, each sample is weighted by `0.5^((now - time()) / halfLife)` (`time()` is the
subquery step's time): `sum_over_time(((<metric>) * 0.5^((<now> - time()) / <halfLife>))[...])`. The
range is `windowSize` for sliding windows; for tumbling windows it is `now - start`, `start` being the
last window boundary (`tumblingWindowStartTime` + k * `windowSize`; without a start time, boundaries
count from the Unix epoch). A queue's usage of a resource is its sum divided by the capacity's (0 when
the capacity is 0).

`PrometheusUsage.run` fetches in the background every `fetchInterval`; a cycle takes the latest answer
(`usage(now)`, never waiting). The answer is dropped once older than `stalenessPeriod` (no usage then).
An unreachable Prometheus or a bad answer (not JSON, `status: error`, an HTTP error) is logged on one
line, as a warning once per outage (later failures of the same outage at debug level); so is stale data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

import httpx2

from kai_scheduler.framework.usage_config import UsageDbConfig
from kai_scheduler.model.resources import RESOURCE_NAMES, Resources

log = logging.getLogger(__name__)

QUEUE_LABEL: Final = "queue_name"
QUERY_PATH: Final = "/api/v1/query"
_KINDS: Final[tuple[Literal["allocation", "capacity"], ...]] = ("allocation", "capacity")


class UsageQueryError(Exception):
    """A failed or unusable answer from Prometheus (a one-line message)."""


@dataclass(frozen=True, slots=True)
class UsageQuery:
    resource: str  # gpu | cpu | memory
    kind: Literal["allocation", "capacity"]
    promql: str


# --- building the queries (pure) --------------------------------------------------------------------


def prometheus_duration(seconds: float) -> str:
    """Seconds as a PromQL duration, to the millisecond (`604800s`, `1500ms`)."""
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def _number(value: float) -> str:
    """A number in PromQL, to the millisecond, without a trailing `.0` (`1767225600`, `0.5`)."""
    text = f"{round(value, 3):.3f}".rstrip("0").rstrip(".")
    return text or "0"


def window_range(config: UsageDbConfig, now: float) -> float:
    """Seconds from the window's start to `now` (wall clock, seconds since the epoch)."""
    size = config.window_size
    if config.window_type != "tumbling":
        return size
    start = 0.0 if config.tumbling_start is None else config.tumbling_start.timestamp()
    return now - (start + math.floor((now - start) / size) * size)


def range_query(expression: str, window: float, resolution: float, half_life: float, now: float) -> str:
    """`sum_over_time` of `expression` over the `window` seconds before `now`, in steps of `resolution`,
    each step weighted by 0.5 per `half_life` of age (no weighting when `half_life` <= 0)."""
    if half_life > 0:
        expression = f"({expression}) * 0.5^(({_number(now)} - time()) / {_number(half_life)})"
    return f"sum_over_time(({expression})[{prometheus_duration(window)}:{prometheus_duration(resolution)}])"


def usage_queries(config: UsageDbConfig, now: float) -> list[UsageQuery]:
    """The queries for the usage at `now`; none when the window is empty (a tumbling window that starts
    at `now`: no usage yet)."""
    window = window_range(config, now)
    if round(window * 1000) <= 0:
        return []
    return [
        UsageQuery(
            resource,
            kind,
            range_query(
                config.metric(f"{resource}{kind.capitalize()}Metric"),
                window,
                config.resolution,
                config.half_life,
                now,
            ),
        )
        for kind in _KINDS
        for resource in RESOURCE_NAMES
    ]


# --- reading the answers (pure) ---------------------------------------------------------------------


def parse_vector(status: int, body: bytes) -> list[tuple[dict[str, str], float]]:
    """The (labels, value) samples of an `/api/v1/query` answer; UsageQueryError when it is not a
    successful vector (the message is one line)."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        snippet = body[:80].decode("utf-8", "replace").replace("\n", " ")
        raise UsageQueryError(f"HTTP {status}: not a JSON answer ({snippet!r})") from None
    if not isinstance(document, dict):
        raise UsageQueryError(f"HTTP {status}: unexpected answer (not a JSON object)")
    if document.get("status") != "success" or not 200 <= status < 300:
        kind = document.get("errorType") or "error"
        message = str(document.get("error") or document.get("status") or "no status").replace("\n", " ")
        raise UsageQueryError(f"HTTP {status}: {kind}: {message}")
    data = document.get("data")
    if (
        not isinstance(data, dict)
        or data.get("resultType") != "vector"
        or not isinstance(data.get("result"), list)
    ):
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise UsageQueryError(f"expected a vector result, got {kind!r}")
    samples = []
    for entry in data["result"]:
        try:
            labels = {str(k): str(v) for k, v in entry["metric"].items()}
            value = float(entry["value"][1])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise UsageQueryError(f"malformed sample in the result: {str(entry)[:80]!r}") from None
        if math.isfinite(value):
            samples.append((labels, value))
    return samples


def queue_usage(
    allocation: Mapping[str, list[tuple[dict[str, str], float]]],
    capacity: Mapping[str, list[tuple[dict[str, str], float]]],
) -> dict[str, Resources]:
    """Each queue's share of the capacity (0..1 per resource) from the samples of the allocation and
    capacity queries, per resource. Samples without a queue label are ignored."""
    totals: dict[str, list[float]] = {}
    for index, resource in enumerate(RESOURCE_NAMES):
        cap = sum(value for _, value in capacity.get(resource, ()))
        if cap <= 0:
            continue
        for labels, value in allocation.get(resource, ()):
            queue = labels.get(QUEUE_LABEL)
            if queue:
                totals.setdefault(queue, [0.0] * len(RESOURCE_NAMES))[index] += value / cap
    return {
        queue: Resources(*(max(share, 0.0) for share in shares))
        for queue, shares in totals.items()
        if any(share > 0 for share in shares)
    }


# --- fetching ---------------------------------------------------------------------------------------


class PrometheusUsage:
    """The queues' usage from Prometheus, fetched in the background (see the module doc).

    `wall`: the wall clock (seconds since the epoch; tests pass their own); `transport`: for tests."""

    def __init__(
        self,
        config: UsageDbConfig,
        *,
        wall: Callable[[], float] = time.time,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not config.connection_string:
            raise ValueError("PrometheusUsage needs usageDBConfig.connectionString")
        self.config = config
        self.url = config.connection_string.rstrip("/") + QUERY_PATH
        self.wall = wall
        self.transport = transport
        # (fetch time, usage) of the last good answer; replaced whole (read from the cycle's thread).
        self.latest: tuple[float, dict[str, Resources]] | None = None
        self.answered = asyncio.Event()  # set after the first fetch, good or bad
        self.fetch_seconds = 0.0  # the last fetch's duration
        self._failing = False
        self._stale = False

    def usage(self, now: float | None = None) -> dict[str, Resources]:
        """The latest answer's usage, or none when there is no answer yet or it is older than
        `stalenessPeriod` at `now` (wall clock; default: now)."""
        latest = self.latest
        if latest is None:
            return {}
        at, usage = latest
        age = (self.wall() if now is None else now) - at
        if age > self.config.staleness_period:
            if not self._stale:
                self._stale = True
                log.warning(
                    "time-based usage from %s is stale (fetched %.0fs ago, stalenessPeriod %.0fs); "
                    "scheduling without it until Prometheus answers",
                    self.url,
                    age,
                    self.config.staleness_period,
                )
            return {}
        return usage

    async def fetch(self) -> bool:
        """One fetch of every query; True when it succeeded (then `latest` is its answer)."""
        now = self.wall()
        began = time.perf_counter()
        try:
            usage = await self._query(now)
        except UsageQueryError as error:
            self._failed(str(error))
            return False
        except Exception as error:  # unreachable, timed out, ...: one line in the log, never a dead fetcher
            self._failed(f"{type(error).__name__}: {error}".replace("\n", " "))
            return False
        finally:
            self.fetch_seconds = time.perf_counter() - began
            self.answered.set()
        self.latest = (now, usage)
        if self._failing or self._stale:
            log.info("time-based usage from %s is available again", self.url)
        self._failing = self._stale = False
        return True

    def _failed(self, reason: str) -> None:
        if self._failing:
            log.debug("time-based usage from %s: %s", self.url, reason)
            return
        self._failing = True
        log.warning(
            "time-based usage from %s failed: %s (the last answer counts until stalenessPeriod, then none)",
            self.url,
            reason,
        )

    async def _query(self, now: float) -> dict[str, Resources]:
        queries = usage_queries(self.config, now)
        if not queries:
            return {}
        timeout = httpx2.Timeout(self.config.query_timeout)
        async with httpx2.AsyncClient(timeout=timeout, transport=self.transport) as client:

            async def one(query: UsageQuery) -> list[tuple[dict[str, str], float]]:
                params = {"query": query.promql, "time": _number(now)}
                response = await client.get(self.url, params=params)
                return parse_vector(response.status_code, response.content)

            answers = await asyncio.gather(*(one(q) for q in queries))
        allocation: dict[str, list[tuple[dict[str, str], float]]] = {}
        capacity: dict[str, list[tuple[dict[str, str], float]]] = {}
        for query, samples in zip(queries, answers, strict=True):
            (allocation if query.kind == "allocation" else capacity)[query.resource] = samples
        return queue_usage(allocation, capacity)

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch now and every `fetchInterval` until `stop` is set."""
        while not stop.is_set():
            await self.fetch()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.fetch_interval)


__all__ = [
    "PrometheusUsage",
    "UsageQuery",
    "UsageQueryError",
    "parse_vector",
    "prometheus_duration",
    "queue_usage",
    "range_query",
    "usage_queries",
    "window_range",
]
