"""Creation order as ranks that survive objects coming and going (live mode, where objects arrive one by
one and in any order; the simulator knows every object up front and numbers them once).

A rank is a float: a new object's lies between its neighbours' in the order of the sort keys (creation
time, then key), so the ranks of the others never change; when two neighbours are too close for a float
between them, everything is renumbered, and the caller hears so and hands every object over again.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import Any

_SPACING = float(2**20)  # between consecutive ranks after a renumbering: twenty halvings before the next


class CreationRanks:
    def __init__(self) -> None:
        self._keys: list[Any] = []  # sort keys, in order
        self._ranks: dict[Hashable, float] = {}

    def rank(self, sort_key: Any) -> tuple[float, bool]:
        """The rank of `sort_key` (given one if new), and whether every rank was renumbered to fit it."""
        known = self._ranks.get(sort_key)
        if known is not None:
            return known, False
        keys = self._keys
        index = bisect.bisect_left(keys, sort_key)
        before = self._ranks[keys[index - 1]] if index > 0 else None
        after = self._ranks[keys[index]] if index < len(keys) else None
        if before is None and after is None:
            rank = 0.0
        elif after is None:
            assert before is not None
            rank = before + _SPACING
        elif before is None:
            rank = after - _SPACING
        else:
            rank = (before + after) / 2
        keys.insert(index, sort_key)
        if (before is not None and rank <= before) or (after is not None and rank >= after):
            self._ranks = {key: i * _SPACING for i, key in enumerate(keys)}
            return self._ranks[sort_key], True
        self._ranks[sort_key] = rank
        return rank, False

    def forget(self, sort_key: Any) -> None:
        if self._ranks.pop(sort_key, None) is not None:
            index = bisect.bisect_left(self._keys, sort_key)
            del self._keys[index]
