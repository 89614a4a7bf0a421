"""The `kai-scheduler` command line, one module per command: `simulate` (`simulate.py`; its what-if runs,
`--compare` and `--sweep`, in `what_if.py`, what both read alike in `sim_options.py`), `run` (`run.py`, live
mode), `reserve` (`reserve.py`, inside a GPU reservation pod) and `trace` (`trace.py`). `entry.py` makes the
parser and turns every user error into one line and exit 2; `flags.py` has `UsageError` and the flag readers
the commands share.

Live mode's modules are imported by `run` and `reserve` when they are parsed or start, not when the program
starts: `simulate` needs none of them.
"""

from kai_scheduler.cli.entry import main, parser, program
from kai_scheduler.cli.flags import UsageError
from kai_scheduler.cli.run import run_options

__all__ = ["UsageError", "main", "parser", "program", "run_options"]
