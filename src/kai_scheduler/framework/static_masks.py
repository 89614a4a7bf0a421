"""The nodes passing each placement's static predicates, kept from one session to the next while what they
read stays (issue #23, point 1: a cycle after one change costs what changed).

A static predicate (`ExtensionPoints.static_predicates`: cordon, readiness, node affinity and selector,
taints, volume binding) reads of a pod only its placement constraints, and of the cluster only the node
table's static facts (`NodeTable.specs`, a new list once any node's facts change) and the storage objects
(the same object until they change). So while the specs list and the storage are the same objects and the
session's static predicates are the same by name and words (the plugins and their configuration are
those of one scheduler), each placement's masks (`Session._static`) and the few rows they leave
(`Session._few_candidates`) are those the last session worked out: a trickle cycle at 5,000 nodes asks
some 180 placements, each a walk over every node, while a pod arrived or completed.

When a few nodes' static facts change (a cordon), the masks kept still answer for every other node: each
predicate's answer at a node reads that node's facts alone. They are handed on as older masks with the
rows where they may be wrong (`OlderMasks`), so that a session asking a few rows of a placement (whether a
row that changed is a candidate for a pod that found no node, and how it is explained:
`Session.static_refusal_at`) does not work out the placement's masks over every node again; a row whose
facts changed is answered by the node flags (`NodeFlags`: cordon, readiness) when one of the first
predicates refuses it.

A placement whose node selector names a few nodes (a rack) need not be asked over every node at all: a
predicate that knows the few rows it passes without a walk (`RowPredicate.selected_rows`: the label index
knows a label value's rows) gives them, and each other predicate is asked at those rows alone
(`passing_rows`). A first cycle's pods select one of the racks, and a rack's placement asked over every
node made the cycle's placements cost nodes x racks.

With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`) every carried mask is worked out again when a session
starts from it, every answer of an older mask when given, and a difference raises `CarriedMismatch`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from itertools import compress
from operator import is_not
from typing import TYPE_CHECKING

import numpy as np

from kai_scheduler.model.nodes import BoolArray, IntArray, NodeSpecInfo, NodeTable
from kai_scheduler.model.storage import Storage

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session, StaticPredicate
    from kai_scheduler.model.jobs import Placement

# A placement's masks: the nodes passing every static predicate, and each predicate's (its words, the
# nodes passing it), in order.
Masks = tuple[BoolArray, list[tuple[str, BoolArray]]]
# A placement's masks kept from an earlier node table, and the rows where that table's static facts and
# this one's may differ (the masks may be wrong there).
OlderMasks = tuple[Masks, frozenset[int]]
# More placements than this kept, and the next session starts afresh (a long run meets many placements;
# each is a few masks over every node).
_MOST_KEPT = 4096
# Older masks are kept while the rows where they may be wrong are no more than this: each row asked of a
# placement is then read from them, or from the node flags (a cordon every cycle would otherwise pile up).
_MOST_STALE_ROWS = 64


class RowPredicate(ABC):
    """A static predicate (`ExtensionPoints.static_predicates`) that answers at some rows without a walk
    over every node (`at_rows`), and may know the few rows it passes for a placement (`selected_rows`)."""

    __slots__ = ()

    @abstractmethod
    def __call__(self, placement: Placement, nodes: NodeTable) -> BoolArray: ...

    @abstractmethod
    def at_rows(self, placement: Placement, nodes: NodeTable, rows: IntArray) -> BoolArray:
        """Whether each of `rows` passes: `self(placement, nodes)[rows]`."""

    def selected_rows(self, placement: Placement, nodes: NodeTable) -> IntArray | None:
        """The rows passing, in order, when found without a walk over every node (None: not so)."""
        return None


class NodeFlags(RowPredicate):
    """A static predicate that reads no placement (a cordon, readiness): the nodes passing it, for every
    pod. Said so that a node whose facts changed is known refused by it without any placement's masks
    (`Session.static_refusal_at`)."""

    __slots__ = ("mask",)

    def __init__(self, mask: BoolArray) -> None:
        self.mask = mask

    def __call__(self, placement: Placement, nodes: NodeTable) -> BoolArray:
        return self.mask

    def at_rows(self, placement: Placement, nodes: NodeTable, rows: IntArray) -> BoolArray:
        return self.mask[rows]


def passing_rows(
    predicates: Sequence[tuple[str, str, StaticPredicate]], placement: Placement, nodes: NodeTable
) -> IntArray | None:
    """The rows passing every static predicate of `placement`, in order (the full masks' `nonzero`), found
    from the rows the first predicate that knows them selects (`selected_by`), every other predicate asked
    at those rows alone; None when none selects them (then only the masks over every node say)."""
    selected = selected_by(predicates, placement, nodes)
    if selected is None:
        return None
    selecting, rows = selected
    for index, (_, _, predicate) in enumerate(predicates):
        if index == selecting or not rows.size:
            continue
        rows = rows[passing_at(predicate, placement, nodes, rows)]
    return rows


def selected_by(
    predicates: Sequence[tuple[str, str, StaticPredicate]], placement: Placement, nodes: NodeTable
) -> tuple[int, IntArray] | None:
    """The index of the first static predicate of `placement` that knows the rows it passes without a walk
    over every node (`RowPredicate.selected_rows`: a node selector), and those rows; None when none does."""
    for index, (_, _, predicate) in enumerate(predicates):
        if isinstance(predicate, RowPredicate):
            found = predicate.selected_rows(placement, nodes)
            if found is not None:
                return index, found
    return None


def passing_at(
    predicate: StaticPredicate, placement: Placement, nodes: NodeTable, rows: IntArray
) -> BoolArray:
    """Whether each of `rows` passes `predicate`: asked at those rows alone when it answers so
    (`RowPredicate.at_rows`), else its mask over every node read there."""
    if isinstance(predicate, RowPredicate):
        return predicate.at_rows(placement, nodes, rows)
    return predicate(placement, nodes)[rows]


class StaticMasks:
    """Carried from one session to the next (`JobMemos`): the masks by placement key and what they read."""

    __slots__ = ("_facts", "masks", "older", "rows")

    def __init__(self) -> None:
        self._facts: tuple[list[NodeSpecInfo], Storage, tuple[tuple[str, str], ...]] | None = None
        self.masks: dict[str, Masks] = {}
        self.rows: dict[str, IntArray | None] = {}
        # Masks of placements not asked since a few nodes' facts changed (`OlderMasks`), by placement.
        self.older: dict[str, OlderMasks] = {}

    def hand_to(self, session: Session, *, verify: bool) -> None:
        """Let `session` (its plugins opened) start from the masks kept, when they read what it would,
        and keep what it works out for the next session."""
        snapshot = session.snapshot
        facts = (
            snapshot.nodes.specs,
            snapshot.storage,
            tuple((name, rejection) for name, rejection, _ in session.points.static_predicates),
        )
        last = self._facts
        if (
            last is None
            or last[1] is not facts[1]
            or last[2] != facts[2]
            or len(self.masks) + len(self.older) > _MOST_KEPT
        ):
            self.masks, self.rows, self.older = {}, {}, {}
        elif last[0] is not facts[0]:
            self._respecified(last[0], facts[0])
        elif verify:
            _check(session, self.masks)
        self._facts = facts
        session.use_static_masks(self.masks, self.rows, self.older)

    def _respecified(self, old: list[NodeSpecInfo], specs: list[NodeSpecInfo]) -> None:
        """The nodes' facts are a new list: the masks kept become older ones, wrong at most at the rows
        whose facts are other objects (when few: else none is kept)."""
        kept, older = self.masks, self.older
        self.masks, self.rows, self.older = {}, {}, {}
        if len(old) != len(specs):
            return
        changed = frozenset(compress(range(len(specs)), map(is_not, old, specs)))  # (a walk in C)
        if len(changed) > _MOST_STALE_ROWS:
            return
        for key, (masks, stale) in older.items():
            if len(stale | changed) <= _MOST_STALE_ROWS:
                self.older[key] = (masks, stale | changed)
        for key, masks in kept.items():
            self.older[key] = (masks, changed)


def _check(session: Session, masks: dict[str, Masks]) -> None:
    from kai_scheduler.framework.job_memos import CarriedMismatch

    placements = {task.placement.key: task.placement for task in session.snapshot.tasks.values()}
    for key, (kept, kept_parts) in masks.items():
        placement = placements.get(key)
        if placement is None:
            continue  # no pod of this session has it: never asked
        fresh, parts = session.static_masks_of(placement)
        same = np.array_equal(kept, fresh) and [words for words, _ in kept_parts] == [
            words for words, _ in parts
        ]
        if not same or not all(
            np.array_equal(a, b) for (_, a), (_, b) in zip(kept_parts, parts, strict=True)
        ):
            raise CarriedMismatch(
                f"the nodes passing the static predicates of placement {key!r}, kept from the last cycle, "
                "differ from those worked out again"
            )
