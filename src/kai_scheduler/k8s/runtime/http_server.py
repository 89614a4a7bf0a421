"""Every component's plain-HTTP endpoints (the chart probes and scrapes them on :8080).

* `/metrics`: the Prometheus exposition of one `CollectorRegistry` (OpenMetrics when the scraper asks for
  it, `?name[]=` filters as prometheus_client's own handler supports them);
* `/healthz`: 200 while the process is alive (and an optional `alive` check passes), else 503;
* `/readyz`: 200 when the `ready` check says so (caches synced, leader known, ...), else 503.

The server runs in a daemon thread (`http.server.ThreadingHTTPServer`), so it keeps answering probes while
the asyncio loop is busy; `start()` binds before returning (a port in use fails there, with port 0 the
chosen port is in `.port`), `stop()` returns once the socket is closed. From asyncio code use
`async with MetricsServer(...)` or `await server.aclose()`. The checks run on the server's threads: they
must be thread-safe and quick (read a flag or an `Event`, do not call the API server).

`BackgroundHTTPServer` is the reusable part (the admission webhooks' HTTPS server builds on it).
"""

from __future__ import annotations

import asyncio
import errno
import gzip
import logging
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self, cast
from urllib.parse import parse_qs, urlsplit

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

log = logging.getLogger(__name__)

Check = Callable[[], bool]
"""A liveness or readiness check: True when healthy / ready. Raising counts as False."""

METRICS_PORT = 8080
METRICS_PATH = "/metrics"
HEALTHZ_PATH = "/healthz"
READYZ_PATH = "/readyz"

_POLL_INTERVAL = 0.1  # how often the serving loop looks for a shutdown request, in seconds
_STOP_TIMEOUT = 5.0


class AppHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that carries the application state its handlers need (`app`), binds IPv6
    hosts dual-stack, and logs request errors instead of printing tracebacks to stderr."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's 5 drops connections when a burst of probes or reviews arrives

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], app: Any, *, name: str
    ) -> None:
        self.app = app
        self.name = name
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            # `::` serves IPv4 too, as Kubernetes probes of a dual-stack pod may use either.
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("%s: error serving %s", self.name, client_address, exc_info=True)


class QuietHandler(BaseHTTPRequestHandler):
    """Request logs go to the `logging` module at debug level, not to stderr."""

    server_version = "kai-scheduler"
    protocol_version = "HTTP/1.1"
    timeout: ClassVar[float | None] = 30.0  # seconds a client may stay silent before its connection is cut

    @property
    def app(self) -> Any:
        """The `app` object of the server this request came to."""
        return cast(AppHTTPServer, self.server).app

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def send_body(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        *,
        head: bool = False,
        encoding: str | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def send_text(self, status: HTTPStatus, text: str, *, head: bool = False) -> None:
        self.send_body(status, f"{text}\n".encode(), "text/plain; charset=utf-8", head=head)


# Why an address cannot be listened on: taken, not this host's, or a privileged port.
_ADDRESS_ERRORS = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES})


class BackgroundHTTPServer:
    """An `AppHTTPServer` served from a daemon thread; `start()`/`stop()` are idempotent.

    Subclasses give the handler class and the `app` object, and may override `_make_server` (TLS)."""

    def __init__(
        self,
        handler: type[BaseHTTPRequestHandler],
        app: Any,
        *,
        host: str,
        port: int,
        name: str,
    ) -> None:
        self._handler = handler
        self._app = app
        self._address = (host, port)
        self.name = name
        self._server: AppHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _make_server(self) -> AppHTTPServer:
        return AppHTTPServer(self._address, self._handler, self._app, name=self.name)

    @property
    def host(self) -> str:
        return self._address[0]

    @property
    def port(self) -> int:
        """The bound port once started (the real one when asked for port 0), else the configured one."""
        server = self._server
        return int(server.server_address[1]) if server is not None else self._address[1]

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Bind and start serving; raises OSError when the address cannot be bound."""
        with self._lock:
            if self._server is not None:
                return
            try:
                server = self._make_server()
            except OSError as error:
                if error.errno not in _ADDRESS_ERRORS:
                    raise  # (a missing certificate, ...: its own message says what)
                # Say which server and which address: "Address already in use" alone names neither.
                where = f"{self.host or '*'}:{self._address[1]}"
                reason = (error.strerror or str(error)).lower()
                raise OSError(f"{self.name} server: cannot listen on {where} ({reason})") from None
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": _POLL_INTERVAL},
                name=f"{self.name}-http",
                daemon=True,
            )
            thread.start()
            self._server, self._thread = server, thread
        log.info("%s listening on %s:%d", self.name, self.host or "*", self.port)

    def stop(self) -> None:
        """Stop accepting, close the socket and wait (briefly) for the serving thread."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(_STOP_TIMEOUT)

    async def aclose(self) -> None:
        """`stop()` without blocking the event loop."""
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


# --- metrics and probes -------------------------------------------------------------------------


class _Probes:
    def __init__(self, registry: CollectorRegistry, alive: Check | None, ready: Check | None) -> None:
        self.registry = registry
        self.alive = alive
        self.ready = ready


class _MetricsHandler(QuietHandler):
    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _serve(self, *, head: bool) -> None:
        probes: _Probes = self.app
        url = urlsplit(self.path)
        if url.path == METRICS_PATH:
            self._metrics(probes.registry, parse_qs(url.query), head=head)
        elif url.path == HEALTHZ_PATH:
            self._probe(probes.alive, "alive", "not alive", head=head)
        elif url.path == READYZ_PATH:
            self._probe(probes.ready, "ready", "not ready", head=head)
        else:
            self.send_text(
                HTTPStatus.NOT_FOUND,
                f"not found; try {METRICS_PATH}, {HEALTHZ_PATH} or {READYZ_PATH}",
                head=head,
            )

    def _metrics(self, registry: CollectorRegistry, query: dict[str, list[str]], *, head: bool) -> None:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        names = query.get("name[]")
        source = registry.restricted_registry(names) if names else registry
        try:
            body = encoder(source)
        except Exception as exc:
            log.exception("collecting metrics failed")
            self.send_text(HTTPStatus.INTERNAL_SERVER_ERROR, f"collecting metrics failed: {exc}", head=head)
            return
        encoding = None
        if gzip_accepted(self.headers.get("Accept-Encoding", "")):
            body, encoding = gzip.compress(body), "gzip"
        self.send_body(HTTPStatus.OK, body, content_type, head=head, encoding=encoding)

    def _probe(self, check: Check | None, good: str, bad: str, *, head: bool) -> None:
        if check is None:
            self.send_text(HTTPStatus.OK, good, head=head)
            return
        try:
            passed = bool(check())
        except Exception as exc:
            log.warning("%s check failed", good, exc_info=True)
            self.send_text(HTTPStatus.SERVICE_UNAVAILABLE, f"{bad}: {type(exc).__name__}: {exc}", head=head)
            return
        status = HTTPStatus.OK if passed else HTTPStatus.SERVICE_UNAVAILABLE
        self.send_text(status, good if passed else bad, head=head)


class MetricsServer(BackgroundHTTPServer):
    """`/metrics`, `/healthz` and `/readyz` on `host:port` (default every interface, port 8080).

    `registry`: what `/metrics` exposes (default: prometheus_client's global registry). `ready`: `/readyz`
    answers 200 while it returns True, 503 otherwise (no check: always ready). `alive`: the same for
    `/healthz` (no check: 200 whenever the server answers)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        host: str = "0.0.0.0",
        port: int = METRICS_PORT,
        ready: Check | None = None,
        alive: Check | None = None,
    ) -> None:
        probes = _Probes(registry if registry is not None else REGISTRY, alive, ready)
        super().__init__(_MetricsHandler, probes, host=host, port=port, name="metrics")
        self.registry = probes.registry

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in {"", "0.0.0.0", "::"} else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"


__all__ = [
    "HEALTHZ_PATH",
    "METRICS_PATH",
    "METRICS_PORT",
    "READYZ_PATH",
    "AppHTTPServer",
    "BackgroundHTTPServer",
    "Check",
    "MetricsServer",
    "QuietHandler",
]
