"""The one reconcile loop of the live components, as controller-runtime's and kopf's: a keyed work queue
(`KeyQueue`: a key is never reconciled by two workers at once), `workers` workers, a periodic resync that
queues every key the component knows, retries with per-key backoff, and a graceful stop.

A component subclasses `Reconciler`, says in `reconcile(key)` how to bring one object to what it should be,
lists its keys in `keys()` (for the resync) and, in `start(stop)`, waits for its informers and adds the
handlers that `enqueue` keys. What `reconcile` ends with decides what happens to the key next:

- it returns (None, or `Result(requeue_after=s)` to look again after `s` seconds at the latest): done; the
  key's failure count is forgotten;
- it raises `TemporaryError(delay=None)`, or any other exception (a bug, logged with its traceback): the key
  is retried after `backoff.delay(n)` (`n`: its failures in a row) or after the error's own `delay`; until
  then events and resyncs do not bring it forward (`KeyQueue.hold`);
- it raises `PermanentError`: logged once, not retried (a later event or resync queues the key again).

`min_interval` holds a key that long after each reconcile began (a component that replans the whole
cluster on any event: events in a burst give one more plan, not one each). `reconcile_stats` counts what
happened, for metrics (`reconcile_metrics.py`), health and tests.

    class Mine(Reconciler):
        async def reconcile(self, key: str) -> Result | None: ...
    await Mine(workers=4).run(stop)          # until `stop` (an asyncio.Event) is set
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from kai_scheduler.k8s.runtime.backoff import RETRY_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.k8s.runtime.workqueue import KeyQueue

log = logging.getLogger(__name__)

_KEPT_ERRORS = 50
# controller-runtime's buckets for its reconcile times, so that ours read as KAI's controllers' do.
RECONCILE_TIME_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    *(1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)


class TemporaryError(Exception):
    """The key is retried: after `delay` seconds, or (None) after the reconciler's backoff."""

    def __init__(self, message: str = "", *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """The key cannot be brought where it should be by trying again: logged, not retried."""


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile that succeeded asks for: `requeue_after` seconds until the key is looked at
    again (None: only when an event or the resync queues it)."""

    requeue_after: float | None = None


@dataclass(slots=True)
class ReconcileTimes:
    """How long reconciles took: how many fell in each of `RECONCILE_TIME_BUCKETS` (not cumulative; the
    last count is those over the largest bound), their sum and count."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(RECONCILE_TIME_BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(RECONCILE_TIME_BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1


@dataclass(slots=True)
class ReconcileStats:
    """What a reconciler did: `reconciled` (reconciles that succeeded; `requeued_after` of them asked to be
    looked at again later, `requeued` at once), `retried` (failures retried), `failed` (permanent
    failures), `errors` (the latest failures, newest last), `times` (every reconcile's), and the queue's
    state."""

    queue: KeyQueue = field(repr=False, compare=False)
    reconciled: int = 0
    requeued_after: int = 0
    requeued: int = 0
    retried: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    times: ReconcileTimes = field(default_factory=ReconcileTimes)

    @property
    def depth(self) -> int:
        """Keys waiting for a worker (not counting those due later)."""
        return len(self.queue)

    @property
    def delayed(self) -> int:
        """Keys due later: retries, requeues, keys held back."""
        return self.queue.delayed

    @property
    def in_progress(self) -> int:
        return self.queue.in_progress

    @property
    def adds(self) -> int:
        """Keys that came into the queue (`KeyQueue.adds`)."""
        return self.queue.adds

    def note(self, message: str) -> None:
        self.errors.append(message)
        del self.errors[:-_KEPT_ERRORS]


class Reconciler:
    """See the module doc. Subclasses override `reconcile`, and usually `keys` and `start`."""

    name: ClassVar[str] = "reconciler"
    """Names the workers' tasks and starts the log lines."""
    controller: ClassVar[str] = "reconciler"
    """The name controller-runtime gives KAI's counterpart (its `For` kind, in lower case): the
    `controller` label of the metrics (`reconcile_metrics.py`)."""

    def __init__(
        self,
        *,
        workers: int = 1,
        resync_period: float | None = 30.0,
        backoff: Backoff = RETRY_BACKOFF,
        min_interval: float = 0.0,
        drain_timeout: float = 0.0,
    ) -> None:
        self.workers = max(1, workers)
        self.resync_period = resync_period
        self.backoff = backoff
        self.min_interval = min_interval
        self.drain_timeout = drain_timeout
        self.queue = KeyQueue()
        self.reconcile_stats = ReconcileStats(self.queue)
        self._failures: dict[str, int] = {}  # key -> failures in a row
        self.sync_timeout: float | None = None  # how long `start` waits for the informers (`run` sets it)
        self._stopping = False
        self._quiet = asyncio.Event()  # set when no key is in progress (for the drain at stop)

    # --- what a component says ---------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result | None:
        raise NotImplementedError

    def keys(self) -> Iterable[str]:
        """Every key the resync queues."""
        return ()

    async def start(self, stop: asyncio.Event) -> bool:
        """Before the workers start (informers synced, handlers added); False: do not run."""
        del stop
        return True

    async def on_resync(self) -> None:
        """Periodic work besides queueing every key."""

    async def informers_synced(self, informers: Iterable[Informer], stop: asyncio.Event) -> bool:
        """For `start`: the informers have synced; False (with a warning) when they did not within
        `sync_timeout`, or `stop` came first."""
        waits = [informer.wait_synced() for informer in informers]
        if await wait_or_stop(asyncio.gather(*waits), stop, self.sync_timeout):
            return True
        if not stop.is_set():
            log.warning("%s: the informers did not sync in time", self.name)
        return False

    # --- the queue ---------------------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def resync(self) -> None:
        for key in self.keys():
            self.queue.add(key)

    def forget(self, key: str) -> None:
        """The key's object is gone: drop its failures, its hold and its pending retry."""
        self._failures.pop(key, None)
        self.queue.forget(key)

    def failures(self, key: str) -> int:
        """The key's failures in a row (0 after a success)."""
        return self._failures.get(key, 0)

    @property
    def stopping(self) -> bool:
        """`run` is stopping: keys in progress finish, no new ones are taken."""
        return self._stopping

    @property
    def idle(self) -> bool:
        """Nothing queued, in progress or due later."""
        return self.queue.idle

    # --- one key -----------------------------------------------------------------------------------

    async def process(self, key: str) -> None:
        """Reconcile `key` once and act on the outcome (the workers call this; tests may too)."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except PermanentError as error:
            self._failures.pop(key, None)
            self.reconcile_stats.failed += 1
            self._record_failure(key, error)
            log.warning("%s: %s: %s (not retried)", self.name, key, error)
        except Exception as error:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            own = error.delay if isinstance(error, TemporaryError) else None
            delay = own if own is not None else self.backoff.delay(failures)
            self.reconcile_stats.retried += 1
            self._record_failure(key, error)
            if isinstance(error, TemporaryError):
                log.info("%s: %s: %s; retrying in %.2fs", self.name, key, error, delay)
            else:
                log.exception("%s: reconciling %s failed; retrying in %.2fs", self.name, key, delay)
            self.queue.hold(key, delay)
            self.queue.add(key)
        else:
            self._failures.pop(key, None)
            stats = self.reconcile_stats
            stats.reconciled += 1
            if result is not None and result.requeue_after is not None:
                if result.requeue_after > 0:
                    stats.requeued_after += 1
                else:
                    stats.requeued += 1
                self.queue.add_after(key, result.requeue_after)
        self.reconcile_stats.times.observe(loop.time() - began)
        if self.min_interval > 0:
            self.queue.hold(key, began + self.min_interval - loop.time())

    def _record_failure(self, key: str, error: BaseException) -> None:
        self.reconcile_stats.note(f"{key}: {type(error).__name__}: {error}")

    # --- running -----------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if self._stopping:
                self.queue.done(key)
                self.queue.add(key)  # for the next run (the next leadership term)
                return
            self._quiet.clear()
            try:
                await self.process(key)
            finally:
                self.queue.done(key)
                if not self.queue.processing:
                    self._quiet.set()

    async def run(self, stop: asyncio.Event, *, sync_timeout: float | None = None) -> None:
        """Reconcile until `stop` is set; then keys in progress finish (up to `drain_timeout` seconds)
        before the workers go. May run again afterwards (each leadership term). `sync_timeout`: how long
        `start` may wait for the informers (None: until they sync or `stop`)."""
        self.sync_timeout = sync_timeout
        if not await self.start(stop):
            return
        self.resync()
        workers = [asyncio.create_task(self._worker(), name=f"{self.name}-{i}") for i in range(self.workers)]
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.resync_period)
                if not stop.is_set():
                    self.resync()
                    await self._on_resync()
        finally:
            self._stopping = True
            self.queue.close()
            if self.queue.processing and self.drain_timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._quiet.wait(), self.drain_timeout)
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self._stopping = False

    async def _on_resync(self) -> None:
        try:
            await self.on_resync()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: the periodic work failed", self.name)


__all__ = [
    "RECONCILE_TIME_BUCKETS",
    "PermanentError",
    "ReconcileStats",
    "ReconcileTimes",
    "Reconciler",
    "Result",
    "TemporaryError",
]
