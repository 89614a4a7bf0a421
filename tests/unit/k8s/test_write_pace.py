"""A queue's status written on a pace (issue #23): the first change at once, then at most once a period;
a failed write does not hold the retry back."""

from __future__ import annotations

from kai_scheduler.k8s.runtime.write_pace import WritePace


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_write_goes_at_once_and_the_next_after_the_period() -> None:
    clock = Clock()
    pace = WritePace(10.0, clock)
    assert pace.wait("q") == 0
    pace.wrote("q")
    clock.now += 4
    assert pace.wait("q") == 6  # a change 4 s after the write waits for the rest of the period
    assert pace.wait("other") == 0  # each queue has its own
    clock.now += 6
    assert pace.wait("q") == 0


def test_a_failed_write_may_be_retried_at_once_and_gone_queues_are_forgotten() -> None:
    clock = Clock()
    pace = WritePace(10.0, clock)
    pace.wrote("q")
    pace.unwrote("q")
    assert pace.wait("q") == 0
    pace.wrote("q")
    pace.wrote("gone")
    pace.keep({"q"})
    assert pace.wait("gone") == 0 and pace.wait("q") == 10
