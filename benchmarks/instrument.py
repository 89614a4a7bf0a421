"""What the benchmarks share: one simulation run, measured; profiling a cycle; options and report plumbing.

`measure` runs a `Simulation` and times it the way the simulator times itself: each cycle's snapshot
build and scheduling session (their sum is the span of the simulator's `cycleSeconds`), each action's
`execute` within the session, and the cyclic garbage collector. It keeps every cycle's decisions and
stops between cycles once the run has settled (enough decision-free cycles in a row), or once its
wall-time budget is spent. The benchmark files (`run.py`, `reclaim.py`, `topology.py`) keep only their
workload and their analysis of a `Measurement`.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import kai_scheduler.cycle as scheduler_module
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.controlplane.driver import CycleOutcome
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.sim.engine import Simulation, SimulationOptions, SimulationResult

START = datetime(2026, 1, 1, tzinfo=UTC)
"""The simulated clock's start, for every benchmark."""

# --- timers -------------------------------------------------------------------------------------


class GcTimer:
    """Wall time spent in the cyclic garbage collector while active (via gc.callbacks)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._started = 0.0
        self.active = False

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if not self.active:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.collections += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


class _TimedAction:
    """Stands in for an action instance and adds its `execute` time to the current cycle's entry."""

    def __init__(self, action: Any, log: list[dict[str, float]]) -> None:
        self.name = action.name
        self._action = action
        self._log = log

    def execute(self, session: Any) -> None:
        begin = time.perf_counter()
        try:
            self._action.execute(session)
        finally:
            entry = self._log[-1]
            entry[self.name] = entry.get(self.name, 0.0) + time.perf_counter() - begin


@contextlib.contextmanager
def timed_actions(log: list[dict[str, float]]) -> Iterator[None]:
    """Time every action of every cycle: the scheduler looks actions up in its ACTIONS registry each cycle,
    so the registry's factories are wrapped (in this process only) for the duration of the block."""
    registry: dict[str, Callable[[], Any]] = scheduler_module.ACTIONS
    original = dict(registry)

    def wrap(make: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: _TimedAction(make(), log)

    registry.update({name: wrap(make) for name, make in original.items()})
    try:
        yield
    finally:
        registry.update(original)


def placed(decisions: list[Any]) -> int:
    return sum(1 for d in decisions if d.type in ("bind", "pipeline"))


def quiet_tail(decisions: list[list[Any]], count_first: bool = False) -> int:
    """How many of the last cycles decided nothing, in a row (the first cycle only if `count_first`)."""
    count = 0
    for cycle_decisions in reversed(decisions if count_first else decisions[1:]):
        if cycle_decisions:
            break
        count += 1
    return count


# --- one measured run ---------------------------------------------------------------------------


class _Stop(Exception):
    """Raised between cycles to end the simulation (settled, or out of time)."""


@dataclass(eq=False)
class Measurement:
    """One measured simulation run; the lists have an entry per cycle, in order."""

    simulation: Simulation
    setup_seconds: float  # building the Simulation (the cluster from the objects)
    decisions: list[list[Any]] = field(default_factory=list)
    clock: list[float] = field(default_factory=list)  # the simulated time of each cycle
    build_times: list[float] = field(default_factory=list)  # snapshot build
    session_times: list[float] = field(default_factory=list)  # scheduling session
    action_times: list[dict[str, float]] = field(default_factory=list)  # action name -> seconds
    last: Any = None  # the last cycle's scheduling result
    result: SimulationResult | None = None  # the simulator's own, unless stopped between cycles
    stopped_by: str = "cycle cap"  # or "settled", "time budget"
    run_seconds: float = 0.0
    gc_seconds: float = 0.0
    gc_collections: int = 0

    @property
    def cycle_seconds(self) -> list[float]:
        """Snapshot build + session per cycle: the span of the simulator's `cycleSeconds`."""
        return [b + s for b, s in zip(self.build_times, self.session_times, strict=True)]


def measure(
    objects: list[ApiObject],
    config: SchedulerConfig,
    cycles: int,
    budget: float | None,
    quiet: int,
    *,
    count_first: bool = False,
    budget_after: int = 2,
) -> Measurement:
    """Simulate (period 1 s from START) and time each cycle, until `quiet` decision-free cycles in a row
    (not counting the first cycle unless `count_first`; 0 = never), `cycles` cycles, or `budget` wall
    seconds (checked once `budget_after` cycles ran). Stopping happens before the next cycle's snapshot."""
    started = time.perf_counter()
    simulation = Simulation(objects, config, SimulationOptions(start=START, cycles=cycles))
    measured = Measurement(simulation, time.perf_counter() - started)
    drive = simulation.driver.run
    build, schedule = simulation.driver.cache.snapshot, simulation.driver.scheduler.run
    run_started = time.perf_counter()

    # Instance-level wrappers: the simulator calls each once per cycle, inside its own cycle timing. A cycle
    # on an unchanged cluster reuses the last result without a snapshot or a session (`unchanged_cycles`):
    # it is measured whole, as its snapshot build, with no session.
    def timed_cycle(cycle: int, now: float) -> CycleOutcome:
        if quiet > 0 and quiet_tail(measured.decisions, count_first) >= quiet:
            measured.stopped_by = "settled"
            raise _Stop
        elapsed = time.perf_counter() - run_started
        if budget is not None and len(measured.decisions) >= budget_after and elapsed > budget:
            measured.stopped_by = "time budget"
            raise _Stop
        outcome = drive(cycle, now)
        if outcome.reused:
            measured.build_times.append(outcome.seconds)
            measured.session_times.append(0.0)
            measured.action_times.append({})
            measured.decisions.append(outcome.result.decisions)
            measured.clock.append(now)
            measured.last = outcome.result
        return outcome

    def timed_build(queue_usage: Any = None, now: float | None = None) -> Any:
        begin = time.perf_counter()
        snapshot = build(queue_usage, now)
        measured.build_times.append(time.perf_counter() - begin)
        return snapshot

    def timed_schedule(snapshot: Any, *, cycle: int, now: float, **options: Any) -> Any:
        measured.action_times.append({})
        begin = time.perf_counter()
        result = schedule(snapshot, cycle=cycle, now=now, **options)
        measured.session_times.append(time.perf_counter() - begin)
        measured.decisions.append(result.decisions)
        measured.clock.append(now)
        measured.last = result
        return result

    simulation.driver.run = timed_cycle  # type: ignore[method-assign]
    simulation.driver.cache.snapshot = timed_build  # type: ignore[method-assign]
    simulation.driver.scheduler.run = timed_schedule  # type: ignore[method-assign]
    gc_timer = GcTimer()
    with gc_timer, timed_actions(measured.action_times):
        gc_timer.active = True
        with contextlib.suppress(_Stop):
            measured.result = simulation.run()
        gc_timer.active = False
    measured.run_seconds = time.perf_counter() - run_started
    measured.gc_seconds, measured.gc_collections = gc_timer.seconds, gc_timer.collections
    return measured


def profile_cycle(objects: list[ApiObject], cycle: int, folder: Path, top: int, name: str = "cycle") -> Path:
    """cProfile one cycle (snapshot build + session, as the simulator times it), saved as
    `{name}-N.prof` and as text sorted by cumulative and by own time (`{name}-N-profile.txt`)."""
    simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=cycle))
    profiler = cProfile.Profile()
    build, schedule = simulation.driver.cache.snapshot, simulation.driver.scheduler.run
    seen = [0]

    def profiled_build(*args: Any, **options: Any) -> Any:
        seen[0] += 1
        if seen[0] == cycle:
            profiler.enable()
        return build(*args, **options)

    def profiled_schedule(snapshot: Any, *, cycle: int, now: float, **options: Any) -> Any:
        try:
            return schedule(snapshot, cycle=cycle, now=now, **options)
        finally:
            profiler.disable()

    simulation.driver.cache.snapshot = profiled_build  # type: ignore[method-assign]
    simulation.driver.scheduler.run = profiled_schedule  # type: ignore[method-assign]
    simulation.run()
    folder.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(folder / f"{name}-{cycle}.prof")
    text = io.StringIO()
    for order in ("cumulative", "tottime"):
        text.write(f"===== {name} {cycle}, sorted by {order} =====\n")
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats(order).print_stats(top)
    report = folder / f"{name}-{cycle}-profile.txt"
    report.write_text(text.getvalue(), encoding="utf-8")
    return report


def print_profile(
    console: Console, objects: list[ApiObject], cycle: int, folder: Path, top: int, name: str
) -> None:
    """`profile_cycle`, then print the text listing and where both files are."""
    report = profile_cycle(objects, cycle, folder, top, name)
    console.print(report.read_text(encoding="utf-8"), markup=False, highlight=False)
    console.print(f"saved {report} and {folder / f'{name}-{cycle}.prof'}")


# --- options and reports ------------------------------------------------------------------------


def add_run_options(
    parser: argparse.ArgumentParser,
    *,
    cycles: int,
    quiet: int,
    budget: float,
    out: Path,
    each: str = "",
) -> None:
    """--cycles, --quiet, --budget (`each`: " per run", say), --profile, --top and --out."""
    parser.add_argument("--cycles", type=int, default=cycles, help=f"cycles{each} at most (default {cycles})")
    parser.add_argument(
        "--quiet",
        type=int,
        default=quiet,
        help=f"stop after this many decision-free cycles in a row (default {quiet}; 0 = run all --cycles)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=budget,
        help=f"wall seconds{each} after which no further cycle starts (default {budget:g}; 0 = no limit)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        nargs="?",
        const=1,
        metavar="CYCLE",
        help="cProfile cycle CYCLE (default 1) instead of benchmarking",
    )
    parser.add_argument("--top", type=int, default=40, help="rows per profile listing (default 40)")
    parser.add_argument("--out", default=str(out), help="where to write the JSON")


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadAverageBefore": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def finish(report: dict[str, Any], out: str, console: Console) -> None:
    """After the table: a note if the machine was busy before the run, then the JSON to `out`."""
    load = report["machine"].get("loadAverageBefore")
    if load is not None and load[0] > (report["machine"]["cpus"] or 1) * 0.5:
        console.print(
            f"[yellow]note: load average was {load[0]:.1f} before the run; other processes share the CPUs, "
            "so these times are pessimistic[/yellow]"
        )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {path}")


STOPPED_BY = "stopped by"
"""The row of a `side_by_side` table that says how each run ended (`fmt_stopped`)."""


def side_by_side(
    title: str,
    headers: list[str],
    sections: tuple[tuple[str, ...], ...],
    value: Callable[[dict[str, Any], str], str],
    results: list[dict[str, Any]],
) -> Table:
    """A table with a column per result (under `headers`) and a row per measure, a section line after each
    of `sections`. A cell is `value(result, row)`; the row STOPPED_BY says how the run ended."""
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("measure")
    for header in headers:
        table.add_column(header, justify="right", overflow="fold")
    for section in sections:
        for row in section:
            table.add_row(row, *[fmt_stopped(r) if row == STOPPED_BY else value(r, row) for r in results])
        table.add_section()
    return table


# --- formatting ---------------------------------------------------------------------------------


def fmt_ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:,.0f} ms"


def fmt_s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:,.2f} s"


def fmt_cycles(seconds: list[float]) -> str:
    return " ".join(f"{value:.2f}" for value in seconds) + " s"


def fmt_actions(seconds: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}s" for name, value in seconds.items()) or "n/a"


def fmt_stopped(result: dict[str, Any]) -> str:
    """How a run ended, from its `stoppedBy`, `quietCyclesRequired`, `cycles` and `runSeconds`."""
    how = {"settled": f"{result['quietCyclesRequired']} quiet cycles"}.get(
        result["stoppedBy"], result["stoppedBy"]
    )
    return f"{how}, after {result['cycles']} cycles ({fmt_s(result['runSeconds'])})"
