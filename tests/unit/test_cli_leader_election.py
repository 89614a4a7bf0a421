"""`kai-scheduler run`'s leader election flags: `--identity` and client-go's three durations
(`--leader-elect-lease-duration`, `--leader-elect-renew-deadline`, `--leader-elect-retry-period`, KAI's
15s / 10s / 2s by default); a bad value is one line and exit 2, before connecting."""

from __future__ import annotations

import pytest

from kai_scheduler.cli import main
from kai_scheduler.k8s.components import RunOptions
from kai_scheduler.k8s.runtime.leader import LeaseTiming


def test_kais_durations_by_default(started: list[RunOptions]) -> None:
    assert main(["run", "--component", "binder", "--leader-elect"]) == 0
    [options] = started
    assert options.leader_elect and options.identity is None
    assert options.lease_timing == LeaseTiming(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)


def test_identity_and_durations_reach_the_components(started: list[RunOptions]) -> None:
    flags = ["--identity", "binder-1", "--leader-elect-lease-duration", "4s"]
    flags += ["--leader-elect-renew-deadline", "3", "--leader-elect-retry-period", "500ms"]
    assert main(["run", "--component", "binder", "--leader-elect", *flags]) == 0
    [options] = started
    assert options.identity == "binder-1"
    assert options.lease_timing == LeaseTiming(lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--leader-elect-lease-duration", "soon"], "--leader-elect-lease-duration"),
        (["--leader-elect-retry-period", "0s"], "--leader-elect-retry-period"),
        (["--leader-elect-renew-deadline", "-1s"], "--leader-elect-renew-deadline"),
        # The renew deadline must stay below the lease: a leader must stop before another may take over.
        (["--leader-elect-renew-deadline", "20s"], "each must be shorter than the next"),
        (["--leader-elect-retry-period", "10s"], "each must be shorter than the next"),
    ],
)
def test_a_bad_duration_is_one_line(
    capsys: pytest.CaptureFixture[str], started: list[RunOptions], flags: list[str], named: str
) -> None:
    assert main(["run", "--component", "scheduler", "--leader-elect", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "Traceback" not in err
    assert started == []
