"""Fixtures for live-mode tests: the fake API server and a client on it.

pytest-asyncio is not used: each test body is a coroutine run with `live_support.run(...)` (asyncio.run
with a timeout), so that a hang fails the test instead of the suite. This folder and tests/ are put on the
import path for `live_support` and `helpers`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime import access
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

UNDECLARED_LOGGER = access.log.name

for _folder in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fakeapi-conn")]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    """A started fake API server with frequent bookmarks."""
    srv = FakeApiServer(bookmark_interval=0.1)
    with srv:
        yield srv
    deadline = time.monotonic() + 5
    while _server_threads() and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def no_undeclared_calls(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Components run here call through an `AccessGuard` (run_components, run_live, `Live`): a call they
    did not declare fails the test, also where a component's loop logged the refusal and went on."""
    yield
    refused = [record.getMessage() for record in caplog.records if record.name == UNDECLARED_LOGGER]
    assert not refused, refused


@pytest.fixture
def make_client(server: FakeApiServer) -> Callable[..., LightkubeClient]:
    """`make_client()` -> a `LightkubeClient` on the fake (create it inside the test's event loop)."""

    def make(**options: Any) -> LightkubeClient:
        options.setdefault("timeout", 5.0)
        return LightkubeClient.from_url(server.url, **options)

    return make
