"""What a single `simulate` run and its what-if runs (`--compare`, `--sweep`) read alike: the input's paths
(the built-in demo without any) and the run's clock and length (--start, --cycles, --until, --max-cycles)."""

from __future__ import annotations

import argparse
from datetime import datetime
from importlib import resources
from pathlib import Path

from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.cli.flags import UsageError, non_negative_duration, positive
from kai_scheduler.sim.engine import SimulationOptions

DEFAULT_START = "2026-01-01T00:00:00Z"


def simulation_options(args: argparse.Namespace) -> SimulationOptions:
    return SimulationOptions(
        start=_start(args.start),
        cycles=positive("--cycles", args.cycles),
        until=None if args.until is None else non_negative_duration("--until", args.until),
        max_cycles=positive("--max-cycles", args.max_cycles) or 1000,
    )


def input_paths(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The PATHs to read, and whether they are the built-in demo (no PATH given)."""
    demo = not args.paths
    return ([str(_demo_folder())] if demo else list(args.paths)), demo


def _demo_folder() -> Path:
    return Path(str(resources.files("kai_scheduler.sim").joinpath("demo")))


def _start(text: str) -> datetime:
    try:
        return parse_rfc3339(text)
    except ValueError:
        raise UsageError(f"--start: {text!r} is not an RFC 3339 time such as {DEFAULT_START}") from None
