"""Durations as users write them: plain seconds (`30`, `1.5`) or Go-style (`90s`, `10m`, `1h30m`, `500ms`),
plus Prometheus's days and weeks (`1d`, `1w`).

One parser serves manifests (simulation annotations, queue min-runtimes), CLI flags (`--until 10m`) and the
scheduler configuration (`period: 1s`, a negative `defaultStalenessGracePeriod: -1s`), so every place accepts
the same spellings. Go-style follows `time.ParseDuration`: a sign, then one or more number+unit terms.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_UNIT_SECONDS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),  # U+00B5 MICRO SIGN, as Go accepts
    "μs": Fraction(1, 10**6),  # U+03BC GREEK SMALL LETTER MU, as Go accepts
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
    # Days and weeks, as Prometheus writes them: time-based fairness windows are usually this long.
    "d": Fraction(86400),
    "w": Fraction(7 * 86400),
}
# Longer units first so that `ms` is not read as `m` followed by a stray `s`.
_UNIT = "|".join(sorted(_UNIT_SECONDS, key=len, reverse=True))
_TERM = re.compile(rf"({_NUMBER})({_UNIT})", re.ASCII)
_GO_DURATION = re.compile(rf"([+-]?)((?:{_NUMBER}(?:{_UNIT}))+)", re.ASCII)
_PLAIN_SECONDS = re.compile(rf"[+-]?{_NUMBER}(?:[eE][+-]?\d+)?", re.ASCII)

_EXAMPLES = "use seconds such as 30 or 1.5, or a duration such as 90s, 10m, 1h30m, 500ms, 1d, 1w"


def parse_duration(text: str | float) -> float:
    """Return the duration in seconds; raise ValueError naming the bad input and the accepted forms.

    Numbers (from YAML, e.g. `period: 1`) are taken as seconds. Negative durations are allowed here because
    configuration uses them ("never"); callers that need a non-negative value check the sign themselves.
    """
    if isinstance(text, bool):  # bool is an int subclass; `period: true` is a mistake, not 1 second
        raise ValueError(f"expected a duration, got {text!r} ({_EXAMPLES})")
    if isinstance(text, int | float):
        return _finite(float(text), text)
    if not isinstance(text, str):
        raise ValueError(f"expected a duration, got {type(text).__name__} ({_EXAMPLES})")
    stripped = text.strip()
    if _PLAIN_SECONDS.fullmatch(stripped):
        return _finite(float(stripped), text)
    match = _GO_DURATION.fullmatch(stripped)
    if match is None:
        raise ValueError(f"{text!r} is not a valid duration ({_EXAMPLES})")
    total = sum(
        (Fraction(number) * _UNIT_SECONDS[unit] for number, unit in _TERM.findall(match[2])),
        start=Fraction(0),
    )
    return float(-total if match[1] == "-" else total)


_GO_UNITS = frozenset({"ns", "us", "µs", "μs", "ms", "s", "m", "h"})


def parse_go_duration(text: str) -> float:
    """Seconds of a duration exactly as Go's `time.ParseDuration` reads it, which is how KAI reads its
    duration annotations and `metav1.Duration` fields: a unit on every number (`90s`, `1h30m`; only `0`
    may go without), no days or weeks. Raise ValueError naming the bad input otherwise."""
    stripped = text.strip()
    if stripped in ("0", "+0", "-0"):
        return 0.0
    match = _GO_DURATION.fullmatch(stripped)
    if match is None or any(unit not in _GO_UNITS for _, unit in _TERM.findall(match[2])):
        raise ValueError(f"{text!r} is not a Go duration (use a unit on each number: 30s, 5m, 1h30m)")
    return parse_duration(stripped)


def go_duration_text(seconds: float) -> str:
    """A duration as Go's `time.Duration.String` writes it (`2m0s`, `1h30m0s`, `1.5s`, `500ms`), the way
    KAI's messages show durations."""
    nanos = round(seconds * 1e9)
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos == 0:
        return "0s"
    if nanos < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_trimmed(Fraction(nanos, size))}{unit}"
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = f"{_trimmed(Fraction(rest, 10**9))}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _trimmed(value: Fraction) -> str:
    return f"{float(value):.9f}".rstrip("0").rstrip(".")


def _finite(seconds: float, original: object) -> float:
    """Reject infinities and NaN, which YAML can spell (`.inf`) and which no scheduler clock can hold."""
    if not math.isfinite(seconds):
        raise ValueError(f"{original!r} is not a finite duration ({_EXAMPLES})")
    return seconds
