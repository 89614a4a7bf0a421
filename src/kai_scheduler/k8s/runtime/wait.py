"""The one wait helper of the live edge: wait for something, unless asked to stop first."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def wait_or_stop(work: Awaitable[Any], stop: asyncio.Event, timeout: float | None = None) -> bool:
    """Wait for `work`, `stop` or `timeout`; True when `work` finished first and did not return False
    (nor raise: a wait that failed is a wait that did not succeed; callers retry or give up)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stopper):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending
    return (
        task in done
        and not stop.is_set()
        and not task.cancelled()
        and task.exception() is None
        and task.result() is not False
    )


__all__ = ["wait_or_stop"]
