"""Ports for tests that start servers: a free one to give a child process, and a URL's HTTP status.

A port found free here may be taken by another process before the child binds it (nothing can reserve it
across processes); the kernel hands out ephemeral ports in a spread order, so that is rare, and a child
that loses the race says which port in its one-line error."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http_status(url: str) -> int:
    """The status of a GET of `url`; 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0
