"""The small pieces shared by the configuration readers (`config`, `usage_config`, `search_budgets`,
`operator_objects`): `ConfigError`, and reading a duration under a key of a document or a Go duration, and
writing one back as text."""

from __future__ import annotations

from typing import Any

from kai_scheduler.api.durations import parse_duration, parse_go_duration


class ConfigError(ValueError):
    """A configuration problem, with the key it is about."""


def duration(document: dict[str, Any], key: str, default: float, *, where: str = "") -> float:
    """The duration under `key` in seconds (`default` when absent); errors name it `<where>.<key>`."""
    value = document.get(key)
    if value is None:
        return default
    try:
        return parse_duration(str(value))
    except ValueError as error:
        raise ConfigError(f"{where + '.' if where else ''}{key}: {error}") from None


def go_duration(value: Any, where: str) -> float:
    """A non-negative duration written as Go writes them (`500ms`, `2m`), as KAI's `metav1.Duration` fields
    and duration arguments are, in seconds; errors name `where`."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a duration such as 30s or 2m, got {value!r}")
    try:
        seconds = parse_go_duration(value)
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    if seconds < 0:
        raise ConfigError(f"{where} must be non-negative, got {value!r}")
    return seconds


def duration_text(value: float) -> str:
    """A duration in seconds as `parse_duration` reads it back exactly (`60s`, `0.25s`)."""
    return f"{int(value)}s" if float(value).is_integer() else f"{value!r}s"
