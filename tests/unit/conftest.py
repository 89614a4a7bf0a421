"""Puts tests/ on the import path so unit tests can share `helpers`; `started` for tests of `run`'s flags."""

import sys
from pathlib import Path
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from kai_scheduler.cli import run as cli_run  # noqa: E402
from kai_scheduler.k8s.components import RunOptions  # noqa: E402


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[RunOptions]:
    """The options `run` would start the components with (nothing connects)."""
    seen: list[RunOptions] = []

    async def record(options: RunOptions, client: Any) -> None:
        seen.append(options)

    monkeypatch.setattr(cli_run, "kube_client", lambda kubeconfig: object())
    monkeypatch.setattr(cli_run, "until_signalled", record)
    return seen
