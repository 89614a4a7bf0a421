"""`kai-scheduler run --reservation-timeout` refuses a bad duration with one line, before connecting."""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.cli import main
from kai_scheduler.cli import run as cli_run


@pytest.fixture
def no_connection(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records any attempt to build an API client or start the components."""
    attempts: list[str] = []

    def refuse(what: str) -> Any:
        def record(*_args: Any, **_kwargs: Any) -> Any:
            attempts.append(what)
            raise AssertionError(f"{what} was called")

        return record

    monkeypatch.setattr(cli_run, "kube_client", refuse("kube_client"))
    monkeypatch.setattr(cli_run, "run_components", refuse("run_components"))
    return attempts


@pytest.mark.parametrize(
    ("flag", "shown"),
    [
        (["--reservation-timeout", "soon"], "soon"),
        (["--reservation-timeout=-5s"], "-5s"),
    ],
    ids=["not-a-duration", "negative"],
)
def test_a_bad_reservation_timeout_is_one_line_before_connecting(
    capsys: pytest.CaptureFixture[str], no_connection: list[str], flag: list[str], shown: str
) -> None:
    assert main(["run", "--all", "--kubeconfig", "/nonexistent/kubeconfig", *flag]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("kai-scheduler: error: --reservation-timeout:"), err
    assert shown in err
    assert no_connection == []


def test_a_bad_reservation_timeout_does_not_matter_without_reservation_pods(
    capsys: pytest.CaptureFixture[str], no_connection: list[str]
) -> None:
    # With --no-gpu-reservation the timeout is unused; the run goes on to connect (refused here).
    with pytest.raises(AssertionError, match="kube_client"):
        main(["run", "--all", "--skip", "admission", "--no-gpu-reservation", "--reservation-timeout", "soon"])
    assert no_connection == ["kube_client"]


def test_a_good_reservation_timeout_is_accepted(
    capsys: pytest.CaptureFixture[str], no_connection: list[str]
) -> None:
    with pytest.raises(AssertionError, match="kube_client"):
        main(["run", "--all", "--skip", "admission", "--reservation-timeout", "40s"])
    assert no_connection == ["kube_client"]
