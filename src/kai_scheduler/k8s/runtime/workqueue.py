"""The one work queue of the live edge: keys to reconcile, de-duplicated, as client-go's workqueue."""

from __future__ import annotations

import asyncio


class KeyQueue:
    """A work queue of keys, like client-go's workqueue: a key waiting is not queued twice, and a key being
    processed is not handed to a second worker; added meanwhile, it comes back after `done`. `add_after`
    queues a key later (retries)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._waiting: set[str] = set()
        self._processing: set[str] = set()
        self._again: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._processing:
            self._again.add(key)
        elif key not in self._waiting:
            self._waiting.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        if key in self._timers or key in self._waiting:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> str:
        key = await self._queue.get()
        self._waiting.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    @property
    def processing(self) -> bool:
        """A key is being processed."""
        return bool(self._processing)

    @property
    def idle(self) -> bool:
        """Nothing waiting, in progress or scheduled."""
        return not (self._waiting or self._processing or self._timers)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


__all__ = ["KeyQueue"]
