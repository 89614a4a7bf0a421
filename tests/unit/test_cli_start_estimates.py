"""`kai-scheduler run --start-estimates`: how often the scheduler writes start-time estimates on waiting
PodGroups (default 30s; 0 turns them off); a bad value is one line and exit 2, before connecting."""

from __future__ import annotations

import pytest

from kai_scheduler.cli import main
from kai_scheduler.k8s.components import RunOptions
from kai_scheduler.sim.estimates import estimate_starts


def test_estimates_run_every_30s_by_default(started: list[RunOptions]) -> None:
    assert main(["run", "--component", "scheduler"]) == 0
    [options] = started
    assert options.estimator is estimate_starts
    assert options.estimate_interval == 30.0


@pytest.mark.parametrize(("value", "interval"), [("5m", 300.0), ("10", 10.0)])
def test_the_interval_reaches_the_scheduler(started: list[RunOptions], value: str, interval: float) -> None:
    assert main(["run", "--component", "scheduler", "--start-estimates", value]) == 0
    [options] = started
    assert options.estimator is estimate_starts and options.estimate_interval == interval


def test_zero_turns_the_estimates_off(started: list[RunOptions]) -> None:
    assert main(["run", "--component", "scheduler", "--start-estimates", "0"]) == 0
    [options] = started
    assert options.estimator is None


@pytest.mark.parametrize("value", ["soon", "-1m"])
def test_a_bad_interval_is_one_line(
    capsys: pytest.CaptureFixture[str], started: list[RunOptions], value: str
) -> None:
    assert main(["run", "--component", "scheduler", "--start-estimates", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--start-estimates" in err and "Traceback" not in err
    assert started == []
