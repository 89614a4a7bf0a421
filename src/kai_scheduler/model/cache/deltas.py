"""Which of the cluster cache's methods are deltas: changes of the cluster every cache that views it must
see. A cache that keeps others current (`model.shard_caches.ShardedCache`) hands exactly these on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_MARK = "cache_delta"

F = TypeVar("F", bound=Callable[..., None])


def delta(method: F) -> F:
    """Mark a method as a delta."""
    setattr(method, _MARK, True)
    return method


def deltas_of(cls: type[Any]) -> tuple[str, ...]:
    """The names of the methods `cls` itself marks as deltas, in the order it defines them."""
    return tuple(name for name, value in vars(cls).items() if getattr(value, _MARK, False))
