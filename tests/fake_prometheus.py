"""A fake Prometheus for tests: `/api/v1/query` on 127.0.0.1 (http.server in a thread), answering each
query with the canned vector of the first rule whose text is in the query (else an empty vector).

with FakePrometheus({"kai_queue_allocated_gpus": {"a": 240.0}, "nvidia_com_gpu": 240.0}) as prom:
    prom.url, prom.queries  # [(query text, time parameter)], in arrival order

A rule's answer is a number (one series without labels) or a mapping queue -> number (one series per
queue, label `queue_name`). `mode`: "ok", "error" (HTTP 400, status error), "garbage" (HTTP 200, not
JSON); `delay`: seconds before each answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Answer = float | Mapping[str, float]


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up mid-answer (the scheduler gave up waiting) is not a test failure."""


class FakePrometheus:
    def __init__(self, rules: Mapping[str, Answer] | None = None) -> None:
        self.rules: dict[str, Answer] = dict(rules or {})
        self.mode = "ok"
        self.delay = 0.0  # seconds before each answer
        self.queries: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                params = parse_qs(parts.query)
                if parts.path != "/api/v1/query":
                    self._send(404, b"404 page not found\n")
                    return
                query = params.get("query", [""])[0]
                moment = params.get("time", [""])[0]
                with fake._lock:
                    fake.queries.append((query, moment))
                    mode, delay = fake.mode, fake.delay
                    answer = next((a for key, a in fake.rules.items() if key in query), None)
                time.sleep(delay)
                if mode == "garbage":
                    self._send(200, b"<html>\nnot prometheus\n</html>")
                elif mode == "error":
                    body = {"status": "error", "errorType": "bad_data", "error": "parse error:\nunexpected"}
                    self._send(400, json.dumps(body).encode())
                else:
                    self._send(200, json.dumps(vector(answer, moment)).encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, args=(0.02,), name="fake-prometheus", daemon=True
        )

    def __enter__(self) -> FakePrometheus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def vector(answer: Answer | None, moment: str) -> dict[str, Any]:
    if answer is None:
        series: list[tuple[dict[str, str], float]] = []
    elif isinstance(answer, Mapping):
        series = [({"queue_name": queue}, value) for queue, value in answer.items()]
    else:
        series = [({}, answer)]
    stamp = float(moment or 0)
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [stamp, repr(value)]} for labels, value in series],
        },
    }


def closed_port_url() -> str:
    """The URL of a port nothing listens on (bound, then closed)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    server.server_close()
    return url
