"""`kai-scheduler run --plugin-server-port`: the scheduler's localhost plugin server port (default 8081,
as KAI; 0 turns it off); a port out of range is one line and exit 2, before connecting."""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler import cli
from kai_scheduler.cli import main
from kai_scheduler.k8s.components import RunOptions


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    """The options `run` would start the components with (nothing connects)."""
    seen: list[RunOptions] = []

    async def record(options: RunOptions, client: Any) -> None:
        seen.append(options)

    monkeypatch.setattr(cli, "_client", lambda kubeconfig: object())
    monkeypatch.setattr(cli, "_until_signalled", record)
    return seen


@pytest.mark.parametrize(
    ("flags", "port"),
    [([], 8081), (["--plugin-server-port", "9091"], 9091), (["--plugin-server-port=0"], None)],
    ids=["default", "chosen", "off"],
)
def test_the_port_reaches_the_scheduler(
    started: list[RunOptions], flags: list[str], port: int | None
) -> None:
    assert main(["run", "--component", "scheduler", *flags]) == 0
    [options] = started
    assert options.plugin_server_port == port


@pytest.mark.parametrize("value", ["-1", "65536", "http"])
def test_a_bad_port_is_one_line(
    capsys: pytest.CaptureFixture[str], started: list[RunOptions], value: str
) -> None:
    assert main(["run", "--component", "scheduler", "--plugin-server-port", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kai-scheduler: error:"), err
    assert "--plugin-server-port" in err
    assert started == []
