"""Reading a plugin's `arguments` as KAI writes them in its configuration (strings, e.g. "1.5")."""

from __future__ import annotations

from typing import Any


def number(plugin: str, arguments: dict[str, Any], key: str, default: float) -> float:
    """A numeric argument, given as a number or as a string; anything else is a one-line error naming
    `plugin.arguments.key`."""
    value = arguments.get(key, default)
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{plugin}.arguments.{key}: expected a number, got {value!r}") from None
