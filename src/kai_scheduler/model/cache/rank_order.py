"""Keeping the cache's jobs and tasks in creation order (rank) as they change, without sorting them all.

A build from scratch lists jobs and tasks in creation order, and the session reads them in that order, so
the cache must too. Objects arrive nearly in creation order, so after a change only a short tail of the
dict is out of place: `placed` tracks the lowest rank that may be, and `sort_tail` sorts from there.
"""

from __future__ import annotations

import math
from typing import Final, Protocol, TypeVar


class _Ranked(Protocol):
    @property
    def rank(self) -> float: ...


R = TypeVar("R", bound=_Ranked)

# Below every rank: the last rank of an empty dict (any entry added to it is in place).
BEFORE_ALL: Final = -math.inf


def rank_of_last(items: dict[str, R]) -> float:
    """The rank of the last entry of `items` (`BEFORE_ALL` when it has none): a new entry ranked below it
    is out of place. A caller adding many entries in turn keeps it instead (each look costs an iterator)."""
    return next(reversed(items.values())).rank if items else BEFORE_ALL


def placed(items: dict[str, R], old: R | None, new: R, out_of_place: float | None) -> float | None:
    """`out_of_place` (the lowest rank that may be out of place; None: all in place) once `new` is stored
    under its key in `items`, where `old` was: assigning an existing key keeps its place in the dict, a new
    key goes last."""
    if old is not None:
        if old.rank == new.rank:
            return out_of_place
        lowest = min(old.rank, new.rank)
    elif items and new.rank < next(reversed(items.values())).rank:
        lowest = new.rank
    else:
        return out_of_place
    return lowest if out_of_place is None else min(out_of_place, lowest)


def sort_tail(items: dict[str, R], lowest: float) -> None:
    """Put `items` in rank order again: it was, but for entries added or re-ranked since, all ranked at or
    after `lowest`; so every entry after the last one ranked before `lowest` is in place, and only the
    others (objects arriving nearly in creation order: a few) are sorted again."""
    tail: list[str] = []
    for key, item in reversed(items.items()):
        if item.rank < lowest:
            break
        tail.append(key)
    moved = sorted(((key, items.pop(key)) for key in tail), key=lambda entry: entry[1].rank)
    items.update(moved)
