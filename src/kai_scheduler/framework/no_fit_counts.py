"""How many nodes each filter turned away from a pod that found no node, kept so that a change of a few
nodes is counted again over those nodes alone (issue #23, point 1).

The explanation of a pod that does not fit (`Session.explain_no_fit`) names, per filter in order, the
nodes that every filter before it let through and it did not: the nodes whose first refusing filter it
is. So the explanation is the count of each node's first refusing filter, and a node that changed moves
one count from its old first refusal to its new one. A trickle cycle at 5,000 nodes explains some 500
shapes of pods again, each over every node, while a node or two changed since the last cycle explained
them (`placement_failures` knows which rows may differ).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kai_scheduler.model.nodes import BoolArray

# (the words of a filter's refusal, which of the nodes asked about pass it)
Filter = tuple[str, BoolArray]


class NoFitCounts:
    """Each node's first refusing filter (the filters' count: none refuses it) and how many nodes each
    filter is the first refusal of, as of `position` in the log of changes of the node table counted
    over (`NodeTable.change_position`)."""

    __slots__ = ("counts", "names", "position", "refusals", "text")

    def __init__(self, names: tuple[str, ...], refusals: npt.NDArray[np.int16], position: int) -> None:
        self.names = names
        self.refusals = refusals
        self.counts: list[int] = np.bincount(refusals, minlength=len(names) + 1).tolist()
        self.position = position
        # The explanation these counts read as, kept by whoever words it until a count moves.
        self.text: str | None = None

    @staticmethod
    def of(filters: Sequence[Filter], position: int) -> NoFitCounts:
        """Counted over every node (`filters` answer for all of them)."""
        return NoFitCounts(tuple(name for name, _ in filters), first_refusals(filters), position)

    def recount(self, rows: list[int], refusals: list[int], position: int) -> None:
        """`rows` (unique) counted again: their first refusals are `refusals` now, as of `position`."""
        counts, kept = self.counts, self.refusals
        for row, refusal in zip(rows, refusals, strict=True):
            stale = kept.item(row)
            if stale != refusal:
                counts[stale] -= 1
                counts[refusal] += 1
                kept[row] = refusal
                self.text = None
        self.position = position

    def detail(self) -> str:
        """The filters that turned nodes away, each with how many, in filter order."""
        parts = [f"{count} {name}" for name, count in zip(self.names, self.counts, strict=False) if count]
        return ", ".join(parts) if parts else "no node fits"

    def same_as(self, other: NoFitCounts) -> bool:
        return (
            self.names == other.names
            and self.counts == other.counts
            and np.array_equal(self.refusals, other.refusals)
        )


def first_refusals(filters: Sequence[Filter]) -> npt.NDArray[np.int16]:
    """Per node asked about, the index of the first filter it does not pass (the filters' count: it
    passes all)."""
    size = len(filters[0][1]) if filters else 0
    refusals = np.full(size, len(filters), dtype=np.int16)
    # From the last filter to the first, so that an earlier refusal overwrites a later one.
    for index in range(len(filters) - 1, -1, -1):
        refusals[~filters[index][1]] = index
    return refusals
