"""A queue's status written on a pace (issue #23): at once after a quiet period, once a change holds still,
else once a period while it keeps changing; a failed write does not hold the retry back."""

from __future__ import annotations

from kai_scheduler.k8s.runtime.write_pace import WritePace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_change_after_a_quiet_period_goes_at_once() -> None:
    clock = Clock()
    pace = WritePace(30.0, 2.0, clock)
    assert pace.wait("q", 1) == 0
    pace.wrote("q")
    clock.now += 31
    assert pace.wait("q", 2) == 0
    assert pace.wait("other", 1) == 0  # each queue has its own


def test_a_burst_is_written_once_a_period_and_its_end_once_it_holds_still() -> None:
    clock = Clock()
    pace = WritePace(30.0, 2.0, clock)
    pace.wrote("q")
    for value in range(1, 30):  # a new value every second: held
        clock.now += 1
        assert pace.wait("q", value) > 0
    clock.now += 1
    assert pace.wait("q", 30) == 0  # the period is over: the latest value goes
    pace.wrote("q")
    clock.now += 1
    assert pace.wait("q", 31) == 2  # the burst's last value, if it stays so...
    clock.now += 1.5
    assert pace.wait("q", 31) == 0.5
    clock.now += 0.5
    assert pace.wait("q", 31) == 0  # ...goes once it held still


def test_a_failed_write_may_be_retried_at_once_and_gone_queues_are_forgotten() -> None:
    clock = Clock()
    pace = WritePace(30.0, 2.0, clock)
    pace.wrote("q")
    pace.unwrote("q")
    assert pace.wait("q", 1) == 0
    pace.wrote("q")
    pace.wrote("gone")
    pace.keep({"q"})
    assert pace.wait("gone", 1) == 0 and pace.wait("q", 1) == 2
