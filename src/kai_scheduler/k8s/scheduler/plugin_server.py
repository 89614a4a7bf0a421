"""The scheduler's plugin server: KAI's localhost-only HTTP server (`127.0.0.1:8081`), serving what the
configured endpoint plugins (`plugins/endpoints.py`) offer about the last scheduling cycle.

* `GET /get-snapshot` (plugin `snapshot`): the `ClusterState` the last cycle scheduled, as manifests
  that `kai-scheduler simulate` loads unchanged (`model/state_export.py`): one `kind: List` in YAML,
  after a `#` comment with the cycle's time and the exact command that replays the cycle offline
  (`kai-scheduler simulate snapshot.yaml --start <time> --cycles 1`). Replaying gives that cycle's
  decisions and pending reasons, and the file is a starting point for what-ifs (add a node, change a
  quota, simulate on). `?format=json`: the same List as JSON (also loadable: JSON is YAML).
  `?format=config`: the scheduler's configuration, for `simulate --config` when it is not the default.
* `GET /get-job-order` (plugin `reflectjoborder`): a JSON list of the pending jobs of that state in the
  order the allocate action takes them up (`Scheduler.job_order`), each with its queue and priority.
* `GET /get-fair-share?queue=Q` (with `snapshot`): the fair-share division that cycle took, step by step,
  as far as it explains queue Q (`model/fair_share_record.py`; without `queue`, the whole division):
  the numbers the cycle used, recorded as it divided (`kubectl kai fairshare`).
* `GET /get-queue-usage?queue=Q` (with `snapshot`): who holds Q's resources in that state, per pod group
  and user, against the cycle's quota and fair share, in reclaim order (`controlplane/queue_usage.py`,
  `kubectl kai usage`).

Neither the snapshot nor the job order carries time-based fair share's usage history (the loop's own
record): with `usageDBConfig` on, fair shares, and so the queue order, may differ from the live cycle's.
`/get-fair-share` is that cycle's own division, usage included.

Anything else is 404, as is a queue the cycle did not have; before the first cycle every path answers
503. The loop publishes a `CycleState` (frozen, never changed) after every cycle by swapping one
reference; the server's threads read that reference once per request, so they never see a cycle
half-published and never block the loop. Answers are computed on the server's threads when first asked
for, and kept until the next cycle.

Localhost-only on purpose, as in KAI: the snapshot holds every pod of the cluster. Reach it with
`kubectl port-forward` (or `kubectl exec`) to the scheduler's pod.
"""

from __future__ import annotations

import json
import logging
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import yaml

from kai_scheduler.controlplane.driver import JOB_ORDER_PLUGIN, SNAPSHOT_PLUGIN
from kai_scheduler.controlplane.driver import job_order as allocate_order
from kai_scheduler.controlplane.queue_usage import UnknownQueue, queue_usage
from kai_scheduler.framework.config import SchedulerConfig, config_document
from kai_scheduler.k8s.runtime.http_server import BackgroundHTTPServer, QuietHandler
from kai_scheduler.model.fair_share_record import FairShareRecord
from kai_scheduler.model.fair_share_record import as_json as fair_share_json
from kai_scheduler.model.snapshot import ClusterState
from kai_scheduler.model.state_export import export_state, manifest_list, rfc3339, session_instant

log = logging.getLogger(__name__)

PLUGIN_SERVER_HOST: Final = "127.0.0.1"
PLUGIN_SERVER_PORT: Final = 8081
SNAPSHOT_PATH: Final = "/get-snapshot"
JOB_ORDER_PATH: Final = "/get-job-order"
FAIR_SHARE_PATH: Final = "/get-fair-share"
QUEUE_USAGE_PATH: Final = "/get-queue-usage"
# Which plugin turns on which path.
ENDPOINTS: Final = {SNAPSHOT_PLUGIN: SNAPSHOT_PATH, JOB_ORDER_PLUGIN: JOB_ORDER_PATH}
# What else the snapshot plugin turns on: the last cycle's own numbers about one queue. Not KAI's paths
# (KAI has no such endpoint yet); KAI's configuration turns them on with the plugin it already lists.
SNAPSHOT_EXTRAS: Final = (FAIR_SHARE_PATH, QUEUE_USAGE_PATH)
SNAPSHOT_FILE: Final = "snapshot.yaml"
CONFIG_FILE: Final = "scheduler-config.yaml"
DEFAULT_SERVER: Final = f"localhost:{PLUGIN_SERVER_PORT}"

try:
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Dumper = yaml.SafeDumper


@dataclass(frozen=True, slots=True)
class CycleState:
    """What one cycle scheduled: `state`, at `now` on the session clock whose second 0 is `origin`."""

    cycle: int
    now: float
    origin: datetime
    state: ClusterState
    # The cycle's fair-share division, step by step (None: not recorded).
    fair_share: FairShareRecord | None = None

    @property
    def moment(self) -> datetime:
        """The cycle's wall-clock time (UTC)."""
        return session_instant(self.origin, self.now)


def endpoint_paths(config: SchedulerConfig) -> tuple[str, ...]:
    """The paths the configuration's plugins turn on (none: no plugin server)."""
    names = {plugin.name for plugin in config.plugins()}
    paths = tuple(path for name, path in ENDPOINTS.items() if name in names)
    return paths + SNAPSHOT_EXTRAS if SNAPSHOT_PLUGIN in names else paths


# --- the answers (pure) ----------------------------------------------------------------------------


def replay_command(cycle: CycleState, *, file: str = SNAPSHOT_FILE, config_file: str | None = None) -> str:
    """The command that replays `cycle` from its snapshot saved as `file`."""
    words = ["kai-scheduler", "simulate", file]
    if config_file is not None:
        words += ["--config", config_file]
    words += ["--start", rfc3339(cycle.moment), "--cycles", "1"]
    return shlex.join(words)


def snapshot_yaml(cycle: CycleState, config: SchedulerConfig, *, server: str = DEFAULT_SERVER) -> str:
    """The snapshot as YAML, after a comment that says what it is and how to replay it (`server`: where
    the plugin server is reached, for the command that fetches a configuration of its own)."""
    custom = config != SchedulerConfig()
    body = yaml.dump(
        manifest_list(export_state(cycle.state, origin=cycle.origin, now=cycle.now)),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=120,
    )
    state = cycle.state
    lines = [
        f"kai-scheduler snapshot: the cluster as scheduling cycle {cycle.cycle} saw it, at "
        f"{rfc3339(cycle.moment)}",
        f"(nodes: {len(state.nodes)}, pods: {len(state.pods)}, pod groups: {len(state.pod_groups)}, "
        f"queues: {len(state.queues)}). Replay that cycle offline (this output saved as {SNAPSHOT_FILE}):",
    ]
    if custom:
        lines += [
            f"  curl -s '{server}{SNAPSHOT_PATH}?format=config' > {CONFIG_FILE}",
            f"  {replay_command(cycle, config_file=CONFIG_FILE)}",
            f"where {CONFIG_FILE} is the scheduler's configuration:",
            *(f"  {line}" for line in _yaml(config_document(config)).splitlines()),
        ]
    else:
        lines.append(f"  {replay_command(cycle)}")
    nominated = sum(1 for pod in state.pods if pod.nominated_node is not None)
    if nominated:
        lines.append(
            f"Not in the snapshot: where the cycle before pipelined {nominated} pod(s); the replay takes "
            "them as plain pending pods."
        )
    if state.queue_usage or config.usage_db is not None:
        lines.append(
            "Not in the snapshot: the queues' usage history (time-based fair share); the replay starts "
            "without one."
        )
    header = "".join(f"# {line}".rstrip() + "\n" for line in lines)
    return header + body


def snapshot_json(cycle: CycleState) -> str:
    return json.dumps(manifest_list(export_state(cycle.state, origin=cycle.origin, now=cycle.now))) + "\n"


def config_yaml(config: SchedulerConfig) -> str:
    return _yaml(config_document(config))


def job_order(cycle: CycleState, config: SchedulerConfig) -> list[dict[str, Any]]:
    """The pending jobs of the cycle's state in the order allocate takes them up, on a snapshot of its
    own (the cycle's was changed by the cycle)."""
    jobs = allocate_order(config, cycle.state, cycle=cycle.cycle, now=cycle.now)
    return [
        {
            "job": job.key,
            "queue": job.queue,
            "priority": job.priority,
            "preemptible": job.preemptible,
            "pendingPods": len(job.pending_tasks()),
        }
        for job in jobs
    ]


class NotServed(Exception):
    """What was asked for is not there: an HTTP status and one line."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def fair_share(cycle: CycleState, queue: str | None) -> dict[str, Any]:
    """The cycle's division as far as it explains `queue` (None: all of it)."""
    record = cycle.fair_share
    if record is None:
        raise NotServed(HTTPStatus.SERVICE_UNAVAILABLE, "the last cycle kept no fair-share record")
    if queue is not None and queue not in record.queues():
        raise NotServed(HTTPStatus.NOT_FOUND, f"queue {queue}: not in scheduling cycle {cycle.cycle}")
    return fair_share_json(record, queue)


def usage(cycle: CycleState, config: SchedulerConfig, queue: str) -> dict[str, Any]:
    """Who holds `queue`'s resources in the cycle's state."""
    try:
        return queue_usage(config, cycle.state, queue, cycle.fair_share, cycle=cycle.cycle, now=cycle.now)
    except UnknownQueue:
        missing = f"queue {queue}: not in scheduling cycle {cycle.cycle}"
        raise NotServed(HTTPStatus.NOT_FOUND, missing) from None


def _yaml(document: Any) -> str:
    return str(yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))


# --- the server ------------------------------------------------------------------------------------


class _App:
    def __init__(
        self, source: Callable[[], CycleState | None], config: SchedulerConfig, paths: tuple[str, ...]
    ) -> None:
        self.source = source
        self.config = config
        self.paths = paths
        self.server = DEFAULT_SERVER  # how the snapshot's comment names this server
        self._lock = threading.Lock()
        self._cached_for: CycleState | None = None
        self._cache: dict[str, tuple[bytes, str]] = {}

    def answer(self, cycle: CycleState, what: str) -> tuple[bytes, str]:
        """(body, content type) of `what` for `cycle`, computed once per cycle."""
        with self._lock:
            if self._cached_for is not cycle:
                self._cached_for, self._cache = cycle, {}
            cached = self._cache.get(what)
        if cached is not None:
            return cached
        answer = self._compute(cycle, what)
        with self._lock:
            if self._cached_for is cycle:
                self._cache[what] = answer
        return answer

    def _compute(self, cycle: CycleState, what: str) -> tuple[bytes, str]:
        if what == "yaml":
            body = snapshot_yaml(cycle, self.config, server=self.server)
            return body.encode(), "application/yaml; charset=utf-8"
        if what == "json":
            return snapshot_json(cycle).encode(), "application/json"
        if what == "config":
            return config_yaml(self.config).encode(), "application/yaml; charset=utf-8"
        kind, _, queue = what.partition(":")
        if kind == "fair-share":
            return _json(fair_share(cycle, queue or None)), "application/json"
        if kind == "usage":
            return _json(usage(cycle, self.config, queue)), "application/json"
        return _json(job_order(cycle, self.config)), "application/json"


def _json(document: Any) -> bytes:
    return (json.dumps(document, indent=1) + "\n").encode()


class _Handler(QuietHandler):
    def do_GET(self) -> None:
        app: _App = self.app
        url = urlsplit(self.path)
        if url.path not in app.paths:
            offered = " or ".join(app.paths)
            self.send_text(HTTPStatus.NOT_FOUND, f"not found; try {offered}")
            return
        what = "job-order"
        queues = parse_qs(url.query).get("queue") or []
        if url.path in SNAPSHOT_EXTRAS:
            if url.path == QUEUE_USAGE_PATH and not queues:
                self.send_text(HTTPStatus.BAD_REQUEST, f"{url.path}: which queue? (?queue=NAME)")
                return
            kind = "fair-share" if url.path == FAIR_SHARE_PATH else "usage"
            what = f"{kind}:{queues[-1] if queues else ''}"
        elif url.path == SNAPSHOT_PATH:
            formats = parse_qs(url.query).get("format") or ["yaml"]
            what = formats[-1]
            if what not in ("yaml", "json", "config"):
                self.send_text(HTTPStatus.BAD_REQUEST, f"format: expected yaml, json or config, got {what!r}")
                return
        cycle = app.source()
        if cycle is None:
            self.send_text(HTTPStatus.SERVICE_UNAVAILABLE, "no scheduling cycle has run yet; try again soon")
            return
        try:
            body, content_type = app.answer(cycle, what)
        except NotServed as refusal:
            self.send_text(refusal.status, str(refusal))
            return
        except Exception as error:
            log.exception("plugin server: %s failed", url.path)
            self.send_text(HTTPStatus.INTERNAL_SERVER_ERROR, f"{url.path} failed: {error}")
            return
        self.send_body(HTTPStatus.OK, body, content_type)


class PluginServer(BackgroundHTTPServer):
    """Serves the endpoints that `config` turns on (`endpoint_paths`) from what `source` returns: the
    last cycle's `CycleState`, or None before the first cycle. Default: 127.0.0.1:8081 (port 0: any free
    port, then `.port`)."""

    def __init__(
        self,
        source: Callable[[], CycleState | None],
        config: SchedulerConfig,
        *,
        host: str = PLUGIN_SERVER_HOST,
        port: int = PLUGIN_SERVER_PORT,
    ) -> None:
        self.paths = endpoint_paths(config)
        self._plugins = _App(source, config, self.paths)
        super().__init__(_Handler, self._plugins, host=host, port=port, name="plugins")

    def start(self) -> None:
        super().start()
        self._plugins.server = f"localhost:{self.port}"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


__all__ = [
    "ENDPOINTS",
    "FAIR_SHARE_PATH",
    "JOB_ORDER_PATH",
    "PLUGIN_SERVER_HOST",
    "PLUGIN_SERVER_PORT",
    "QUEUE_USAGE_PATH",
    "SNAPSHOT_PATH",
    "CycleState",
    "PluginServer",
    "endpoint_paths",
    "job_order",
    "replay_command",
    "snapshot_json",
    "snapshot_yaml",
]
