"""The child-process helper of the command-line tests: a failure shows the child's output, and a child
that ignores SIGTERM is killed rather than left running."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from child_process import Child, running


def _chatty(ready: Path, *, ignore_sigterm: bool = False) -> list[str]:
    """A child that writes a line to stdout and one to stderr, then touches `ready` and sleeps."""
    code = "import pathlib, signal, sys, time\n"
    if ignore_sigterm:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('to stdout', flush=True)\nprint('to stderr', file=sys.stderr, flush=True)\n"
    code += f"pathlib.Path({str(ready)!r}).touch()\ntime.sleep(60)\n"
    return [sys.executable, "-c", code]


def _until_ready(child: Child, ready: Path) -> None:
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert child.returncode is None and time.monotonic() < deadline
        time.sleep(0.02)


def test_a_failure_shows_the_childs_output(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    with pytest.raises(AssertionError) as failure, running(_chatty(ready)) as child:
        _until_ready(child, ready)
        raise AssertionError("timed out waiting for something")
    notes = "\n".join(failure.value.__notes__)
    assert "to stdout" in notes and "to stderr" in notes
    assert child.returncode == -15 and not child.killed  # stopped by SIGTERM


def test_a_child_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    with running(_chatty(ready, ignore_sigterm=True), stop_timeout=1.0) as child:
        _until_ready(child, ready)
    assert child.killed and child.returncode == -9
    assert "to stdout" in child.output() and "killed" in child.output()


def test_a_child_that_logs_more_than_a_pipe_holds_is_not_blocked(tmp_path: Path) -> None:
    done = tmp_path / "done"
    # 256 KiB on stderr (a pipe holds 64 KiB): only a parent that reads as the child writes lets it finish.
    code = (
        "import pathlib, sys\nsys.stderr.write('x' * 262144)\nsys.stderr.flush()\n"
        f"pathlib.Path({str(done)!r}).touch()\n"
    )
    child = Child([sys.executable, "-c", code])
    deadline = time.monotonic() + 30
    while not done.exists():
        assert time.monotonic() < deadline, "the child is blocked writing its log"
        time.sleep(0.02)
    assert child.wait(30) == 0 and len(child.stderr) == 262144
