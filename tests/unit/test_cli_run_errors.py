"""`kai-scheduler run` refuses bad input with one line and exit status 2, before connecting anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_scheduler.cli import main


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("foo: [\n", "line 2, column 1: invalid YAML"),
        ("apiVersion: v1\nkind: Config\n", "missing 'clusters'"),
    ],
    ids=["broken-yaml", "not-a-kubeconfig"],
)
def test_a_broken_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(content)
    assert main(["run", "--component", "scheduler", "--kubeconfig", str(kubeconfig)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "Traceback" not in err


def test_a_missing_kubeconfig_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--all", "--skip", "admission", "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    assert "--kubeconfig /nonexistent/kubeconfig" in capsys.readouterr().err


def test_admission_needs_certificates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--component", "admission"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tls-cert-dir" in err and "--tls-secret" in err


def test_a_bad_scheduler_configuration_is_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("actions: allocate, teleport\n")
    assert main(["run", "--component", "scheduler", "--config", str(config)]) == 2
    assert "teleport" in capsys.readouterr().err
