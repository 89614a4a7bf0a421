"""A pod's best node found without scoring every node, with the answer `Session.choose_node` gives.

Why: `choose_node` filters and scores every node for every pod, so the CPU a pod costs grows with the
cluster (a first cycle over a deep backlog places tens of thousands of pods). In the common case one
score alone tells the candidates apart: binpack's, which reads one number per node, what the node has not
allocated (`NodeTable.not_allocated`, "free" here), scaled between the candidates' lowest and highest
free; every other scorer gives all candidates one number (nothing releasing, no shared GPU asked, no
nominated node, no preferences). Then a node's score sum depends on its free value only, and the best
node is the lowest-index candidate among those whose free value scores the highest sum.

`RankedNodes` serves a run of pods alike (same request and placement: a gang's pods, jobs of one shape
one after another). From the second pod of a run it keeps the run's candidates (static predicates, the
fit of the request once releasing pods are gone, the task predicates that depend on nothing else)
grouped by free value, and brings them up to date at the nodes whose usage changed since the pod before
(the node table's log of changes; placing a pod changes one node). A choice then sums the session's
scores over the distinct free values only (a few dozen at most), in the session's scorer order with its
arithmetic, so ties and near-ties fall exactly as in the full sum. The first pod of a run goes to
`Session.choose_node`: grouping costs about one full scoring, and candidates kept for several shapes at
once cost more than they save (each is brought up to date at every node changed since its last use: on
the 5,000-node first cycle, about 600 shapes, 14 nodes a pod, slower than scoring every node).

Scorers say what they give through `declare_constant` and `declare_ranked`; a pod meeting any scorer
that has not declared itself, or one whose declaration gives no answer for it (spread, a shared GPU, a
nominated node, preferences, ...), a topology confinement, a pre-predicate failure, inter-pod rules or a
task predicate not known to depend on the request and placement alone goes to `Session.choose_node`.
`ENABLED = False` sends every pod there (the tests compare both ways).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from kai_scheduler.framework.session import NodeScorer, Placed, Session
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray, NodeTable, room_holds
from kai_scheduler.model.resources import PodRequest

# The switch the comparison tests turn off: every pod then goes through `Session.choose_node`.
ENABLED = True

# A scorer's part in a pod's score sum: one number for every candidate, or the ranked scorer's scores of
# free values.
_Part = float | Callable[[FloatArray], FloatArray | float]

# The session's scratch key of the declarations and the index.
_SCRATCH: Final = "ranked-nodes"
# Task predicates whose mask depends on the request and placement only (the same array object for the
# same pod shape) as long as the pod reads no other pods (`Session.reads_other_pods`).
_SHAPE_ONLY_PREDICATES: Final = frozenset({"gpukind", "podaffinity", "draonlynodes"})
# Candidates are built afresh rather than checked node by node once more than this share of the nodes
# (1/n) changed since they were last asked for.
_REBUILD_SHARE: Final = 6
# Answers of `RankedNodes._best` kept at most (each a few values long).
_KEPT_ANSWERS: Final = 4096
_NO_ROWS: Final = np.zeros(0, dtype=np.int64)

# The score a scorer gives every candidate of a pod, or None when it may differ between nodes.
ConstantScore = Callable[[TaskInfo], float | None]
# For a scorer ranking by free: which `not_allocated` column it reads for the pod (True: GPUs, False:
# CPU) and its scores of candidates with the given free values, which must be those it gives nodes with
# these values among candidates with the same lowest and highest (the node matters only through its free
# value); None when it does not rank the pod by free alone.
RankedScore = Callable[[TaskInfo], tuple[bool, Callable[[FloatArray], FloatArray | float]] | None]


@dataclass(frozen=True, slots=True)
class _Declaration:
    scorer: NodeScorer  # kept so that the id it is filed under stays its own
    constant: ConstantScore | None = None
    ranked: RankedScore | None = None


def declare_constant(session: Session, scorer: NodeScorer, constant: ConstantScore) -> None:
    """Say that `scorer` gives every candidate `constant(task)` when that is not None."""
    _index(session).declarations[id(scorer)] = _Declaration(scorer, constant=constant)


def declare_ranked(session: Session, scorer: NodeScorer, ranked: RankedScore) -> None:
    """Say that `scorer` ranks by free value as `ranked(task)` tells, when that is not None."""
    _index(session).declarations[id(scorer)] = _Declaration(scorer, ranked=ranked)


def choose_node(session: Session, task: TaskInfo) -> Placed | None:
    """The node `session.choose_node(task)` chooses, found through the index when the pod allows."""
    if not ENABLED:
        return session.choose_node(task)
    return _index(session).choose(session, task)


def _index(session: Session) -> RankedNodes:
    index = session.scratch.get(_SCRATCH)
    if not isinstance(index, RankedNodes):
        index = session.scratch[_SCRATCH] = RankedNodes()
    return index


class _Group:
    """The candidates of one free value: the rows found when the candidates were built (sorted, read
    from `start` on) and those that joined since (a heap); either may hold rows that have left since."""

    __slots__ = ("built", "joined", "start")

    def __init__(self, built: IntArray) -> None:
        self.built, self.start = built, 0
        self.joined: list[int] = []


class _Candidates:
    """The candidates of one request and placement, grouped by free value, as of a position in the node
    table's log of changes."""

    def __init__(
        self,
        nodes: NodeTable,
        request: PodRequest,
        gpus: bool,
        usable: BoolArray,
        masks: tuple[BoolArray, ...],
    ) -> None:
        self.nodes, self.request, self.gpus, self.masks = nodes, request, gpus, masks
        for mask in masks:
            usable = usable & mask
        self.usable = usable  # what never changes in the session: static predicates, shape predicates
        # Extended resources are compared by `node_fits` only; other requests by the room alone.
        self.by_room = not request.scalars
        self._build()

    def _build(self) -> None:
        nodes = self.nodes
        self.position = nodes.change_position()
        self.candidate = self.usable & nodes.fit(self.request, soon=True)
        self.free = nodes.not_allocated(gpus=self.gpus).copy()  # the value each node is filed under
        rows = np.flatnonzero(self.candidate)
        values = self.free.take(rows)
        # Rows by free value, then index: each value's rows come out sorted.
        order = np.lexsort((rows, values))
        rows, values = rows.take(order), values.take(order)
        starts = [0, *(np.flatnonzero(np.diff(values)) + 1).tolist()]
        self.groups: dict[float, _Group] = {}
        self.count: dict[float, int] = {}
        self._values: tuple[float, ...] | None = None
        for start, end in zip(starts, [*starts[1:], rows.size], strict=True):
            if end > start:
                value = values.item(start)
                self.groups[value] = _Group(rows[start:end])
                self.count[value] = end - start

    def catch_up(self) -> None:
        """Bring the groups up to date at the nodes whose usage changed since they were last read."""
        nodes = self.nodes
        changed = nodes.changed_since(self.position)
        distinct = set(changed) if changed is not None else None
        # A node checked again costs a microsecond or two in Python; a rebuild a fraction of one per node.
        if distinct is None or len(distinct) > nodes.size // _REBUILD_SHARE:
            self._build()
            return
        self.position = nodes.change_position()
        request, usable, gpus, by_room = self.request, self.usable, self.gpus, self.by_room
        candidate, free = self.candidate, self.free
        for node in distinct:
            was, old = candidate.item(node), free.item(node)
            value = nodes.node_not_allocated(node, gpus=gpus)
            now = usable.item(node) and (
                room_holds(nodes.node_room(node, soon=True), request)
                if by_room
                else nodes.node_fits(request, node, soon=True)
            )
            candidate[node], free[node] = now, value
            if was and (not now or value != old):
                left = self.count[old] - 1
                if left:
                    self.count[old] = left
                else:  # every row the group holds has left it
                    del self.count[old]
                    del self.groups[old]
                    self._values = None
            if now and (not was or value != old):
                self.count[value] = self.count.get(value, 0) + 1
                group = self.groups.get(value)
                if group is None:
                    group = self.groups[value] = _Group(_NO_ROWS)
                    self._values = None
                heapq.heappush(group.joined, node)

    def values(self) -> tuple[float, ...]:
        """The candidates' distinct free values, ascending."""
        if self._values is None:
            self._values = tuple(sorted(self.count))
        return self._values

    def lowest_node(self, value: float) -> int:
        """The lowest-index candidate whose free value is `value` (the group must have one)."""
        group = self.groups[value]
        candidate, free = self.candidate, self.free

        def holds(node: int) -> bool:
            return bool(candidate.item(node)) and free.item(node) == value

        built, joined = group.built, group.joined
        while group.start < built.size and not holds(built.item(group.start)):
            group.start += 1  # a row that left the group since (one that came back is in `joined`)
        while joined and not holds(joined[0]):
            heapq.heappop(joined)
        tops = [*joined[:1], *([built.item(group.start)] if group.start < built.size else [])]
        return min(tops)


class RankedNodes:
    """The session's declarations, and the candidates of the run of pods alike being placed."""

    def __init__(self) -> None:
        self.declarations: dict[int, _Declaration] = {}
        # The request and placement of the last pod asked about, and the candidates of the pods alike
        # that followed it (None until the second one).
        self._shape: tuple[PodRequest, Any] | None = None
        self._candidates: _Candidates | None = None
        self._best_values: dict[tuple[Any, ...], tuple[int, ...]] = {}

    def choose(self, session: Session, task: TaskInfo) -> Placed | None:
        shape = (task.request, task.placement.key)
        if shape != self._shape:
            # A new run (see the module's docstring): its first pod is scored in full.
            self._shape, self._candidates = shape, None
            return session.choose_node(task)
        plan = self._plan(session, task)
        masks = self._shape_masks(session, task) if plan is not None else None
        if plan is None or masks is None:
            return session.choose_node(task)
        gpus, scores = plan
        nodes = session.snapshot.nodes
        candidates = self._candidates
        if (
            candidates is None
            or candidates.nodes is not nodes
            or candidates.gpus != gpus
            or not _same(candidates.masks, masks)
        ):
            usable = session.usable_nodes([task])
            candidates = self._candidates = _Candidates(nodes, task.request, gpus, usable, masks)
        else:
            candidates.catch_up()
        if not candidates.count:
            return None
        values = candidates.values()
        node = min(candidates.lowest_node(values[i]) for i in self._best(scores, values))
        now = not nodes.anything_releasing() or nodes.node_fits(task.request, node, soon=False)
        return Placed(node, (), now)

    def _best(self, scores: list[_Part], values: tuple[float, ...]) -> tuple[int, ...]:
        """Which of the candidates' free values (ascending) score the highest sum: the same few values
        and the same constants come back pod after pod, so the answer is kept."""
        key = (*scores, values)
        best = self._best_values.get(key)
        if best is None:
            if len(self._best_values) >= _KEPT_ANSWERS:
                self._best_values.clear()
            sums = _summed(scores, np.array(values, dtype=np.float64))
            if isinstance(sums, float):  # every candidate scores the same
                best = tuple(range(len(values)))
            else:
                best = tuple(np.flatnonzero(sums == sums.max()).tolist())
            self._best_values[key] = best
        return best

    def _plan(self, session: Session, task: TaskInfo) -> tuple[bool, list[_Part]] | None:
        """The column the pod is ranked by and each scorer's part in session order (a number for all
        candidates, or the ranked scorer's function of free values); None: not for this pod."""
        request = task.request
        if request.is_shared_gpu or session.allowed is not None:
            return None
        column: bool | None = None
        scores: list[_Part] = []
        for scorer in session.points.node_scorers:
            declared = self.declarations.get(id(scorer))
            if declared is None or declared.scorer is not scorer:
                return None
            if declared.constant is not None:
                value = declared.constant(task)
                if value is None:
                    return None
                scores.append(value)
                continue
            assert declared.ranked is not None
            ranked = declared.ranked(task)
            if ranked is None or column is not None:  # one ranked scorer only: its groups are the free values
                return None
            column, function = ranked
            scores.append(function)
        if column is None:
            return None
        return column, scores

    @staticmethod
    def _shape_masks(session: Session, task: TaskInfo) -> tuple[BoolArray, ...] | None:
        """The task predicates' masks, when each depends on the pod's request and placement only."""
        if any(check(task) is not None for check in session.points.pre_predicates):
            return None
        if session.reads_other_pods(task):
            return None
        masks = []
        for predicate in session.points.task_predicates:
            if predicate.name not in _SHAPE_ONLY_PREDICATES:
                return None
            masks.append(predicate.nodes_passing(task))
        return tuple(masks)


def _same(kept: Sequence[BoolArray], masks: Sequence[BoolArray]) -> bool:
    return len(kept) == len(masks) and all(a is b for a, b in zip(kept, masks, strict=True))


def _summed(scores: list[_Part], values: FloatArray) -> FloatArray | float:
    """The session's score sum (`Session.choose_node`: in scorer order, zeros skipped, the first per-node
    score taken as it is) for candidates with these free values, one element per value: each element is
    computed as the node's own is, by the same elementwise operations."""
    total: FloatArray | float = 0.0
    for part in scores:
        score = part if isinstance(part, float) else part(values)
        if isinstance(score, float) and score == 0.0:
            continue
        total = score if isinstance(total, float) and total == 0.0 else total + score
    return total
