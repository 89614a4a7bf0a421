"""`kai-scheduler run`'s port flags (--metrics-port, --webhook-port, --plugin-server-port): a port from 1
to 65535, or 0 to turn that server off, the same for each; a port out of range is one line and exit 2,
before connecting. The admission webhooks are their component's only work, so port 0 with admission
running is refused rather than silently serving nothing."""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.cli import main
from kai_scheduler.k8s.components import RunOptions

PORT_FLAGS = {"--metrics-port": "metrics_port", "--plugin-server-port": "plugin_server_port"}


def test_the_defaults_are_kais(started: list[RunOptions]) -> None:
    assert main(["run", "--component", "scheduler"]) == 0
    [options] = started
    assert (options.metrics_port, options.webhook_port, options.plugin_server_port) == (8080, 9443, 8081)


@pytest.mark.parametrize("flag", PORT_FLAGS)
@pytest.mark.parametrize(("value", "port"), [("9091", 9091), ("0", 0)], ids=["chosen", "off"])
def test_the_port_reaches_the_components(started: list[RunOptions], flag: str, value: str, port: int) -> None:
    assert main(["run", "--component", "scheduler", f"{flag}={value}"]) == 0
    [options] = started
    assert getattr(options, PORT_FLAGS[flag]) == port


def test_the_webhook_port_reaches_the_admission_webhooks(started: list[RunOptions], tmp_path: Any) -> None:
    assert (
        main(["run", "--component", "admission", "--tls-cert-dir", str(tmp_path), "--webhook-port=9444"]) == 0
    )
    [options] = started
    assert options.webhook_port == 9444


@pytest.mark.parametrize("flag", [*PORT_FLAGS, "--webhook-port"])
@pytest.mark.parametrize("value", ["-1", "65536", "http"])
def test_a_bad_port_is_one_line(
    capsys: pytest.CaptureFixture[str], started: list[RunOptions], flag: str, value: str
) -> None:
    assert main(["run", "--component", "scheduler", flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kai-scheduler: error:"), err
    assert flag in err
    assert started == []


def test_no_webhook_port_while_admission_runs_is_one_line(
    capsys: pytest.CaptureFixture[str], started: list[RunOptions], tmp_path: Any
) -> None:
    args = ["run", "--all", "--tls-cert-dir", str(tmp_path), "--webhook-port", "0"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--webhook-port: 0" in err and "admission" in err, err
    assert started == []
    # Without the admission component the port is not used.
    assert main([*args, "--skip", "admission"]) == 0
    assert started[0].webhook_port == 0 and "admission" not in started[0].components
