"""`--help` that teaches (issue #14): defaults shown, the kinds and simulation annotations `simulate`
reads listed, flags that contradict each other refused."""

from __future__ import annotations

import pytest

from kai_scheduler.api.constants import SIM_ARRIVAL_ANNOTATION, SIM_DURATION_ANNOTATION
from kai_scheduler.cli import main


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # no words broken at hyphens by the wrapping


def help_of(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # wrapped lines joined


def test_simulate_help_lists_kinds_workloads_and_annotations(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "simulate")
    for kind in ("Queue", "PodGroup", "Pod", "Node", "Topology", "ResourceClaim"):
        assert kind in text
    for workload in ("Job", "CronJob", "Deployment", "StatefulSet", "PyTorchJob", "RayJob", "JobSet"):
        assert workload in text
    assert SIM_ARRIVAL_ANNOTATION in text and SIM_DURATION_ANNOTATION in text
    assert "(default: 1000)" in text and "(default: 2026-01-01T00:00:00Z)" in text


def test_run_help_shows_the_defaults_of_ports_and_reservations(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, "run")
    for shown in ("0: off (default: 8080)", "(default: 9443)", "(default: 8081)", "(default: 40s)"):
        assert shown in text
    assert "(default: kai-resource-reservation)" in text
    assert "--log-format" in text and "--log-level" in text


def test_cycles_and_until_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cycles", "3", "--until", "1h"]) == 2
    assert "--until: not allowed with argument --cycles" in capsys.readouterr().err
