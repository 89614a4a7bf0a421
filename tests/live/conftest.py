"""Fixtures for live-mode tests: the strict fake API server and clients on it.

pytest-asyncio is not used: each test body is a coroutine run with `live_support.run(...)` (asyncio.run
with a timeout), so that a hang fails the test instead of the suite. This folder and tests/ are put on the
import path for `live_support` and `helpers`.

Every request is authenticated and authorized as a real API server does it, against the chart's RBAC
(`identities.py` decides who each client is); a test ends with no request refused (401 or 403) unless it
is marked `refusals_expected` (it refuses on purpose, and checks `server.forbidden()` itself).
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

from identities import client_as, refusals, strict_server  # noqa: E402 (found through the path above)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chart_values(values): the chart values whose RBAC the `server` fixture installs"
    )
    config.addinivalue_line(
        "markers", "refusals_expected: the test has requests refused on purpose (it checks them itself)"
    )


def _server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fakeapi-conn")]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeApiServer]:
    """A started strict fake API server (HTTPS, tokens, RBAC) with the chart's RBAC installed (default
    values, or the test's `chart_values` marker) and frequent bookmarks."""
    values = request.node.get_closest_marker("chart_values")
    with strict_server(values.args[0] if values else None, bookmark_interval=0.1) as srv:
        yield srv
    deadline = time.monotonic() + 5
    while _server_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    if request.node.get_closest_marker("refusals_expected") is None:
        assert refusals(srv) == [], "requests refused (401/403)"


@pytest.fixture(autouse=True)
def no_undeclared_calls(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Components run here call through an `AccessGuard` (run_components, run_live, `Live`): a call they
    did not declare fails the test, also where a component's loop logged the refusal and went on."""
    yield
    refused = [record.getMessage() for record in caplog.records if record.name == UNDECLARED_LOGGER]
    assert not refused, refused


@pytest.fixture
def make_client(server: FakeApiServer) -> Callable[..., LightkubeClient]:
    """`make_client(identity, **options)` -> a `LightkubeClient` on the fake as `identity` (see
    identities.py: `ADMIN` for the test's own calls, a component's name for that component under test);
    create it inside the test's event loop."""

    def make(identity: str, **options: Any) -> LightkubeClient:
        return client_as(server, identity, **options)

    return make
