"""A progress bar on stderr for long `simulate` runs: only on a terminal (a pipe or file gets nothing), and
only once a run has taken a second, so short runs print nothing at all."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.sim.engine import CycleRecord, SimulationOptions


class ProgressBar:
    """A simulation observer: the simulated time against `--until`, the cycles against `--cycles`, else
    the cycles and simulated time so far (a steady-state run's end is not known in advance)."""

    def __init__(
        self,
        stream: TextIO,
        options: SimulationOptions,
        *,
        delay: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.options = options
        self.delay = delay
        self.clock = clock
        self.began = clock()
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def __call__(self, record: CycleRecord, result: SessionResult) -> None:
        if self.progress is None:
            if self.clock() - self.began < self.delay:
                return
            self._show()
        assert self.progress is not None and self.task is not None
        options = self.options
        if options.until is not None and options.cycles is None:
            done = record.time
        elif options.cycles is not None:
            done = record.cycle
        else:
            done = 0
        self.progress.update(
            self.task, completed=done, what=f"cycle {record.cycle:,}, simulated {record.time:,.0f} s"
        )

    def _show(self) -> None:
        options = self.options
        total: float | None = None
        if options.until is not None and options.cycles is None:
            total = options.until
        elif options.cycles is not None:
            total = options.cycles
        self.progress = Progress(
            TextColumn("simulating"),
            BarColumn(),
            TextColumn("{task.fields[what]}"),
            TimeElapsedColumn(),
            console=Console(file=self.stream),
            transient=True,
        )
        self.task = self.progress.add_task("simulate", total=total, what="")
        self.progress.start()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def progress_bar(stream: TextIO, options: SimulationOptions) -> ProgressBar | None:
    """A progress bar on `stream` when it is a terminal; None otherwise."""
    return ProgressBar(stream, options) if stream.isatty() else None


class RunsDone:
    """`--compare` and `--sweep` on a terminal: "3 of 8 runs done" on one line of stderr, removed when all
    are. A plain line, not a rich progress bar: its refresh thread would make the process pool start its
    workers without fork (`sim.variants`)."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = total

    def __call__(self, done: int) -> None:
        line = "" if done >= self.total else f"{done} of {self.total} runs done"
        self.stream.write(f"\r\033[K{line}")
        self.stream.flush()


def runs_done(stream: TextIO, total: int) -> RunsDone | None:
    """The count of runs done on `stream` when it is a terminal; None otherwise."""
    return RunsDone(stream, total) if stream.isatty() else None
