"""A real Prometheus for tests: the `prometheus` binary (Debian's package, 2.x) as a child process that
scrapes given targets, and what a test needs to check its answers.

with running_prometheus(tmp_path, {"kai": "127.0.0.1:8080"}, interval=1.0) as url:
    ...  # url: its base URL, ready to answer queries

Ready is not scraping yet: Prometheus 2.x applies new targets at most every 5 seconds, so the first
scrape comes about 5 s after the start; a test waits for it (a `ScrapeLog` says when it came).

* `PROMETHEUS`: the binary on PATH, or None (then `MISSING` says how to get it);
* `ScrapeLog`: a collector that notes when each scrape happened and what it served;
* `integral`: the area under a series as Prometheus stored it (each scrape's value held until the next).
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from child_process import running
from ports import free_port, http_status
from prometheus_client.core import GaugeMetricFamily

PROMETHEUS = shutil.which("prometheus")
MISSING = (
    "the prometheus binary is not on PATH: install it (Debian/Ubuntu: apt-get install prometheus; "
    ".ci/run does when it is missing) to run this test against a real Prometheus"
)
READY_TIMEOUT = 60.0  # seconds for Prometheus to start answering, on a busy machine

Scrapes = list[tuple[float, dict[str, float]]]


@contextlib.contextmanager
def running_prometheus(directory: Path, targets: Mapping[str, str], *, interval: float) -> Iterator[str]:
    """Prometheus scraping each job's target (job name -> host:port) every `interval` seconds, its
    configuration and storage in `directory`, on a free port of 127.0.0.1; stopped when the block ends."""
    assert PROMETHEUS is not None, MISSING
    seconds = f"{round(interval * 1000)}ms"
    config = {
        # A scrape may take the whole interval: a slow answer on a busy machine is late, not missing.
        "global": {"scrape_interval": seconds, "scrape_timeout": seconds},
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [target]}]} for job, target in targets.items()
        ],
    }
    config_file = directory / "prometheus.yml"
    config_file.write_text(json.dumps(config, indent=2))  # JSON is YAML
    address = f"127.0.0.1:{free_port()}"
    command = [
        PROMETHEUS,
        f"--config.file={config_file}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address={address}",
        "--log.level=warn",
    ]
    url = f"http://{address}"
    with running(command) as child:
        deadline = time.monotonic() + READY_TIMEOUT
        while http_status(f"{url}/-/ready") != 200:
            if child.returncode is not None:
                raise AssertionError("prometheus exited before it was ready")
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus was not ready within {READY_TIMEOUT:.0f}s")
            time.sleep(0.1)
        yield url


class ScrapeLog:
    """A collector without samples of its own: registered after the others, it notes the time of each
    scrape and what `read()` says then (the values that scrape served)."""

    def __init__(self, read: Callable[[], dict[str, float]]) -> None:
        self.read = read
        self._scrapes: Scrapes = []
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        values = self.read()
        with self._lock:
            self._scrapes.append((time.time(), values))
        return iter(())

    @property
    def scrapes(self) -> Scrapes:
        """(time.time() of the scrape, the values), oldest first."""
        with self._lock:
            return list(self._scrapes)


def integral(scrapes: Scrapes, key: str, until: float, half_life: float = 0.0) -> float:
    """The area under `key`'s values from the first scrape to `until`, each scrape's value held until the
    next one; with a half-life, the value at instant s weighs 0.5^((until - s) / half_life)."""
    points = [(at, values.get(key, 0.0)) for at, values in scrapes if at <= until]
    ends = [at for at, _ in points[1:]] + [until] if points else []
    pieces = zip(points, ends, strict=True)
    return sum(value * _length(start, end, until, half_life) for (start, value), end in pieces)


def _length(start: float, end: float, until: float, half_life: float) -> float:
    if half_life <= 0:
        return end - start
    rate = math.log(2) / half_life
    return (math.exp(-rate * (until - end)) - math.exp(-rate * (until - start))) / rate
