"""How many nodes each filter turned away from a pod that found no node, kept so that a change of a few
nodes is counted again over those nodes alone (issue #23, point 1).

The explanation of a pod that does not fit (`Session.explain_no_fit`) names, per filter in order, the
nodes that every filter before it let through and it did not: the nodes whose first refusing filter it
is. So the explanation is the count of each node's first refusing filter, and a node that changed moves
one count from its old first refusal to its new one. A trickle cycle at 5,000 nodes explains some 500
shapes of pods again, each over every node, while a node or two changed since the last cycle explained
them (`placement_failures` knows which rows may differ).

A pod counted afresh is counted in two parts: the nodes a static filter turns away (a node selector naming
a rack turns away all but its 20 nodes), counted once per placement in a session (`StaticRefusals`), and
the nodes passing every static filter, asked about the rest. A first cycle at 20,000 nodes explains some
600 pods, each of its own request and rack or zone, and counting every node for each grew with the
cluster (issue #23, row 5).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kai_scheduler.framework.static_masks import Masks, NodeFlags, passing_at, selected_by
from kai_scheduler.model.nodes import BoolArray, IntArray, NodeTable

if TYPE_CHECKING:
    from kai_scheduler.framework.session import StaticPredicate
    from kai_scheduler.model.jobs import Placement

# (the words of a filter's refusal, which of the nodes asked about pass it)
Filter = tuple[str, BoolArray]
# Per node, the index of its first refusing filter.
Refusals = npt.NDArray[np.int16]


class NoFitCounts:
    """Each node's first refusing filter (the filters' count: none refuses it) and how many nodes each
    filter is the first refusal of, as of `position` in the log of changes of the node table counted
    over (`NodeTable.change_position`)."""

    __slots__ = ("_moved", "_past_static", "_refusals", "counts", "names", "position", "text")

    def __init__(
        self,
        names: tuple[str, ...],
        counts: list[int],
        position: int,
        refusals: Refusals | None,
        past_static: tuple[StaticRefusals, list[int] | Refusals] | None = None,
    ) -> None:
        self.names = names
        self.counts = counts
        self.position = position
        self._refusals = refusals
        # Counted past the static filters (`past_static`): their counts and the refusals of the nodes
        # passing them, and the rows counted again since with their refusals, until `refusals` is first
        # asked. Why: a node that changed is counted again for every shape explained in the last cycle,
        # and each row asked of them is found at once (working out every node's came to 30 us a shape).
        self._past_static = past_static
        self._moved: dict[int, int] = {}
        # The explanation these counts read as, kept by whoever words it until a count moves.
        self.text: str | None = None

    @staticmethod
    def of(filters: Sequence[Filter], position: int) -> NoFitCounts:
        """Counted over every node (`filters` answer for all of them)."""
        refusals = first_refusals(filters)
        counts: list[int] = np.bincount(refusals, minlength=len(filters) + 1).tolist()
        return NoFitCounts(tuple(name for name, _ in filters), counts, position, refusals)

    @staticmethod
    def past_static(
        names: tuple[str, ...], static: StaticRefusals, refusals: list[int], position: int
    ) -> NoFitCounts:
        """Counted over every node: those a static filter turns away as `static` counted them, and the
        ones passing every static filter (`static.passing`, in order) refused by `refusals` (indices of
        `names`, whose first filters are the static ones). Each node's refusal is worked out when first
        asked: a first cycle's pods that find no node are mostly of shapes asked once."""
        counts = [*static.counts, *[0] * (len(names) + 1 - len(static.counts))]
        for refusal in refusals:
            counts[refusal] += 1
        return NoFitCounts(names, counts, position, None, (static, refusals))

    @staticmethod
    def past_static_read(
        names: tuple[str, ...], static: StaticRefusals, refusals: Refusals, position: int
    ) -> NoFitCounts:
        """`past_static` of refusals read from a `RequestRefusals` column at `static.passing` (counted at
        once: an array of up to every node)."""
        counts: list[int] = np.bincount(refusals, minlength=len(names) + 1).tolist()
        for index, count in enumerate(static.counts):
            counts[index] += count
        return NoFitCounts(names, counts, position, None, (static, refusals))

    @property
    def refusals(self) -> Refusals:
        if self._refusals is None:
            assert self._past_static is not None
            static, refusals = self._past_static
            every = static.refusals()
            every[static.passing] = refusals
            for row, refusal in self._moved.items():
                every[row] = refusal
            self._refusals, self._past_static, self._moved = every, None, {}
        return self._refusals

    def refusal_at(self, row: int) -> int:
        """`refusals` at `row`, read without working out every node's while they are not."""
        if self._refusals is not None:
            return int(self._refusals.item(row))
        moved = self._moved.get(row)
        if moved is not None:
            return moved
        assert self._past_static is not None
        static, refusals = self._past_static
        at = static.position_of(row)
        return int(refusals[at]) if at is not None else static.refusal_at(row)

    def recount(self, rows: list[int], refusals: list[int], position: int) -> None:
        """`rows` (unique) counted again: their first refusals are `refusals` now, as of `position`."""
        counts, kept = self.counts, self._refusals
        for row, refusal in zip(rows, refusals, strict=True):
            stale = self.refusal_at(row)
            if stale != refusal:
                counts[stale] -= 1
                counts[refusal] += 1
                if kept is not None:
                    kept[row] = refusal
                else:
                    self._moved[row] = refusal
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


def first_refusals(filters: Sequence[Filter]) -> Refusals:
    """Per node asked about, the index of the first filter it does not pass (the filters' count: it
    passes all)."""
    size = len(filters[0][1]) if filters else 0
    refusals = np.full(size, len(filters), dtype=np.int16)
    # From the last filter to the first, so that an earlier refusal overwrites a later one.
    for index in range(len(filters) - 1, -1, -1):
        refusals[~filters[index][1]] = index
    return refusals


class RequestRefusals:
    """For one request, every node's first refusal among the filters after the static ones (the task
    predicates, then the resources it asks, in `Session._no_fit_filters`'s order), as an index of all
    the filters' names, static ones first (their count: none refuses), as of `position` in the node
    table's log of changes, with the predicates' masks it was worked out from.

    Why: the tail of a deep backlog's walk explains some 600 pod shapes with no node changing between
    them, some 11 of each request, each bound to its own rack or zone (issue #23, row 4): one column per
    request, read at each shape's rows, costs less than asking every shape's rows about each filter."""

    __slots__ = ("column", "masks", "position")

    def __init__(self, column: Refusals, masks: tuple[BoolArray, ...], position: int) -> None:
        self.column = column
        self.masks = masks
        self.position = position

    def read_from(self, masks: tuple[BoolArray, ...]) -> bool:
        """Whether it was worked out from `masks`: the very arrays, which are read-only, so unchanged
        since."""
        return len(masks) == len(self.masks) and all(
            mask is kept for mask, kept in zip(masks, self.masks, strict=True)
        )

    def update(self, rows: list[int], refusals: list[int], position: int) -> None:
        """`rows` (the only ones whose usage changed since `position`) worked out again: `refusals`."""
        self.column[rows] = refusals
        self.position = position


class NoFitWords:
    """Explanations' words by what they read besides the pod's shape: a head (the node count and the
    request, say) and the counts by filter name. Kept from one session to the next (`PlacementFailures`):
    a cordon moves one node in every shape's counts, and the shapes of one request whose counts are
    alike (pods bound to racks whose nodes are full) read alike."""

    __slots__ = ("_texts",)

    def __init__(self) -> None:
        self._texts: dict[tuple[Hashable, tuple[str, ...], tuple[int, ...]], str] = {}

    def of(self, head: Hashable, counts: NoFitCounts, words: Callable[[], str]) -> str:
        """The words `words` gives for `head` and counts alike to `counts`, worked out once."""
        key = (head, counts.names, tuple(counts.counts))
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= _MOST_TEXTS:
                self._texts.clear()
            text = self._texts[key] = words()
        return text


# More explanations' words kept than this, and they are let go (`NoFitWords`): a long run meets many.
_MOST_TEXTS = 8192


class StaticRefusals:
    """A placement's static filters: how many nodes each is the first refusal of, and the nodes none
    refuses (in index order), counted from its masks (`of_masks`) or from the rows its node selector names
    (`of_selected_rows`); and each node's first refusal when asked (`refusal_at`, `refusals`)."""

    __slots__ = ("_every", "_first", "_positions", "_refused_rows", "counts", "passing")

    def __init__(
        self,
        counts: list[int],
        passing: IntArray,
        first: Callable[[int], int],
        every: Callable[[], Refusals],
    ) -> None:
        self.counts = counts
        self.passing = passing
        self._first = first  # the first refusal of a row some static filter refuses
        self._every = every  # `refusals`
        self._positions: dict[int, int] | None = None  # row -> its index in `passing`, once asked
        # `refusal_at` by row, as asked: the shapes of one placement counted again ask the same rows.
        self._refused_rows: dict[int, int] = {}

    @staticmethod
    def of_masks(masks: Masks) -> StaticRefusals:
        """Counted from a placement's masks over every node (`Session._static`)."""
        ok, static = masks
        counts, past = _first_refusal_counts([passing for _, passing in static], ok.size)

        def first(row: int) -> int:
            for index, (_, passing) in enumerate(static):
                if not passing.item(row):
                    return index
            raise AssertionError(f"no static filter refuses row {row}")

        def every() -> Refusals:
            return first_refusals(static) if static else np.full(ok.size, 0, dtype=np.int16)

        return StaticRefusals(counts, np.flatnonzero(past), first, every)

    @staticmethod
    def of_selected_rows(
        predicates: Sequence[tuple[str, str, StaticPredicate]],
        placement: Placement,
        nodes: NodeTable,
        flags: LeadingFlags,
    ) -> StaticRefusals | None:
        """Counted from the rows a node selector names (`static_masks.selected_by`) when only node flags
        come before it (`LeadingFlags`: counted once for every placement), each later filter asked at
        those rows alone; None when no selector names them or another filter comes first. Why: a first
        cycle's pods that find no node select a rack or a zone each, and their masks over every node made
        explaining them cost more with every node (issue #23, row 5)."""
        selected = selected_by(predicates, placement, nodes)
        if selected is None or selected[0] > len(flags.masks):
            return None
        selecting, rows = selected
        masks = flags.masks[:selecting]
        counts, flagged_through = flags.counted(selecting, nodes.size)
        for mask in masks:
            rows = rows[mask[rows]]
        # The selector's: the nodes the flags let through less those it names.
        counts = [*counts, flagged_through - rows.size]
        # `rows`' first refusals among the filters after the selector (their count: none refuses).
        asked = np.full(rows.size, len(predicates), dtype=np.int16)
        alive = np.arange(rows.size)
        for index in range(selecting + 1, len(predicates)):
            refused = alive[:0]
            if alive.size:
                ok = passing_at(predicates[index][2], placement, nodes, rows[alive])
                refused, alive = alive[~ok], alive[ok]
                asked[refused] = index
            counts.append(int(refused.size))

        def first(row: int) -> int:
            for index, mask in enumerate(masks):
                if not mask.item(row):
                    return index
            at = int(np.searchsorted(rows, row))
            return int(asked.item(at)) if at < rows.size and rows.item(at) == row else selecting

        def every() -> Refusals:
            refusals = np.full(nodes.size, selecting, dtype=np.int16)
            refusals[rows] = asked
            for index in range(selecting - 1, -1, -1):
                refusals[~masks[index]] = index
            return refusals

        return StaticRefusals(counts, rows[alive], first, every)

    def position_of(self, row: int) -> int | None:
        """The index of `row` in `passing` (None: a static filter refuses it)."""
        if self._positions is None:
            self._positions = {node: at for at, node in enumerate(self.passing.tolist())}
        return self._positions.get(row)

    def refusal_at(self, row: int) -> int:
        """`refusals` at a row some static filter refuses."""
        known = self._refused_rows.get(row)
        if known is None:
            known = self._refused_rows[row] = self._first(row)
        return known

    def refusals(self) -> Refusals:
        """Each node's first refusing static filter (their count: none refuses), a new array."""
        return self._every()


class LeadingFlags:
    """The node flags a session's static predicates start with (`NodeFlags`: cordon, readiness, the same
    for every placement), and for the first few of them how many nodes each is the first refusal of and
    how many pass them all, counted once (`StaticRefusals.of_selected_rows`)."""

    __slots__ = ("_counted", "masks")

    def __init__(self, predicates: Sequence[tuple[str, str, StaticPredicate]]) -> None:
        self.masks: list[BoolArray] = []
        for _, _, predicate in predicates:
            if not isinstance(predicate, NodeFlags):
                break
            self.masks.append(predicate.mask)
        self._counted: dict[int, tuple[list[int], int]] = {}

    def counted(self, first: int, size: int) -> tuple[list[int], int]:
        """For the `first` flags, how many of the `size` nodes each is the first refusal of, and how many
        pass them all."""
        found = self._counted.get(first)
        if found is None:
            counts, past = _first_refusal_counts(self.masks[:first], size)
            found = self._counted[first] = (counts, int(np.count_nonzero(past)))
        return found


def _first_refusal_counts(masks: Sequence[BoolArray], size: int) -> tuple[list[int], BoolArray]:
    """How many of the `size` nodes each of `masks` is the first refusal of (those passing the masks
    before it, less those passing it too), and which nodes pass them all."""
    counts: list[int] = []
    past = np.ones(size, dtype=np.bool_)
    before = size
    for mask in masks:
        np.logical_and(past, mask, out=past)
        after = int(np.count_nonzero(past))
        counts.append(before - after)
        before = after
    return counts, past
