"""The one work queue of the live edge: keys to reconcile, de-duplicated, as client-go's workqueue."""

from __future__ import annotations

import asyncio


class KeyQueue:
    """A work queue of keys, like client-go's workqueue: a key waiting is not queued twice, and a key being
    processed is not handed to a second worker; added meanwhile, it comes back after `done`. `add_after`
    queues a key later (the earliest of several such requests wins).

    `hold` keeps a key back until a time (a retry's backoff, a minimum interval between reconciles): an
    `add` meanwhile, from an event or a resync, is kept until then rather than brought forward, so a
    status written by the failed attempt itself cannot cut its backoff short. Holds outlive `close`, so
    that the next term (leader election) still honours them."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._waiting: set[str] = set()
        self._processing: set[str] = set()
        self._again: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._held: dict[str, float] = {}  # key -> loop time before which it is not handed out
        self.adds = 0  # keys that came in: queued, or marked to come back after `done` (client-go's adds)

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, key: str) -> None:
        until = self._held_until(key)
        if until is not None:
            self._schedule(key, until)
            return
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        if key in self._processing:
            if key not in self._again:
                self.adds += 1
                self._again.add(key)
        elif key not in self._waiting:
            self.adds += 1
            self._waiting.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
        elif key not in self._waiting:
            self._schedule(key, asyncio.get_running_loop().time() + delay)

    def hold(self, key: str, delay: float) -> None:
        """Hand `key` out no sooner than `delay` seconds from now (it is not queued by this); a longer hold
        already there stays."""
        if delay > 0:
            until = asyncio.get_running_loop().time() + delay
            self._held[key] = max(until, self._held.get(key, until))

    def forget(self, key: str) -> None:
        """Drop the key's hold and pending `add_after` (its object is gone)."""
        self._held.pop(key, None)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _held_until(self, key: str) -> float | None:
        until = self._held.get(key)
        if until is None:
            return None
        if until <= asyncio.get_running_loop().time():
            del self._held[key]
            return None
        return until

    def _schedule(self, key: str, when: float) -> None:
        timer = self._timers.get(key)
        if timer is not None and timer.when() <= when:
            return
        if timer is not None:
            timer.cancel()
        self._timers[key] = asyncio.get_running_loop().call_at(when, self._fire, key)

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> str:
        while True:
            key = await self._queue.get()
            self._waiting.discard(key)
            until = self._held_until(key)
            if until is None:
                self._processing.add(key)
                return key
            self._schedule(key, until)  # held after it was queued: it comes back when the hold ends

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.adds -= 1  # counted when it was marked
            self.add(key)

    def due_in(self, key: str) -> float | None:
        """Seconds until `key`, due later, is queued (None: it is not due later)."""
        timer = self._timers.get(key)
        return None if timer is None else max(0.0, timer.when() - asyncio.get_running_loop().time())

    @property
    def processing(self) -> bool:
        """A key is being processed."""
        return bool(self._processing)

    @property
    def in_progress(self) -> int:
        """How many keys are being processed."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """How many keys are due later (`add_after`, or an `add` kept back by a hold)."""
        return len(self._timers)

    @property
    def idle(self) -> bool:
        """Nothing waiting, in progress or scheduled."""
        return not (self._waiting or self._processing or self._timers)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


__all__ = ["KeyQueue"]
