"""Helpers for live-mode tests (importable because conftest.py puts this folder on the path)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kai_scheduler.fakeapi import FakeApiServer
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.binder import Binder
from kai_scheduler.k8s.informers import FAST_BACKOFF, InformerSet
from kai_scheduler.k8s.lightkube_client import LightkubeClient
from kai_scheduler.k8s.scheduler_loop import SchedulerLoop

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
    """Run a test body on a fresh event loop; fail after `timeout` seconds (a hang fails the test, not
    the suite)."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> None:
    """Wait on the event loop until `predicate()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def in_thread(func: Callable[..., T], *args: Any) -> T:
    """Run a blocking call (e.g. the fake server's stop/restart) without blocking the event loop."""
    return await asyncio.to_thread(func, *args)


# --- a running scheduler and binder on the fake API server ------------------------------------------


class Live:
    """A client, informers, a scheduler loop and (optionally) a binder running against `server`:

    async with Live(server) as live:
        await live.until(lambda: ...)
    """

    def __init__(
        self,
        server: FakeApiServer,
        *,
        period: float = 0.05,
        binder: bool = True,
        loop: bool = True,
        backoff_base: float = 0.02,
        config: SchedulerConfig | None = None,
        **loop_options: Any,
    ) -> None:
        self.server = server
        self.period = period
        self.with_binder = binder
        self.with_loop = loop
        self.backoff_base = backoff_base
        self.config = config or SchedulerConfig()
        self.loop_options = loop_options
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Live:
        self.client = LightkubeClient.from_url(self.server.url, timeout=5.0)
        self.informers = InformerSet(self.client, backoff=FAST_BACKOFF)
        self.informers.start()
        self.loop = SchedulerLoop(
            self.client, self.informers, self.config, period=self.period, **self.loop_options
        )
        self.binder = Binder(self.client, self.informers, backoff_base=self.backoff_base, resync_period=0.5)
        assert await self.informers.wait_synced(5)
        if self.with_loop:
            self.tasks.append(asyncio.create_task(self.loop.run(self.stop)))
        if self.with_binder:
            self.tasks.append(asyncio.create_task(self.binder.run(self.stop)))
        return self

    async def until(self, predicate: Callable[[], bool], timeout: float = 8.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            for task in self.tasks:
                if task.done():
                    task.result()  # surface a crash
                    raise AssertionError("a component stopped")
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached in time")
            await asyncio.sleep(0.02)

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)
        await self.informers.stop()
        await self.client.aclose()
