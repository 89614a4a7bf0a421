"""`runtime.reconciler.Reconciler`, the live components' one loop: per-key backoff that grows and is
forgotten on success, temporary and permanent errors, requeue-after, holds that events do not cut short,
a key added while it is reconciled coming back once, the resync, and a graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import pytest

from kai_scheduler.k8s.runtime.backoff import Backoff
from kai_scheduler.k8s.runtime.reconciler import PermanentError, Reconciler, Result, TemporaryError

STEADY = Backoff(initial=10.0, maximum=80.0, factor=2.0, jitter=0.0)


class Recorder(Reconciler):
    """Reconciles by calling `outcome(key)`, recording each call."""

    name = "recorder"

    def __init__(
        self,
        outcome: Callable[[str], Awaitable[Result | None]] | None = None,
        known: Iterable[str] = (),
        *,
        workers: int = 1,
        resync_period: float | None = 30.0,
        min_interval: float = 0.0,
        drain_timeout: float = 0.0,
    ) -> None:
        super().__init__(
            workers=workers,
            resync_period=resync_period,
            backoff=STEADY,
            min_interval=min_interval,
            drain_timeout=drain_timeout,
        )
        self.outcome = outcome
        self.known = list(known)
        self.calls: list[str] = []
        self.called = asyncio.Event()

    async def reconcile(self, key: str) -> Result | None:
        self.calls.append(key)
        self.called.set()
        return await self.outcome(key) if self.outcome is not None else None

    def keys(self) -> Iterable[str]:
        return self.known

    async def calls_reach(self, count: int) -> None:
        while len(self.calls) < count:
            self.called.clear()
            await self.called.wait()


@contextlib.asynccontextmanager
async def running(reconciler: Reconciler) -> AsyncIterator[None]:
    """`reconciler.run` for the block; stopped (and awaited) after it."""
    stop = asyncio.Event()
    task = asyncio.create_task(reconciler.run(stop))
    try:
        yield
    finally:
        stop.set()
        await task


def raising(error: Exception) -> Callable[[str], Awaitable[Result | None]]:
    async def outcome(key: str) -> Result | None:
        raise error

    return outcome


def due(reconciler: Reconciler, key: str) -> float:
    wait = reconciler.queue.due_in(key)
    assert wait is not None, f"{key} is not due later"
    return wait


def test_backoff_grows_per_failure_and_is_forgotten_on_success() -> None:
    async def body() -> None:
        failing = True

        async def outcome(key: str) -> Result | None:
            if failing:
                raise ConnectionError("unreachable")
            return None

        reconciler = Recorder(outcome)
        waits = []
        for _ in range(5):
            await reconciler.process("a")
            waits.append(due(reconciler, "a"))
            reconciler.queue.forget("a")  # drop the pending retry, keep the count
        # 10, 20, 40, 80, 80 seconds (capped); a busy machine only makes each a little shorter.
        for wait, expected in zip(waits, (10.0, 20.0, 40.0, 80.0, 80.0), strict=True):
            assert expected - 5 < wait <= expected
        assert reconciler.failures("a") == 5 and reconciler.reconcile_stats.retried == 5
        await reconciler.process("b")  # another key has a count of its own
        assert 5 < due(reconciler, "b") <= 10
        failing = False
        await reconciler.process("a")
        assert reconciler.failures("a") == 0 and reconciler.reconcile_stats.reconciled == 1
        failing = True
        await reconciler.process("a")
        assert 5 < due(reconciler, "a") <= 10  # back to the first delay
        reconciler.queue.close()

    asyncio.run(body())


def test_a_temporary_error_with_its_own_delay_is_retried_then() -> None:
    async def body() -> None:
        reconciler = Recorder(raising(TemporaryError("busy", delay=300.0)))
        await reconciler.process("a")
        assert 250 < due(reconciler, "a") <= 300
        assert reconciler.reconcile_stats.errors == ["a: TemporaryError: busy"]
        reconciler.queue.close()

    asyncio.run(body())


def test_a_retry_is_not_brought_forward_by_events_or_resyncs() -> None:
    async def body() -> None:
        reconciler = Recorder(raising(TemporaryError("busy", delay=300.0)), known=["a"])
        await reconciler.process("a")
        reconciler.enqueue("a")
        reconciler.resync()
        assert len(reconciler.queue) == 0 and 250 < due(reconciler, "a") <= 300
        reconciler.forget("a")  # its object is gone: nothing due, and an event queues it at once
        assert reconciler.idle and reconciler.failures("a") == 0
        reconciler.enqueue("a")
        assert len(reconciler.queue) == 1
        reconciler.queue.close()

    asyncio.run(body())


def test_a_retry_comes_back_by_itself() -> None:
    async def body() -> None:
        results: list[Exception | None] = [TemporaryError("once", delay=0.01), None]

        async def outcome(key: str) -> Result | None:
            result = results.pop(0)
            if result is not None:
                raise result
            return None

        reconciler = Recorder(outcome)
        async with running(reconciler):
            reconciler.enqueue("a")
            await reconciler.calls_reach(2)
        assert reconciler.calls == ["a", "a"] and reconciler.reconcile_stats.reconciled == 1

    asyncio.run(body())


def test_a_permanent_error_is_logged_once_and_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        reconciler = Recorder(raising(PermanentError("no such node")))
        await reconciler.process("a")
        assert reconciler.idle and reconciler.failures("a") == 0
        assert reconciler.reconcile_stats.failed == 1 and reconciler.reconcile_stats.retried == 0

    caplog.set_level("INFO", logger="kai_scheduler.k8s.runtime.reconciler")
    asyncio.run(body())
    logged = [r for r in caplog.records if r.name == "kai_scheduler.k8s.runtime.reconciler"]
    assert [(r.levelname, r.getMessage()) for r in logged] == [
        ("WARNING", "recorder: a: no such node (not retried)")
    ]


def test_any_other_exception_is_retried_with_its_traceback_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        reconciler = Recorder(raising(KeyError("spec")))
        await reconciler.process("a")
        assert 5 < due(reconciler, "a") <= 10 and reconciler.reconcile_stats.retried == 1
        reconciler.queue.close()

    asyncio.run(body())
    (record,) = [r for r in caplog.records if r.name == "kai_scheduler.k8s.runtime.reconciler"]
    assert record.exc_info is not None and "reconciling a failed" in record.getMessage()


def test_a_result_asks_to_look_again_and_an_event_may_come_sooner() -> None:
    async def body() -> None:
        async def outcome(key: str) -> Result | None:
            return Result(requeue_after=300.0)

        reconciler = Recorder(outcome)
        await reconciler.process("a")
        assert 250 < due(reconciler, "a") <= 300 and reconciler.reconcile_stats.reconciled == 1
        reconciler.enqueue("a")
        assert len(reconciler.queue) == 1 and reconciler.queue.due_in("a") is None
        reconciler.queue.close()

    asyncio.run(body())


def test_min_interval_holds_events_after_a_reconcile() -> None:
    async def body() -> None:
        reconciler = Recorder(min_interval=300.0)
        await reconciler.process("a")
        reconciler.enqueue("a")
        reconciler.enqueue("a")
        assert len(reconciler.queue) == 0 and 250 < due(reconciler, "a") <= 300
        reconciler.queue.close()

    asyncio.run(body())


def test_a_key_added_while_it_is_reconciled_runs_again_once() -> None:
    async def body() -> None:
        release = asyncio.Event()

        async def outcome(key: str) -> Result | None:
            if len(reconciler.calls) == 1:
                await release.wait()
            return None

        reconciler = Recorder(outcome, workers=3)
        async with running(reconciler):
            reconciler.enqueue("a")
            await reconciler.calls_reach(1)
            for _ in range(3):  # three events while the first reconcile runs: no second worker takes it
                reconciler.enqueue("a")
            await asyncio.sleep(0)
            assert reconciler.calls == ["a"] and reconciler.reconcile_stats.in_progress == 1
            release.set()
            await reconciler.calls_reach(2)
            while not reconciler.idle:
                await asyncio.sleep(0)
        assert reconciler.calls == ["a", "a"]
        assert reconciler.reconcile_stats.adds == 2  # the first add, then the three as one

    asyncio.run(body())


def test_the_resync_queues_every_known_key_again() -> None:
    async def body() -> None:
        reconciler = Recorder(known=["a", "b"], resync_period=0.01)
        async with running(reconciler):
            await reconciler.calls_reach(6)  # the start's pass and two resyncs
        assert reconciler.calls[:2] == ["a", "b"] and set(reconciler.calls) == {"a", "b"}

    asyncio.run(body())


def test_stop_lets_the_key_in_progress_finish_and_keeps_the_rest_for_the_next_run() -> None:
    async def body() -> None:
        release = asyncio.Event()
        finished: list[str] = []

        async def outcome(key: str) -> Result | None:
            if key == "slow":
                await release.wait()
            finished.append(key)
            return None

        reconciler = Recorder(outcome, drain_timeout=300.0)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        reconciler.enqueue("slow")
        await reconciler.calls_reach(1)
        reconciler.enqueue("later")
        stop.set()
        while not reconciler.stopping:
            await asyncio.sleep(0)
        assert not task.done()  # draining
        release.set()
        await task
        assert finished == ["slow"] and len(reconciler.queue) == 1  # "later" waits for the next run
        async with running(reconciler):
            await reconciler.calls_reach(2)
        assert finished == ["slow", "later"]

    asyncio.run(body())


def test_without_a_drain_stop_cancels_the_key_in_progress() -> None:
    async def body() -> None:
        async def outcome(key: str) -> Result | None:
            await asyncio.Event().wait()  # never done
            return None

        reconciler = Recorder(outcome)
        async with running(reconciler):
            reconciler.enqueue("a")
            await reconciler.calls_reach(1)
        assert reconciler.reconcile_stats.in_progress == 0 and reconciler.reconcile_stats.reconciled == 0

    asyncio.run(body())


def test_start_refusing_means_no_run() -> None:
    class Refusing(Recorder):
        async def start(self, stop: asyncio.Event) -> bool:
            return False

    async def body() -> None:
        reconciler = Refusing(known=["a"])
        await reconciler.run(asyncio.Event())
        assert reconciler.calls == [] and reconciler.idle

    asyncio.run(body())


class NeverSynced:
    """An informer whose cache never syncs (its API server is out of reach)."""

    async def wait_synced(self) -> bool:
        await asyncio.Event().wait()
        return True


class Watching(Recorder):
    async def start(self, stop: asyncio.Event) -> bool:
        return await self.informers_synced([NeverSynced()], stop)  # type: ignore[list-item]


def test_informers_that_do_not_sync_in_time_mean_no_run(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        reconciler = Watching(known=["a"])
        await reconciler.run(asyncio.Event(), sync_timeout=0.01)
        assert reconciler.calls == []

    asyncio.run(body())
    assert "recorder: the informers did not sync in time" in caplog.messages


def test_stop_while_waiting_for_the_informers_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    async def body() -> None:
        reconciler = Watching(known=["a"])
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        await asyncio.sleep(0)
        stop.set()
        await task
        assert reconciler.calls == []

    asyncio.run(body())
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
