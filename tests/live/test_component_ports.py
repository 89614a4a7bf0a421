"""`run_components`' servers and their ports: a port serves there; port 0 starts no server at all (as
`kai-scheduler run --metrics-port 0 --plugin-server-port 0`)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from identities import client_as, run_as
from live_support import eventually, in_thread, run
from ports import free_port, http_status

from kai_fakeapi import FakeApiServer
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.components import RunOptions, run_components
from kai_scheduler.k8s.runtime.http_server import BackgroundHTTPServer


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the HTTP servers the components start."""
    names: list[str] = []
    start = BackgroundHTTPServer.start

    def recording(self: BackgroundHTTPServer) -> None:
        names.append(self.name)
        start(self)

    monkeypatch.setattr(BackgroundHTTPServer, "start", recording)
    return names


def _run_scheduler(server: FakeApiServer, options: RunOptions, until_served: list[str]) -> list[int]:
    """Run the scheduler until its informers have listed pods and every URL of `until_served` answers 200;
    the statuses of those URLs."""

    async def body() -> list[int]:
        stop = asyncio.Event()
        async with client_as(server, run_as(options.components)) as client:
            task = asyncio.create_task(run_components(options, stop, client))
            await eventually(lambda: bool(server.requests(verb="list", resource="pods")), timeout=8)
            statuses: list[int] = []

            async def served() -> bool:
                statuses[:] = [await in_thread(http_status, url) for url in until_served]
                return all(status == 200 for status in statuses)

            deadline = asyncio.get_running_loop().time() + 8
            while not await served() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.wait_for(task, 10)
            return statuses

    return run(body(), timeout=30)


def _options(metrics_port: int, plugin_server_port: int) -> RunOptions:
    return RunOptions(
        components=frozenset({"scheduler"}),
        config=SchedulerConfig(),  # lists the snapshot plugin: the plugin server has an endpoint
        metrics_port=metrics_port,
        plugin_server_port=plugin_server_port,
    )


def test_port_zero_starts_no_server(server: FakeApiServer, started: list[str]) -> None:
    _run_scheduler(server, _options(0, 0), until_served=[])
    assert started == []


def test_a_port_serves_there(server: FakeApiServer, started: list[str]) -> None:
    metrics, plugins = free_port(), free_port()
    urls = [f"http://127.0.0.1:{metrics}/readyz", f"http://127.0.0.1:{plugins}/get-snapshot"]
    assert _run_scheduler(server, _options(metrics, plugins), until_served=urls) == [200, 200]
    assert sorted(started) == ["metrics", "plugins"]


@pytest.mark.parametrize("which", ["metrics", "plugins"])
def test_a_port_in_use_names_the_server_and_the_address(which: str) -> None:
    from kai_scheduler.k8s.runtime.http_server import MetricsServer
    from kai_scheduler.k8s.scheduler.plugin_server import PluginServer

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        server: BackgroundHTTPServer = (
            MetricsServer(host="127.0.0.1", port=port)
            if which == "metrics"
            else PluginServer(lambda: None, SchedulerConfig(), host="127.0.0.1", port=port)
        )
        with pytest.raises(OSError) as raised:
            server.start()
    assert str(raised.value).startswith(f"{which} server: cannot listen on 127.0.0.1:{port} (")
    assert "in use" in str(raised.value)
