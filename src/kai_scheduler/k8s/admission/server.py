"""The admission webhooks' HTTPS server: the review functions of `review.py` and `gpu_sharing.py` on the
paths the chart registers, over TLS from a `tls.crt`/`tls.key` directory (a mounted Secret), renewed
certificates picked up without a restart."""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Mapping
from functools import partial
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.admission.queue_gate import OptIn
from kai_scheduler.k8s.admission.review import (
    DEFAULT_GPU_RUNTIME_CLASS,
    MUTATE_POD_PATH,
    VALIDATE_ACCOUNTED_RESOURCE_PATH,
    VALIDATE_POD_PATH,
    VALIDATE_PODGROUP_PATH,
    VALIDATE_QUEUE_PATH,
    VALIDATE_TOPOLOGY_PATH,
    Review,
    Reviewer,
    denied_response,
    review_accounted_resource_validation,
    review_pod_mutation,
    review_pod_validation,
    review_podgroup_validation,
    review_queue_validation,
    review_topology_validation,
)
from kai_scheduler.k8s.runtime.http_server import AppHTTPServer, BackgroundHTTPServer, QuietHandler

log = logging.getLogger(__name__)


WEBHOOK_PORT: Final = 9443


TLS_CERT_FILE: Final = "tls.crt"


TLS_KEY_FILE: Final = "tls.key"


_MAX_BODY_BYTES = 16 * 1024 * 1024  # the API server sends objects of at most ~3 MiB


class CertificateReloader:
    """The server's TLS context from `<cert_dir>/tls.crt` and `tls.key`, rebuilt when either file changes.

    Kubernetes updates a mounted Secret by swapping a symlink, and cert-manager renews certificates before
    they expire; `context()` notices (at most once per `check_interval` seconds) and loads the new pair. A
    pair that does not load (mid-update, a key that does not match) keeps the previous context until the
    next check. The first load must succeed: the constructor raises (OSError, ssl.SSLError) otherwise."""

    def __init__(
        self,
        cert_dir: str | os.PathLike[str],
        *,
        cert_file: str = TLS_CERT_FILE,
        key_file: str = TLS_KEY_FILE,
        check_interval: float = 1.0,
    ) -> None:
        directory = Path(cert_dir)
        self.cert_path = directory / cert_file
        self.key_path = directory / key_file
        self.check_interval = check_interval
        self._lock = threading.Lock()
        self._signature = self._stat()
        self._context = self._load()
        self._checked = time.monotonic()
        self.reloads = 0
        """How many times a changed pair was loaded (for tests and logs)."""

    def context(self) -> ssl.SSLContext:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= self.check_interval:
                self._checked = now
                self._maybe_reload()
            return self._context

    def _maybe_reload(self) -> None:
        try:
            signature = self._stat()
        except OSError as exc:
            log.warning("TLS files unreadable, keeping the current certificate: %s", exc)
            return
        if signature == self._signature:
            return
        try:
            context = self._load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("new TLS certificate does not load yet, keeping the current one: %s", exc)
            return
        self._context, self._signature = context, signature
        self.reloads += 1
        log.info("loaded a new TLS certificate from %s", self.cert_path)

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        return tuple(
            (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            for stat in (os.stat(self.cert_path), os.stat(self.key_path))
        )

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


class _TLSServer(AppHTTPServer):
    """Wraps each accepted connection with the reloader's current context; the handshake happens in the
    connection's own thread, so a slow or broken client never holds up `accept`."""

    def __init__(self, *args: Any, reloader: CertificateReloader, **kwargs: Any) -> None:
        self.reloader = reloader
        super().__init__(*args, **kwargs)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        try:
            wrapped = self.reloader.context().wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        except (OSError, ValueError):
            sock.close()
            raise OSError("TLS wrap failed") from None
        return wrapped, address


class _WebhookHandler(QuietHandler):
    def setup(self) -> None:
        super().setup()
        self.handshake_ok = True
        try:
            self.request.do_handshake()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError; timeouts too
            log.debug("TLS handshake with %s failed: %s", self.client_address, exc)
            self.handshake_ok = False

    def handle(self) -> None:
        if self.handshake_ok:
            super().handle()

    def do_POST(self) -> None:
        body = self._read_body()
        if body is None:
            return
        reviewers: Mapping[str, Reviewer] = self.app
        path = self.path.split("?", 1)[0]
        reviewer = reviewers.get(path)
        if reviewer is None:
            self.send_text(HTTPStatus.NOT_FOUND, f"no webhook at {path}; try {', '.join(sorted(reviewers))}")
            return
        try:
            review = json.loads(body)
        except (ValueError, RecursionError) as exc:
            self._send_review(
                HTTPStatus.BAD_REQUEST, denied_response("", f"malformed AdmissionReview: not JSON: {exc}")
            )
            return
        self._send_review(HTTPStatus.OK, reviewer(review))

    def _read_body(self) -> bytes | None:
        """The request body (Content-Length or chunked); None after answering a request without a usable one
        (the connection is then closed, as the rest of the body cannot be skipped reliably)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            self.send_text(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
            return None
        length = int(length_text)
        if length > _MAX_BODY_BYTES:
            self.close_connection = True
            self.send_text(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {_MAX_BODY_BYTES} bytes")
            return None
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes | None:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                size = -1
            if size < 0 or total + size > _MAX_BODY_BYTES:
                self.close_connection = True
                self.send_text(HTTPStatus.BAD_REQUEST, "a bad or too large chunked body")
                return None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline(1024)  # the CRLF after the chunk
            total += size

    def do_GET(self) -> None:
        self.send_text(HTTPStatus.METHOD_NOT_ALLOWED, "webhooks take a POST of an AdmissionReview")

    def _send_review(self, status: HTTPStatus, review: Review) -> None:
        self.send_body(status, json.dumps(review).encode(), "application/json")


def webhook_routes(
    *,
    scheduler_name: str = c.SCHEDULER_NAME,
    gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS,
    gpu_sharing_enabled: bool = True,
    queue_opt_in: OptIn | None = None,
) -> dict[str, Reviewer]:
    """Path -> review function, configured, for the six webhooks the chart registers (`queue_opt_in`:
    queue admission gating switched on, see `queue_gate.py`)."""
    return {
        VALIDATE_POD_PATH: partial(
            review_pod_validation, scheduler_name=scheduler_name, gpu_sharing_enabled=gpu_sharing_enabled
        ),
        MUTATE_POD_PATH: partial(
            review_pod_mutation,
            gpu_runtime_class=gpu_runtime_class,
            scheduler_name=scheduler_name,
            queue_opt_in=queue_opt_in,
        ),
        VALIDATE_QUEUE_PATH: review_queue_validation,
        VALIDATE_PODGROUP_PATH: review_podgroup_validation,
        VALIDATE_TOPOLOGY_PATH: review_topology_validation,
        VALIDATE_ACCOUNTED_RESOURCE_PATH: review_accounted_resource_validation,
    }


class WebhookServer(BackgroundHTTPServer):
    """The six webhooks over HTTPS on `host:port` (default every interface, 9443), with the certificate
    and key `tls.crt`/`tls.key` from `cert_dir`, reloaded when they change (see `CertificateReloader`).

    `start()` raises when the certificate does not load or the port cannot be bound."""

    def __init__(
        self,
        cert_dir: str | os.PathLike[str],
        *,
        host: str = "0.0.0.0",
        port: int = WEBHOOK_PORT,
        scheduler_name: str = c.SCHEDULER_NAME,
        gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS,
        gpu_sharing_enabled: bool = True,
        queue_opt_in: OptIn | None = None,
        reload_interval: float = 1.0,
    ) -> None:
        routes = webhook_routes(
            scheduler_name=scheduler_name,
            gpu_runtime_class=gpu_runtime_class,
            gpu_sharing_enabled=gpu_sharing_enabled,
            queue_opt_in=queue_opt_in,
        )
        super().__init__(_WebhookHandler, routes, host=host, port=port, name="admission")
        self.cert_dir = Path(cert_dir)
        self.reload_interval = reload_interval
        self.reloader: CertificateReloader | None = None

    def _make_server(self) -> AppHTTPServer:
        self.reloader = CertificateReloader(self.cert_dir, check_interval=self.reload_interval)
        return _TLSServer(
            (self.host, self.port), self._handler, self._app, name=self.name, reloader=self.reloader
        )


__all__ = [
    "TLS_CERT_FILE",
    "TLS_KEY_FILE",
    "WEBHOOK_PORT",
    "CertificateReloader",
    "WebhookServer",
    "webhook_routes",
]
