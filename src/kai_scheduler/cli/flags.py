"""What every `kai-scheduler` command reads its flags with: `UsageError` (one line on stderr, exit 2), the
parser that raises it, and the readers of the values several commands share (durations, counts, the
scheduler configuration file, the kubeconfig, `--out`), so that one kind of bad value is said one way."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import yaml

from kai_scheduler.api.durations import parse_duration
from kai_scheduler.framework.config import ConfigError, SchedulerConfig, parse_config

if TYPE_CHECKING:
    from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that shows each option's default where it has one and its help does not say it already; the
    description and epilog as written (they list kinds and annotations line by line)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default in (None, False, [], argparse.SUPPRESS) or "default" in text or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class Parser(argparse.ArgumentParser):
    """Errors raise UsageError instead of exiting. A command's arguments can be added by `arguments` when
    the command is first parsed (or its help shown), so that building the parser imports nothing of the
    other commands (`run`'s defaults and choices come from live mode's modules)."""

    def __init__(
        self, *args: Any, arguments: Callable[[argparse.ArgumentParser], None] | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._arguments = arguments

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self._arguments is not None:
            add, self._arguments = self._arguments, None
            add(self)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def duration(flag: str, text: str) -> float:
    """A duration flag's seconds (90s, 10m, 2h; `api.durations`); a bad one is a `UsageError` naming it."""
    try:
        return parse_duration(text)
    except ValueError as error:
        raise UsageError(f"{flag}: {error}") from None


def non_negative_duration(flag: str, text: str) -> float:
    """As `duration`, and 0 or more."""
    value = duration(flag, text)
    if value < 0:
        raise UsageError(f"{flag}: must not be negative, got {text!r}")
    return value


def positive(flag: str, value: int | None) -> int | None:
    """A count flag's value, at least 1 when given."""
    if value is not None and value < 1:
        raise UsageError(f"{flag}: must be at least 1, got {value}")
    return value


def yaml_position(error: yaml.YAMLError) -> str:
    """Where in its file a YAML error is, as " line L, column C" (1-based), or "" when PyYAML does not say."""
    mark = getattr(error, "problem_mark", None)
    return f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def scheduler_config(path: str | None, flag: str = "--config") -> SchedulerConfig:
    """The scheduler configuration in the file `flag` names (KAI's default without one); its notices are
    warnings on stderr."""
    if path is None:
        return SchedulerConfig()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"{flag} {path}: {error.strerror}") from None
    try:
        document: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise UsageError(f"{path}:{yaml_position(error)} invalid YAML") from None
    try:
        config = parse_config(document)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    for notice in config.notices:
        print(f"kai-scheduler: warning: {path}: {notice}", file=sys.stderr)
    return config


def kube_client(kubeconfig: str | None) -> LightkubeClient:
    """The API client from a kubeconfig (or in-cluster); a broken kubeconfig is one line, not a traceback."""
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

    where = kubeconfig or "the in-cluster or default kubeconfig"
    try:
        return LightkubeClient.from_kubeconfig(kubeconfig)
    except yaml.YAMLError as error:
        position = yaml_position(error)
        raise UsageError(f"--kubeconfig {where}:{position}{':' if position else ''} invalid YAML") from None
    except KeyError as error:
        raise UsageError(f"--kubeconfig {where}: missing {error}") from None
    except (KubeConfigError, OSError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(f"--kubeconfig {where}: {error}") from None


def write_out(path: str | None, text: str) -> None:
    """`--out`: the text to the file, or to stdout without one."""
    if path is None:
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--out {path}: {error.strerror}") from None


def write_out_chunks(path: str | None, chunks: Iterable[bytes]) -> None:
    """`--out` for text made in pieces of ASCII or UTF-8 bytes: each written as it comes, to the file or to
    stdout (its bytes underneath, when it has them) without one."""
    if path is None:
        sys.stdout.flush()
        raw = getattr(sys.stdout, "buffer", None)
        for chunk in chunks:
            if raw is None:
                sys.stdout.write(chunk.decode("utf-8"))
            else:
                raw.write(chunk)
        return
    try:
        with open(path, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
    except OSError as error:
        raise UsageError(f"--out {path}: {error.strerror}") from None


_MAX_WARNINGS = 20


def warn(lines: Sequence[str]) -> None:
    """Warnings about the input on stderr, one a line; a flood (a typo repeated in 10,000 pods) is cut
    short with a count of the rest."""
    shown = lines if len(lines) <= _MAX_WARNINGS else lines[: _MAX_WARNINGS - 1]
    for line in shown:
        print(f"kai-scheduler: warning: {line}", file=sys.stderr)
    if len(shown) < len(lines):
        print(f"kai-scheduler: warning: ... and {len(lines) - len(shown)} more warnings", file=sys.stderr)
