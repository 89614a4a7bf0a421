"""The candidates `Session.choose_node` scores: every candidate, except that of the empty nodes of one
capacity only the first is scored, when every scorer scores such nodes alike for the pod.

Why: on a cluster that is mostly empty (a first cycle over a deep backlog) nearly every node is a
candidate for nearly every pod, so scoring every candidate made a pod's cost grow with the cluster (at
5,000 nodes, 3,800 candidates a pod on average, 170 of them holding anything).

Why the choice stays the same: two empty nodes (`NodeTable.empty`) equal in the table's capacity
columns differ in no column of the table, only in their static facts (name, labels, taints). A scorer
that reads the table's columns alone gives them one score, and one that compares the candidates with
each other (binpack's lowest and highest free, resourcetype's "are they all GPU nodes") compares the same
set of values whether one of them is among the candidates or both are. So the two tie in the sum, and a
tie goes to the lower index: the first of them stands for the rest.

A scorer says so when it registers (`add_scorer`), with the pods for which it holds; a scorer that says
nothing (registered straight into `ExtensionPoints.node_scorers`) may tell any two nodes apart, and then
every candidate is scored. So are clusters of many kinds of node (more than `_MAX_KINDS` capacities) and
pods with few candidates (`FEW_CANDIDATES`): there, finding the empty nodes costs more than it saves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import numpy as np

from kai_scheduler.framework.ranked_nodes import RanksBy, SparseOn
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray, NodeTable

if TYPE_CHECKING:
    from kai_scheduler.framework.session import ExtensionPoints, Session

# Off, every candidate is scored (the tests compare the two ways).
ENABLED = True
_MAX_KINDS: Final = 8
# Up to this many candidates are all scored: finding the empty ones costs about what scoring a few hundred
# candidates does (the tests lower it, to take the shortcut on small clusters; none is never a shortcut).
FEW_CANDIDATES = 512
# What a session reads once (`Session.scratch`): the scorers' conditions, the kinds of its nodes.
_CONDITIONS: Final = "alike-nodes-conditions"
_KINDS: Final = "alike-nodes-kinds"
# The kinds of node of the last few tables, by their capacity columns (every copy of a table shares
# them, so every cycle on unchanged nodes finds its table's here): the columns, and the nodes of each kind
# as masks (None: more than `_MAX_KINDS` kinds).
_KINDS_KEPT: Final = 4
_kinds: dict[int, tuple[tuple[object, ...], list[BoolArray] | None]] = {}


def always(task: TaskInfo) -> bool:
    return True


def add_scorer(
    points: ExtensionPoints,
    scorer: Callable[[TaskInfo, IntArray], FloatArray | float],
    alike_for: Callable[[TaskInfo], bool] = always,
    *,
    constant_for: Callable[[TaskInfo], bool] | None = None,
    ranks_by: RanksBy | None = None,
    sparse_on: SparseOn | None = None,
) -> None:
    """Register a node scorer that, for the pods `alike_for` says yes to (`always`: every pod), scores two
    empty nodes equal in `NodeTable.CAPACITY_COLUMNS` alike and compares candidates only by the set of
    their values. `constant_for` and `ranks_by` say more, for `ranked_nodes`: for the pods `constant_for`
    says yes to, the scorer gives every candidate one score whatever the candidates, and the same score to
    every pod of one request, placement constraints and nominated node while
    `NodeTable.anything_releasing` stays (`ranked_nodes` asks it once for them); for those `ranks_by`
    gives a ranking, it ranks them as `ranked_nodes.Ranking` says; for those `sparse_on` gives a value,
    it scores 0 wherever that value is not above 0, and elsewhere 0 or more reading that node alone."""
    position = len(points.node_scorers)
    points.scorers_alike[position] = alike_for
    if constant_for is not None:
        points.scorers_constant[position] = constant_for
    if ranks_by is not None:
        points.scorers_ranking[position] = ranks_by
    if sparse_on is not None:
        points.scorers_sparse[position] = sparse_on
    points.node_scorers.append(scorer)


def rows_to_score(session: Session, task: TaskInfo, candidates: BoolArray) -> IntArray:
    """The candidates to score for `task`, in index order (see the module's docstring)."""
    if not ENABLED or np.count_nonzero(candidates) <= FEW_CANDIDATES or not _scored_alike(session, task):
        return candidates.nonzero()[0]
    empty = session.snapshot.nodes.empty() & candidates
    first = int(empty.argmax())  # the first True, found without reading further
    kinds = _session_kinds(session) if empty[first] else None
    if kinds is None:
        return candidates.nonzero()[0]
    keep = np.logical_xor(candidates, empty)  # the candidates that hold something (`empty` is within)
    keep[first] = True
    if len(kinds) > 1:
        for kind in kinds:
            of_kind = empty & kind
            first = int(of_kind.argmax())
            if of_kind[first]:
                keep[first] = True
    return keep.nonzero()[0]


def _scored_alike(session: Session, task: TaskInfo) -> bool:
    """Whether every scorer scores empty nodes alike for `task`."""
    conditions = session.scratch.get(_CONDITIONS)
    if conditions is None:
        # The session's scorers are all registered before its first pod is placed: read them once, and
        # keep only the conditions that are not always true (None: a scorer that tells any nodes apart).
        points = session.points
        listed = [points.scorers_alike.get(i) for i in range(len(points.node_scorers))]
        known: list[Callable[[TaskInfo], bool]] | None = None
        if None not in listed:
            known = [c for c in listed if c is not None and c is not always]
        conditions = session.scratch[_CONDITIONS] = (known,)
    known = conditions[0]
    return known is not None and all(condition(task) for condition in known)


def _session_kinds(session: Session) -> list[BoolArray] | None:
    kinds = session.scratch.get(_KINDS)
    if kinds is None:
        kinds = session.scratch[_KINDS] = (_node_kinds(session.snapshot.nodes),)
    return kinds[0]


def _node_kinds(nodes: NodeTable) -> list[BoolArray] | None:
    """The nodes of each distinct capacity (bit for bit in every capacity column), or None when there
    are more than `_MAX_KINDS`."""
    columns = tuple(getattr(nodes, name) for name in nodes.CAPACITY_COLUMNS)
    known = _kinds.get(id(columns[0]))
    if known is not None and all(kept is column for kept, column in zip(known[0], columns, strict=True)):
        return known[1]
    stacked = np.hstack([np.asarray(column, dtype=np.float64).reshape(nodes.size, -1) for column in columns])
    count, kind_of = distinct_rows(np.ascontiguousarray(stacked).view(np.int64))
    kinds = None
    if count <= _MAX_KINDS:
        kinds = [np.asarray(kind_of == k, dtype=np.bool_) for k in range(count)]
    if len(_kinds) >= _KINDS_KEPT:
        del _kinds[next(iter(_kinds))]  # the oldest
    _kinds[id(columns[0])] = (columns, kinds)
    return kinds


def distinct_rows(rows: IntArray) -> tuple[int, IntArray]:
    """How many distinct rows `rows` (a 2-D array) holds, and each row's place among them in order (the
    first column first): `np.unique(rows, axis=0, return_inverse=True)`'s count and inverse, found by
    sorting the columns as numbers. Why: `np.unique` along an axis sorts the rows as records, comparing
    them field by field through a call each: some 35 million instructions for 2,000 nodes (1% of a first
    cycle there), against a fifth of that sorted as numbers."""
    size = len(rows)
    if size == 0 or rows.shape[1] == 0:
        return min(size, 1), np.zeros(size, dtype=np.int64)  # (no column: every row alike)
    order = np.lexsort(rows.T[::-1])  # (lexsort's last key is its first)
    ordered = rows[order]
    starts = np.ones(size, dtype=np.bool_)  # where each distinct row first stands in `ordered`
    np.any(ordered[1:] != ordered[:-1], axis=1, out=starts[1:])
    place = np.cumsum(starts) - 1
    kind_of = np.empty(size, dtype=np.int64)
    kind_of[order] = place
    return int(place[-1]) + 1, kind_of
