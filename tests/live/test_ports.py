"""The free ports handed to child processes: outside the kernel's ephemeral range, a block per xdist
worker, never the same one twice in a process, never one that something holds."""

from __future__ import annotations

import socket

import ports
import pytest


def test_ports_lie_below_the_ephemeral_range_in_a_block_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_handed_out", set())
    blocks = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        blocks.append(ports.worker_block())
        port = ports.free_port()
        assert port in blocks[-1]
        assert port < ports.ephemeral_start()
    assert not set(blocks[0]) & set(blocks[1])


def test_a_port_is_handed_out_once_and_a_held_one_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    first = ports.free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", first + 1 if first + 1 in ports.worker_block() else first - 1))
        held = holder.getsockname()[1]
        handed = {ports.free_port() for _ in range(50)}
    assert first not in handed
    assert held not in handed
    assert len(handed) == 50


def test_without_room_below_the_ephemeral_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.setattr(ports, "ephemeral_start", lambda: 10_500)
    assert not ports.worker_block()
    assert ports.free_port() > 0
