"""A `kai-scheduler` child process for tests that run the command as a user does: whatever ends the test
(a time-out, a failed assertion, a child that does not stop), the failure shows the child's output, and
the child never outlives the test."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import IO

STOP_TIMEOUT = 30.0  # seconds from SIGTERM to a kill
TAIL = 4000  # characters of each stream a failure shows


class Child:
    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.stdout = self.stderr = ""
        self.killed = False
        self._collected = False  # the output is kept once the child has exited
        # Both pipes are read while the child runs: a child that logs more than a pipe holds (64 KiB)
        # would otherwise block on its next write, and the test would wait for it in vain.
        self._chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._readers = [
            threading.Thread(target=self._drain, args=(stream, self._chunks[name]), daemon=True)
            for name, stream in (("stdout", self.process.stdout), ("stderr", self.process.stderr))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _drain(stream: IO[str] | None, chunks: list[str]) -> None:
        if stream is None:
            return
        for line in stream:
            chunks.append(line)

    def stderr_so_far(self) -> str:
        """What the child has written to stderr until now (it may still be running)."""
        return "".join(self._chunks["stderr"])

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then wait up to `timeout` seconds (then kill, and `killed` says so); the exit code, with
        the output kept. Stopping a stopped child only returns its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        """Wait for the child to exit by itself (killed after `timeout` seconds); its exit code."""
        if not self._collected:
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.process.kill()
                self.process.wait()
            for reader in self._readers:
                reader.join(timeout=10)
            self.stdout = "".join(self._chunks["stdout"])
            self.stderr = "".join(self._chunks["stderr"])
            self._collected = True
        return self.process.returncode

    def output(self) -> str:
        killed = " (killed: it did not exit in time)" if self.killed else ""
        return (
            f"--- the child's exit code: {self.process.returncode}{killed}\n"
            f"--- its stdout ---\n{self.stdout[-TAIL:]}\n--- its stderr ---\n{self.stderr[-TAIL:]}"
        )


@contextlib.contextmanager
def running(
    command: Sequence[str], env: Mapping[str, str] | None = None, stop_timeout: float = STOP_TIMEOUT
) -> Iterator[Child]:
    """The child, running; stopped when the block ends. A failure in the block gets the child's output."""
    child = Child(command, env)
    try:
        yield child
    except BaseException as error:
        child.stop(stop_timeout)
        error.add_note(child.output())
        raise
    finally:
        child.stop(stop_timeout)
