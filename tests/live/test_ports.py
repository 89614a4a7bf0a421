"""The free ports handed to child processes: never the same one twice in a process."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import ports
import pytest


class _Probe:
    """A socket whose port-0 bind always lands on the next of the given ports."""

    given: Iterator[int]

    def __init__(self, *args: Any) -> None:
        self.port = 0

    def __enter__(self) -> _Probe:
        return self

    def __exit__(self, *args: object) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self.port = next(self.given)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_the_kernel_gives_twice_in_a_row_is_handed_out_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_handed_out", set())
    _Probe.given = iter([41000, 41000, 41001])
    monkeypatch.setattr(socket, "socket", _Probe)
    assert [ports.free_port(), ports.free_port()] == [41000, 41001]
