"""Fixtures for the fake API server tests: a started server (checked for leaked threads when it stops), a
tiny HTTP client, a watch stream reader and a kubectl runner; and for strict mode (authentication and
RBAC, over HTTPS): a strict server, clients with a ServiceAccount's token, kubectl as a ServiceAccount."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
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


def _running(srv: FakeApiServer) -> Iterator[FakeApiServer]:
    with srv:
        yield srv
    deadline = time.monotonic() + 10
    while _server_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _server_threads(), f"leaked threads: {_server_threads()}"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    yield from _running(FakeApiServer(bookmark_interval=0.2))


@pytest.fixture
def strict_server() -> Iterator[FakeApiServer]:
    """Authentication and RBAC on every request, over HTTPS (kubectl sends tokens only there)."""
    yield from _running(FakeApiServer(bookmark_interval=0.2, strict=True, tls=True))


class Api:
    """Minimal JSON client on http.client: `api.call("GET", path) -> (status, body)`; with `token`, it
    sends it as a bearer token; an https `url` needs the server's CA (`ca_pem`)."""

    def __init__(self, url: str, token: str | None = None, ca_pem: bytes | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.token = token
        self.tls = (
            ssl.create_default_context(cadata=ca_pem.decode()) if parts.scheme == "https" and ca_pem else None
        )

    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        if self.tls is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        conn = self.connection()
        try:
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            hdrs = {"Content-Type": content_type, **self.auth_headers(), **(headers or {})}
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

    def __init__(self, url: str, path: str, timeout: float = 20.0, api: Api | None = None) -> None:
        """`api`: the client whose connection and token the watch uses (default: a plain one)."""
        api = api or Api(url)
        self.conn = api.connection(timeout)
        self.conn.request("GET", path, headers=api.auth_headers())
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


def _streams(server: FakeApiServer, api: Api | None = None) -> Iterator[Any]:
    streams: list[WatchStream] = []

    def open_stream(path: str, timeout: float = 20.0, url: str | None = None) -> WatchStream:
        stream = WatchStream(url or server.url, path, timeout, api)
        streams.append(stream)
        return stream

    yield open_stream
    for s in streams:
        s.close()


@pytest.fixture
def watch(server: FakeApiServer) -> Iterator[Any]:
    yield from _streams(server)


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
    return _kubectl_runner(server.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


def _kubectl_runner(config: Path, tmp_path: Path) -> Any:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")

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


def _ensure_service_account(server: FakeApiServer, namespace: str, name: str) -> None:
    if server.store.try_get("namespaces", namespace) is None:
        server.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if server.store.try_get("serviceaccounts", name, namespace) is None:
        server.store.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
        )


@pytest.fixture
def service_account(strict_server: FakeApiServer) -> Any:
    """`service_account("ns", "sa")`: make the ServiceAccount (and its namespace) unless it exists."""
    return lambda namespace, name: _ensure_service_account(strict_server, namespace, name)


@pytest.fixture
def api_as(strict_server: FakeApiServer) -> Any:
    """`api_as("ns", "sa")`: a client with that ServiceAccount's token (made if missing); `api_as()`: the
    admin's; `api_as(token=...)`: with that token ("": none)."""

    def make(namespace: str | None = None, name: str | None = None, *, token: str | None = None) -> Api:
        ca = strict_server.tls.ca_pem if strict_server.tls is not None else None
        if token is None and namespace is not None and name is not None:
            _ensure_service_account(strict_server, namespace, name)
            token = strict_server.service_account_token(namespace, name)
        return Api(strict_server.url, "fakeapi" if token is None else token or None, ca)

    return make


@pytest.fixture
def kubectl_as(strict_server: FakeApiServer, tmp_path: Path) -> Any:
    """`kubectl_as("ns", "sa")("get", "pods")`: kubectl as that ServiceAccount (made if missing);
    `kubectl_as()`: as the admin."""

    def make(namespace: str | None = None, name: str | None = None) -> Any:
        account = None
        if namespace is not None and name is not None:
            _ensure_service_account(strict_server, namespace, name)
            account = (namespace, name)
        config = tmp_path / f"kubeconfig-{namespace}-{name}"
        return _kubectl_runner(strict_server.write_kubeconfig(config, service_account=account), tmp_path)

    return make


@pytest.fixture
def watch_as(strict_server: FakeApiServer, api_as: Any) -> Iterator[Any]:
    """`watch_as("ns", "sa")(path)`: a watch stream with that ServiceAccount's token."""
    generators: list[Iterator[Any]] = []

    def make(namespace: str, name: str) -> Any:
        streams = _streams(strict_server, api_as(namespace, name))
        generators.append(streams)
        return next(streams)

    yield make
    for streams in generators:
        next(streams, None)
