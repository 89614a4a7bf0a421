"""`in_forked_child(fn, arg)`: `fn(arg)` computed in a child process forked for it, its (picklable) result
back through a pipe. For CPU-bound pure work on data this process already holds (the start-time
look-ahead on the scheduler's state): the child shares the data as it is at the fork (copy on write), so
nothing is serialised on the way in, and the work does not hold this process's interpreter lock.

Fork in a process with threads is safe here because the child does so little: it computes, writes its
answer to the pipe and leaves with `os._exit` (no atexit handlers, no flushing of streams whose locks
another thread may have held at the fork, no event loop); its logging is off and its standard streams
are new ones (to /dev/null), so that nothing it runs, a finaliser included, takes a lock of the
parent's. Where `os.fork` does not exist, `fn(arg)` runs on a thread instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import pickle
import signal
import sys
import warnings
from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
R = TypeVar("R")


class ChildFailed(RuntimeError):
    """The child raised (its error's repr is the message) or died without an answer."""


async def in_forked_child(fn: Callable[[A], R], arg: A) -> R:
    if not hasattr(os, "fork"):  # pragma: no cover - not on Linux
        return await asyncio.to_thread(fn, arg)
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns of fork with threads; see the module doc for why this child is safe.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
        _child(fn, arg, read_fd, write_fd)
    os.close(write_fd)
    try:
        data = await asyncio.to_thread(_read_all, read_fd)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(read_fd)
        await asyncio.to_thread(os.waitpid, pid, 0)
    if not data:
        raise ChildFailed("the child process ended without an answer")
    ok, value = pickle.loads(data)
    if not ok:
        raise ChildFailed(value)
    result: R = value
    return result


def _child(fn: Callable[[A], R], arg: A, read_fd: int, write_fd: int) -> None:  # pragma: no cover
    status = 0
    try:
        os.close(read_fd)
        # Nothing here may take a lock another thread of the parent held at the fork: the streams and the
        # logging handlers are set aside (a finaliser of the parent's garbage, say an unclosed client
        # session's, may still run here and write), and the parent's objects are kept out of the
        # collector's sight while they stay frozen (the work may unfreeze them: `sim.gc_policy`).
        logging.disable(logging.CRITICAL)
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the child's short life
        gc.freeze()
        try:
            payload = pickle.dumps((True, fn(arg)))
        except BaseException as error:  # everything goes back to the parent, as text
            payload = pickle.dumps((False, repr(error)))
            status = 1
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view) :]
    finally:
        os._exit(status)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


__all__ = ["ChildFailed", "in_forked_child"]
