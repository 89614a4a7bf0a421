"""Creation order as ranks that survive objects coming and going (live mode, where objects arrive one by
one and in any order; the simulator knows every object up front and numbers them once).

A rank is a whole number below 2**53 (so exact as a float), and ranks follow the sort keys (creation
time, then key). A new object after all others gets the last rank plus a wide step, one before all others
the first rank minus that step, and one between two others the whole number halfway between them, but at
most a narrower step after the earlier one (objects of one second often arrive in order, each right after
the one before it: they then use a wide gap up one narrow step at a time rather than halving it); the
ranks of the others do not change.

When two neighbours have no whole number left between them, room is made locally, by the order-maintenance
scheme of Bender et al. ("Two simplified algorithms for maintaining order in a list", 2002): of the aligned
blocks of ranks around the spot (the 2, 4, 8, ... whole numbers that share all but their last 1, 2, 3, ...
bits), the smallest one that is sparse enough has its objects spread out evenly in it. A block of 2**i
ranks is sparse enough when it would hold at most (2 / SPARSE)**i objects, so larger blocks must be
emptier, which bounds the objects moved per insertion (amortised, O(log n)); for objects that arrive almost
in order, as a live cluster's do, it is a fraction of one. The caller hears which objects moved and hands
them to whoever holds their old ranks again.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import Any

_BITS = 53  # ranks lie in [0, 2**_BITS): whole numbers a float holds exactly
_TOP = 1 << _BITS
_STEP = 1 << 32  # between an object added after (or before) all others and its neighbour
_NEAR = 1 << 16  # at most between an object added between two others and the earlier one
_SPARSE = 1.5  # a block of 2**i ranks may hold (2 / _SPARSE)**i objects: about 4 million in all


class CreationRanks:
    def __init__(self) -> None:
        self._keys: list[Any] = []  # sort keys, in order
        self._labels: list[int] = []  # their ranks, in the same order
        self._ranks: dict[Hashable, int] = {}

    def rank(self, sort_key: Any) -> tuple[float, list[Any]]:
        """The rank of `sort_key` (given one if new), and the sort keys of the other objects whose rank
        changed to make room for it (usually none)."""
        known = self._ranks.get(sort_key)
        if known is not None:
            return float(known), []
        index = bisect.bisect_left(self._keys, sort_key)
        before = self._labels[index - 1] if index > 0 else None
        after = self._labels[index] if index < len(self._labels) else None
        label = _between(before, after)
        self._keys.insert(index, sort_key)
        if label is None:
            moved = self._spread(index)
            return float(self._ranks[sort_key]), moved
        self._labels.insert(index, label)
        self._ranks[sort_key] = label
        return float(label), []

    def forget(self, sort_key: Any) -> None:
        if self._ranks.pop(sort_key, None) is not None:
            index = bisect.bisect_left(self._keys, sort_key)
            del self._keys[index]
            del self._labels[index]

    def _spread(self, index: int) -> list[Any]:
        """Spread out the smallest sparse-enough block around `self._keys[index]` (just inserted, without a
        rank yet) over its ranks; returns the other sort keys whose rank changed."""
        labels = self._labels
        anchor = labels[index - 1] if index > 0 else labels[index]
        for bits in range(1, _BITS + 1):
            size = 1 << bits
            base = anchor >> bits << bits
            first = bisect.bisect_left(labels, base)
            end = bisect.bisect_left(labels, base + size)  # the block's old labels: labels[first:end]
            count = end - first + 1  # and the new object (first <= index <= end)
            if count * _SPARSE**bits <= size or bits == _BITS:
                break
        spread = [base + (2 * i + 1) * size // (2 * count) for i in range(count)]
        keys = self._keys[first : end + 1]
        labels[first:end] = spread
        moved = [key for key, label in zip(keys, spread, strict=True) if self._ranks.get(key, label) != label]
        self._ranks.update(zip(keys, spread, strict=True))
        return moved


def _between(before: int | None, after: int | None) -> int | None:
    """A whole number strictly between two ranks (None: no bound on that side) in range; None if none."""
    if before is None and after is None:
        return _TOP // 2
    if after is None:
        assert before is not None
        return before + _STEP if before + _STEP < _TOP else _halfway(before, _TOP)
    if before is None:
        return after - _STEP if after - _STEP >= 0 else _halfway(-1, after)
    return _halfway(before, after)


def _halfway(low: int, high: int) -> int | None:
    return low + min((high - low) // 2, _NEAR) if high - low >= 2 else None
