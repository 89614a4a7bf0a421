"""Ports for tests that start servers: a free one to give a child process, and a URL's HTTP status.

A port found free here may be taken by another process before the child binds it (nothing can reserve it
across processes); the kernel hands out ephemeral ports in a spread order, so that is rare, and a child
that loses the race says which port in its one-line error. Within one process it cannot happen: a port is
handed out once (the kernel may give the same free port to two probes in a row, and a test that starts
three components took it for two of them)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

_handed_out: set[int] = set()


def free_port() -> int:
    """A port free now that this process has not handed out before."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
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
