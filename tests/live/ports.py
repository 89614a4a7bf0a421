"""Ports for tests that start servers: a free one to give a child process, and a URL's HTTP status.

A port found free here may be taken by another process before the child binds it: nothing reserves a
port across processes. The kernel hands its ephemeral range (`ip_local_port_range`) to every `bind` of
port 0 and to the source port of every outgoing connection, and tests on the other workers make
thousands of those, so a port probed in that range can be gone a moment later (CI lost a replica's
metrics port that way). The ports handed out here lie below that range, in a block of their own for each
pytest-xdist worker, and a probe's bind checks each is free now; within one process a port is handed out
once."""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.request
from pathlib import Path

_FIRST = 10_000  # below this lie the well-known and registered ports of services a host may run
_BLOCK = 2_000  # ports a worker draws from
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")

_handed_out: set[int] = set()


def ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (Linux's default when the range cannot be read)."""
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def worker_block() -> range:
    """The ports this process draws from: a block per xdist worker (gw0, gw1, ...) below the ephemeral
    range, so that two workers never probe the same port; empty when no block fits below it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    blocks = max(0, (ephemeral_start() - _FIRST) // _BLOCK)
    if blocks == 0:
        return range(0)
    first = _FIRST + (index % blocks) * _BLOCK
    return range(first, first + _BLOCK)


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_port() -> int:
    """A port free now that this process has not handed out before: from this worker's block, starting at
    a place of this process's own (two test runs at once each start elsewhere); from the kernel when the
    block is used up or there is none."""
    block = worker_block()
    if block:
        start = (os.getpid() * 7_919) % len(block)
        for step in range(len(block)):
            port = block[(start + step) % len(block)]
            if port not in _handed_out and _bindable(port):
                _handed_out.add(port)
                return port
    while True:
        port = _kernel_port()
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def http_status(url: str) -> int:
    """The status of a GET of `url`; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0
