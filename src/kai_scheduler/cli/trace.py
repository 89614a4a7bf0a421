"""`kai-scheduler trace import FORMAT ...`: public cluster traces into manifests for `simulate`. The command
is `traces.command`'s; here it is only hooked into the program, its arguments added when it is parsed."""

from __future__ import annotations

import argparse
from typing import Any


def add_command(commands: Any) -> None:
    """The `trace` subcommand on the program's subparsers."""
    commands.add_parser(
        "trace",
        help="turn public cluster traces into manifests for simulate (trace import FORMAT ...)",
        description="Turn public cluster traces into manifests for `kai-scheduler simulate`.",
        arguments=_arguments,
    )


def _arguments(trace: argparse.ArgumentParser) -> None:
    from kai_scheduler.traces.command import add_arguments

    add_arguments(trace)


def command(args: argparse.Namespace) -> int:
    from kai_scheduler.traces.command import run

    return run(args)
