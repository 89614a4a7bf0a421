"""Fixtures for the fake API server tests: a started server (checked for leaked threads when it stops), a
tiny HTTP client, a watch stream reader and a kubectl runner."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from kai_fakeapi import FakeApiServer

Obj = dict[str, Any]


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fakeapi-")]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = FakeApiServer(bookmark_interval=0.2)
    with srv:
        yield srv
    deadline = time.monotonic() + 10
    while _server_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _server_threads(), f"leaked threads: {_server_threads()}"


class Api:
    """Minimal JSON client on http.client: `api.call("GET", path) -> (status, body)`."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            hdrs = {"Content-Type": content_type, **(headers or {})}
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            ctype = resp.getheader("Content-Type", "")
            return resp.status, json.loads(raw) if ctype.startswith(
                "application/json"
            ) and raw else raw.decode()
        finally:
            conn.close()

    def ok(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        status, out = self.call(method, path, body, **kw)
        assert 200 <= status < 300, (status, out)
        return out


@pytest.fixture
def api(server: FakeApiServer) -> Api:
    return Api(server.url)


class WatchStream:
    """Reads a watch response line by line; `next()` waits at most `timeout` seconds for an event."""

    def __init__(self, url: str, path: str, timeout: float = 20.0) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout
        )
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()

    def next(self) -> Obj | None:
        """The next event, or None at the end of the stream (clean end or connection cut)."""
        try:
            line = self.resp.readline()
        except (http.client.IncompleteRead, ConnectionError, OSError):
            return None
        if not line:
            return None
        event: Obj = json.loads(line)
        return event

    def next_of(self, *types: str, limit: int = 100) -> Obj:
        """The next event of one of `types` (skipping others, e.g. bookmarks)."""
        for _ in range(limit):
            ev = self.next()
            assert ev is not None, "watch ended"
            if ev["type"] in types:
                return ev
        raise AssertionError(f"no {types} event within {limit} events")

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def watch(server: FakeApiServer) -> Iterator[Any]:
    streams: list[WatchStream] = []

    def open_stream(path: str, timeout: float = 20.0, url: str | None = None) -> WatchStream:
        stream = WatchStream(url or server.url, path, timeout)
        streams.append(stream)
        return stream

    yield open_stream
    for s in streams:
        s.close()


def pod(name: str, namespace: str = "default", **spec: Any) -> Obj:
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "demo"}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    body["spec"].update(spec)
    return body


def node(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.count": "8"}},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
    }


@pytest.fixture
def make_pod() -> Any:
    return pod


@pytest.fixture
def make_node() -> Any:
    return node


KUBECTL = shutil.which("kubectl")


@pytest.fixture
def kubectl(server: FakeApiServer, tmp_path: Path) -> Any:
    """Run kubectl against the server: `kubectl("get", "pods", "-o", "json") -> CompletedProcess`."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    config = server.write_kubeconfig(tmp_path / "kubeconfig")

    def run(
        *args: str, check: bool = True, timeout: float = 60.0, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(KUBECTL), "--kubeconfig", str(config), "--cache-dir", str(tmp_path / "kcache"), *args]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, input=input_text
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    run.config = config  # type: ignore[attr-defined]
    return run
