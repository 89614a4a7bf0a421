"""Ending the `kai-scheduler` process without freeing what a command built.

A simulation of 20,000 nodes is tens of millions of Python objects, and freeing them one by one when the
command is done with them cost about a second of CPU (3% of the whole command), right before the process
ends anyway. A command hands what it is done with to `leave_behind`; `program` (the console script and
`python -m kai_scheduler`) then flushes the output and ends the process at once (`os._exit`), freeing
nothing. An in-process caller (a test, `main`) keeps nothing: the objects are freed as usual. A run that
left nothing behind ends as usual, atexit handlers and all.
"""

from __future__ import annotations

import contextlib
import os
import sys

# What the commands left behind, while `program` runs; None otherwise (nothing is kept).
_left: list[object] | None = None


def keep_what_is_left() -> None:
    """From now on `leave_behind` keeps what it is given, until `end`."""
    global _left
    _left = []


def leave_behind(*objects: object) -> None:
    """A command is done with `objects`, and the process may end without freeing them."""
    if _left is not None:
        _left.extend(objects)


def end(status: int) -> None:
    """When something was left behind: the output flushed, the process ends with `status` (no return).
    Otherwise it returns, and the process ends as usual."""
    if not _left:
        return
    for stream in (sys.stdout, sys.stderr):
        # A reader gone (`| head`), or the stream closed: nothing to keep.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)
