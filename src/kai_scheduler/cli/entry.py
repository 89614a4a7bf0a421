"""The `kai-scheduler` program: its parser (a subcommand per module of this package), the command the
arguments name, and the exit status: every user error (bad flags, bad manifests, bad configuration) ends
as one line on stderr and exit 2."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence

from kai_scheduler import __version__
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.cli import process_end, reserve, run, simulate, trace
from kai_scheduler.cli.flags import Parser, UsageError
from kai_scheduler.framework.config import ConfigError

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": run.command,
    "reserve": reserve.command,
    "simulate": simulate.command,
    "trace": trace.command,
}


def parser() -> argparse.ArgumentParser:
    """The program's parser; `run`'s, `reserve`'s and `trace`'s arguments are added when first parsed."""
    made = Parser(prog="kai-scheduler", description="A KAI-compatible scheduler for shared GPU clusters.")
    made.add_argument("--version", action="version", version=f"kai-scheduler {__version__}")
    commands = made.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in (simulate, trace, run, reserve):  # the order `--help` lists them in
        command.add_command(commands)
    return made


def program() -> int:
    """The `kai-scheduler` program (console script and `python -m kai_scheduler`): `main`, then the process
    ends without freeing what the command left behind (`process_end`); else every object left is frozen
    (gc.freeze), so that the interpreter's garbage collection at exit does not walk them (at 25,000
    simulated objects that last collection took 0.4 s; the process ends right after it)."""
    process_end.keep_what_is_left()
    status = main()
    process_end.end(status)
    gc.freeze()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except (UsageError, ManifestError, ConfigError) as error:
        print(f"kai-scheduler: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
