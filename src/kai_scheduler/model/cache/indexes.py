"""The one operation the cache's dict-of-sets indexes share: taking a value out, and its key once empty."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def discard(index: dict[K, set[V]], key: K, value: V) -> None:
    """Take `value` out of `index[key]`; an empty set goes, so a key is present only while it has values."""
    values = index.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]
