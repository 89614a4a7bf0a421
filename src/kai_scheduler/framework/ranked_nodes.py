"""The node `Session.choose_node` picks for a pod whose scores rank the nodes by one per-node value (binpack
without anything else that tells nodes apart), found through an index of the nodes by that value rather
than by scoring every candidate.

Why: a pod's candidates grow with the cluster. A CPU-only pod fits on nearly every node that holds
anything, so at 20,000 nodes each one scored about 3,200 partly filled candidates (empty nodes are
already scored one per capacity, `alike_nodes`), and finding any pod's candidates cost a pass over every
node for each of its masks.

When: every scorer of the session says, for the pod, either that it gives every candidate one score
whatever the candidates (`constant_for` at `alike_nodes.add_scorer`), or that it ranks them by a value
(`ranks_by`, a `Ranking`), or that it scores only a few nodes (`sparse_on`), and exactly one ranks. A
ranking scorer promises that its score at a node never increases with the node's value, is the same at
nodes of one value, and reads the candidates only through their lowest and highest value; and that a
node valued below the pod's floor cannot hold it. A sparse scorer names a per-node value (a `Ranking`'s)
and a floor, and promises a score of 0 at every node not valued above 0 or valued below the floor, and
elsewhere a score of 0 or more that reads that node alone (gpusharingorder: a shared GPU with room for a
shared-GPU pod; nodeavailability while something is being released: idle whole GPUs that hold a whole-GPU
pod, where it may fit now).
What a scorer says (`constant_for`, `ranks_by`, `sparse_on`) reads of the pod only its request, its
placement constraints and its nominated node, and of the session only whether anything is being released
(`NodeTable.anything_releasing`): it is asked once per pod shape of these in a session (`_ranking`). A
scorer constant for a pod gives each pod of that shape the same score: it is asked once too, and the sums
ask the other scorers alone (`_Summed`).

Why the choice stays the same: summed in scorer order, a node's sum never increases with its value
(the same float additions of the same numbers, and rounding is monotone), and nodes of one value tie. The
few candidates scored (R) always hold a lowest- and a highest-valued candidate, so each gets the score it
gets among all of them. R holds, value by value from the lowest up, the first candidate of each value
(the lowest index), until one scores strictly below R's best: every candidate left out is valued at
least that high and scores below the best, and each one valued as one in R ties with its first, which
has the lower index. R's best with ties to the lower index is then the best of all candidates.
Without sparse scorers, or when they may score no candidate (S empty: each scores 0 at every candidate,
and a sum with 0 added is the same: `_Summed.unscored`), each sum reads the candidate's value and R's
lowest and highest values alone: R's top (its highest-valued candidate) then counts by its value unless
it ties for the best, so the top's node is found only then; its value is the highest of the index while
a candidate of that value kept from an earlier pod's walk is still one, unchanged since
(`_Looks.witness`); and R ends at the lowest value's first candidate when the next value of the index,
a candidate's or not, sums strictly below it (scored as a candidate of R would be: whatever is valued
that high or higher sums no higher).
With sparse scorers, R holds besides every candidate they may score (S): a candidate left out is not in
S, so it gets 0 where the one it is compared with above gets 0 or more, and its sum is still no higher
(the sums' terms are each no higher, and rounding is monotone); S's own scores read S alone, and the
ranking scorer's still see the lowest and highest value.

Where it gives up (the caller then finds and scores the candidates as before, the same choice): a scorer
that says neither, none or several ranking, a session confined to some nodes (topology), a pod whose
static predicates pass fewer than half the nodes (a selector: the index would be walked past many nodes),
more than `BUDGET` nodes looked at for one pod (S's included), or, while something is being released, a
candidate among the nodes where the ranking's floor does not hold (`Ranking.below_floor`: binpack's value
is less than the whole GPUs free soon where shared GPUs are overcommitted).
"""

from __future__ import annotations

import bisect
import enum
import itertools
from collections.abc import Callable, Collection, Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import numpy as np

from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray, NodeTable
from kai_scheduler.model.resources import PodRequest

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session

# Off, every pod's candidates are found and scored (the tests compare the two ways).
ENABLED = True
# Nodes looked at for one pod before giving up (a few hundred nanoseconds to a microsecond each).
BUDGET: Final = 64
# Nodes passed over for one pod as known not to hold a pod of its shape (`_Shape.unfit`; tens of
# nanoseconds each) before giving up.
SKIP_BUDGET: Final = 16 * BUDGET
# Lowest values a ranking's own search answers at once (`Finder.best`): a pod's walk takes two or three.
FOUND_VALUES: Final = 3
# Sums kept by the candidates' values for one question (`_Summed`): a few hundred suffice for whole-GPU
# pods; CPU-only pods' values seldom repeat.
SUMS_KEPT: Final = 4096
# What a session keeps (`Session.scratch`): what is kept for the session's node table (`_Kept`), and what
# each scorer says (its ranking and constant conditions, by position), and the sums by values of every
# question whose sums read the values alone, by their terms (`SumsByTerms`).
_KEPT: Final = "ranked-nodes-kept"
_SAID: Final = "ranked-nodes-scorers"
_SUMS: Final = "ranked-nodes-sums-by-terms"


@dataclass(frozen=True, slots=True)
class Ranking:
    """A per-node value a scorer ranks by: `values` for every node, `value_of` for one (the same bits), both
    as the table stands; one index is kept per `key` and session."""

    key: Hashable
    values: Callable[[], FloatArray]
    value_of: Callable[[int], float]
    # The ranking scorer's scores of candidates valued so (in their order), in plain floats with the bits
    # of its own scores of them (a float: one score for all); None when it does not say. Why: a pod's
    # few candidates are scored from the values the index holds, without a numpy array (`_Summed`).
    scores_of_values: Callable[[list[float]], list[float] | float] | None = None
    # A sparse scorer's scores of candidates `rows` (index order), in plain floats with the bits of its own
    # scores of them (a float: one score for all); None when it does not say. Why: as `scores_of_values`,
    # for a shared-GPU pod's candidates.
    scores_at_rows: Callable[[TaskInfo, list[int]], list[float] | float] | None = None
    # `value_of` for several nodes at once (the same bits), or None. Why: a value worked out by a compiled
    # evaluation (gpufragmentation's costs) costs far less for many nodes in one call than one by one, and
    # an index read by few pods catches up on many nodes at a time.
    values_of: Callable[[list[int]], list[float]] | None = None
    # A ranking that finds the candidates' lowest and highest values itself (`Finder`), or None. Used in
    # place of the index while no scorer scores sparsely for the pod.
    finds: Finder | None = None
    # `values` at some nodes (the same bits), or None (`values` then, taken at them). Why: the candidates
    # of a pod the index gave up on are read alone (`best_of_rows`), where bringing a kept per-node array
    # up to date copies it whole.
    values_at: Callable[[IntArray], FloatArray] | None = None
    # The nodes where one valued below a pod's floor may yet hold it, as the table stands (None: at no
    # node), asked of each pod while something is being released: a pod with a candidate among them is
    # not decided here. Why: binpack's value of a node is less than its whole GPUs free soon where its
    # shared GPUs are overcommitted (`NodeTable.overcommitted`), which only pipelining onto releasing
    # capacity does, on a few nodes.
    below_floor: Callable[[], Collection[int]] | None = None

    def values_of_rows(self, rows: IntArray) -> FloatArray:
        """The values at `rows`."""
        return self.values().take(rows) if self.values_at is None else self.values_at(rows)


class Finder(Protocol):
    """A ranking's own search of the nodes (gpufragmentation's, whose values are per request: an index per
    request would be moved at every node changed since it was last read, for each of tens of requests)."""

    def best(self, request: PodRequest, allowed: BoolArray, count: int) -> tuple[list[int], int, bool] | None:
        """Among the nodes `allowed` that hold a pod of `request` soon (`NodeTable.node_fits`): the first
        node of each of the `count` lowest values below the highest, lowest first; the first node of the
        highest value (-1: no node); and whether values below the highest were left out. None: it gave up."""
        ...

    def choose(
        self, request: PodRequest, allowed: BoolArray, around: tuple[float, FloatArray]
    ) -> int | Undecided | None:
        """`_best_found`'s answer for a pod whose sums are the ranking's scores between constants (`around`:
        the constant added before them, 0.0 for none, and those added after, in order; `_Summed.around`):
        the walk (`_best_of_listed`) made with the search, asked for more values as `_best_found` asks.
        None: no node allowed holds the pod; UNDECIDED: it gave up."""
        ...


# For a pod: the ranking and the pod's floor, or None when the scorer does not rank for it.
RanksBy = Callable[[TaskInfo], tuple[Ranking, float] | None]
# For a pod: the value above 0 and at or above the floor at only whose nodes the scorer may score other
# than 0, and that floor; None when it does not say (`sparse_on`).
SparseOn = Callable[[TaskInfo], tuple[Ranking, float] | None]


class Undecided(enum.Enum):
    """The shortcut does not apply: find and score the candidates."""

    UNDECIDED = "undecided"


UNDECIDED: Final = Undecided.UNDECIDED
# Whether a node holds a request, now or soon (`NodeTable.node_fits`).
NodeFits = Callable[..., bool]
# A session's node scorer (`ExtensionPoints.node_scorers`).
ScoreOf = Callable[[TaskInfo, IntArray], FloatArray | float]
# A scorer's scores in plain floats (`Ranking.scores_of_values`, `Ranking.scores_at_rows`): of the pod, at
# the candidates `rows` (index order), valued `values` by the ranking.
PlainScore = Callable[[TaskInfo, list[int], list[float]], list[float] | float]


class _GiveUp(Exception):
    """More than `BUDGET` nodes looked at."""


def best_node(session: Session, task: TaskInfo) -> int | Undecided | None:
    """The node `choose_node` would pick for `task` by scoring every candidate (None: no candidate); or
    UNDECIDED (see the module's docstring). While choices are recorded (`recorded_choices`), one entry is
    added for the pod: how its node was chosen (`Choice`), or None when not by the walk over values."""
    if not ENABLED or session.allowed is not None:
        return UNDECIDED
    kept = _kept(session)
    choices = kept.choices
    if choices is not None:
        choices.append(None)  # (replaced by the walk's `Choice` when it decides by values)
    position = kept.catch_up()
    asked = _asked_for(session, kept, task)
    if asked is None:
        return UNDECIDED
    looks, index, floor, sparse, summed, refused, shape_masks, below_floor = asked
    if refused is None:
        refused = session.refused_everywhere(task)
    elif session.verify_carried:
        _check_refusal(session, task, refused)
    if refused:
        return None
    if not isinstance(index, _ValueIndex):  # the ranking searches the nodes itself
        return _best_found(session, index, summed, task)
    looks.begin(session.rest_masks(task, shape_masks), kept.stamps, position)
    try:
        if below_floor is not None and looks.any_of(below_floor()):
            return UNDECIDED
        scored = (
            [node for on, least in sparse for node in _scored_sparsely(on.caught_up(), least, looks)]
            if sparse
            else []
        )
        if sparse and not scored:
            summed = summed.unscored or summed  # (every sparse scorer scores 0 at each candidate)
        if choices is None:
            return _best(index.caught_up(), looks, floor, summed, task, scored)
        walked: list[tuple[int, float, float, float, tuple[int, int]]] = []
        best = _best(index.caught_up(), looks, floor, summed, task, scored, walked)
        if walked:
            choices[-1] = Choice(
                *walked[0],
                request=task.request,
                static=looks.static,
                value_of=index.ranking.value_of,
                summed=summed,
                sparse=tuple((on.ranking.value_of, least) for on, least in sparse),
                below_floor=below_floor,
                releasing=kept.nodes.anything_releasing(),
            )
        return best
    except _GiveUp:
        return UNDECIDED


def best_of_rows(session: Session, task: TaskInfo, rows: IntArray) -> int | Undecided:
    """The node of `rows` (every candidate of `task`, or those `alike_nodes` scores of them, in index order;
    one at least) that scoring them all picks, from `_best`'s few (see the module's docstring): the first
    candidate of each value from the lowest up until one sums strictly below the best, and the first of
    the highest; UNDECIDED when the scorers do not rank the pod by one value read from the index's ranking
    alone (a sparse scorer, a ranking's own search). Why: a pod whose node selector leaves too few nodes
    for the index (`_wide`) had every candidate scored by every scorer in numpy, some 30 us a pod."""
    if not ENABLED:
        return UNDECIDED
    said = _ranking(session, _shape(_kept(session), task), task)
    if said is None:
        return UNDECIDED
    ranking, _, sparse, summed = said
    if sparse or ranking.finds is not None:
        return UNDECIDED
    row_list: list[int] = rows.tolist()
    row_values: list[float] = ranking.values_of_rows(rows).tolist()
    firsts = _firsts_of_values(row_list, row_values)
    values = sorted(firsts)  # each value once, lowest first
    top, top_value = firsts[values[-1]], values[-1]
    included: list[int] = []
    while True:
        found = len(included) < len(values) - 1  # a value below the top's not taken in yet
        if found:
            included.append(firsts[values[len(included)]])
            if len(included) < 2:
                continue
        if summed.reads_values_alone():
            sums = summed.of_values((*values[: len(included)], top_value))
            assert sums is not None  # (the sums read the values alone)
            best, best_score, last_score = _best_of_sums([*included, top], sums, len(included) - 1)
        else:  # the first pod of the shape: the sums' terms are learned from scores in index order
            sorted_rows = sorted([*included, top])
            value_of = dict(zip([*included, top], [*values[: len(included)], top_value], strict=True))
            sums = summed.scores(task, sorted_rows, [value_of[row] for row in sorted_rows])
            last = sorted_rows.index(included[-1]) if included else -1
            best, best_score, last_score = _best_of_sums(sorted_rows, sums, last)
        if not found or last_score < best_score:
            return best


def _firsts_of_values(rows: list[int], values: list[float]) -> dict[float, int]:
    """Each of `values` (those of `rows`, in index order) with the first of `rows` so valued; equal values
    are one (0.0 and -0.0 too), kept as that first row holds it. (A plain loop: a pod's candidates are
    tens, where numpy's `unique` cost some 15 us whatever their count.)"""
    firsts: dict[float, int] = {}
    for row, value in zip(rows, values, strict=True):
        if value not in firsts:
            firsts[value] = row
    return firsts


# What `best_node` works with for a pod (`_asked_for`).
_Asked = (
    tuple[
        "_Looks",
        "_ValueIndex | Finder",
        float,
        list[tuple["_ValueIndex", float]],
        "_Summed",
        bool | None,
        list[BoolArray],
        Callable[[], Collection[int]] | None,
    ]
    | None
)
_NOT_KEPT: Final = object()
_NOT_LEARNED: Final = object()


class _Kept:
    """What `best_node` keeps for one node table in a session: the indexes by ranking key, what is kept
    per pod shape (`_Shape`), per question (`_asked_for`) and per placement (`_wide`), and the table's
    log of usage changes read up to `position`: each node changed since stamped with the position then
    (`stamps`), against which a shape's known nodes are checked as they are read (`_Looks`). Why: the
    pods of a backlog come in hundreds of shapes, and a shape's known nodes brought up to date over every
    change since its last pod cost some 90 set removals a pod in a first cycle at 5,000 nodes, where a
    walk reads two to four of them. (The indexes keep their own positions: each is moved at the nodes
    changed since it was last read, a node changed many times moved once, and one read by few pods is not
    moved at every change.)"""

    def __init__(self, nodes: NodeTable) -> None:
        self.nodes = nodes
        self.position = nodes.change_position()
        # Per node, the position after its last change read (0: none since this was made).
        self.stamps: list[int] = [0] * nodes.size
        self.indexes: dict[Hashable, _ValueIndex] = {}
        self.shapes: dict[Hashable, _Shape] = {}
        self.asked: dict[Hashable, _Asked] = {}
        # By placement key: whether its static predicates pass at least half the nodes (`_wide`).
        self.wide: dict[str, bool] = {}
        # While choices are recorded (`recorded_choices`): an entry per pod `best_node` is asked about.
        self.choices: list[Choice | None] | None = None

    def catch_up(self) -> int:
        """The position of the table's log, once the stamps are brought up to it."""
        nodes = self.nodes
        changed = nodes.changed_since(self.position)
        if changed is None:  # the log no longer reaches back: any node may have changed
            position = self.position = nodes.change_position()
            self.stamps = [position] * nodes.size
        elif changed:
            # (The log read up to `position` and `changed` after it: where it stands now.)
            position = self.position = self.position + len(changed)
            stamps = self.stamps
            for node in changed:
                stamps[node] = position
        return self.position


@dataclass(frozen=True, slots=True)
class Choice:
    """How the walk over values (`_best`) chose a pod's node, when the sums read the candidates' values
    alone: the node and its value, the candidates' lowest and highest values (a candidate of each among
    `witnesses`), and what tells which nodes are candidates and how they sum. Enough to tell that the same
    node is chosen once some nodes changed, the rest of the cluster as it was (`stands_despite`).

    Why: the accumulated victim search of a gang finds where its pods land at each step (`victim_search`'s
    `_Landing`), where one more victim is evicted; 40 of the 74 landings two gangs' searches found again in
    a first cycle at 5,000 nodes were the step before's, the new victim's node a candidate that loses to
    the one chosen."""

    node: int
    value: float
    lowest: float
    highest: float
    witnesses: tuple[int, int]
    request: PodRequest
    static: BoolArray
    value_of: Callable[[int], float]
    summed: _Summed
    # Each sparse scorer's value of a node and its floor: it scored no candidate (every sum read values).
    sparse: tuple[tuple[Callable[[int], float], float], ...]
    below_floor: Callable[[], Collection[int]] | None
    releasing: bool  # whether anything was being released (`NodeTable.anything_releasing`)

    def stands_despite(self, nodes: NodeTable, changed: set[int]) -> bool:
        """Whether the pod is still sent to `node`, the cluster as it was but at the nodes `changed`. Neither
        the node chosen nor a witness may be among them. A changed node that may now be a candidate (it
        passes the static predicates and holds the request soon: more than the candidates, which pass
        masks besides) must leave the lowest and highest values as they were (its value between them: the
        witnesses, unchanged, keep them) and sum no higher than the node chosen, below it when it comes
        first by index; and no sparse scorer may score it, nor may the ranking's floor fail there. Then
        every sum reads the same lowest and highest values, the unchanged candidates sum as before, and no
        changed one beats the node chosen. A node no longer a candidate takes nothing away: it was neither
        the node chosen nor needed for the lowest or highest value."""
        if nodes.anything_releasing() != self.releasing:
            return False  # the scorers may say otherwise (`_ranking`)
        if self.node in changed or not changed.isdisjoint(self.witnesses):
            return False
        static, request = self.static, self.request
        for other in changed:
            if not (static.item(other) and nodes.node_fits(request, other, soon=True)):
                continue  # not a candidate
            if self.below_floor is not None and other in self.below_floor():
                return False
            for value_of, floor in self.sparse:
                sparse_value = value_of(other)
                if sparse_value > 0.0 and sparse_value >= floor:
                    return False
            if not self._loses(other, self.value_of(other)):
                return False
        return True

    def _loses(self, other: int, other_value: float) -> bool:
        """Whether a candidate `other` valued `other_value` loses to the node chosen."""
        value = self.value
        if not self.lowest <= other_value <= self.highest:
            return False
        if other_value >= value and other > self.node:
            return True  # its sum is no higher (sums never increase with the value), and ties go to the node
        sums = self.summed.of_values((self.lowest, value, other_value, self.highest))
        if sums is None or isinstance(sums, float):
            return False  # (all alike: the first by index wins)
        return sums[2] < sums[1] or (sums[2] == sums[1] and other > self.node)


def recorded_choices(session: Session) -> _Recording:
    """A context in which every pod `best_node` is asked about adds how its node was chosen to the list it
    gives (`Choice`, or None when not by the walk over values), in the order they are asked."""
    return _Recording(_kept(session))


class _Recording:
    def __init__(self, kept: _Kept) -> None:
        self._kept = kept

    def __enter__(self) -> list[Choice | None]:
        assert self._kept.choices is None, "choices are recorded already"
        choices: list[Choice | None] = []
        self._kept.choices = choices
        return choices

    def __exit__(self, *exc: object) -> None:
        self._kept.choices = None


def _kept(session: Session) -> _Kept:
    nodes = session.snapshot.nodes
    kept: _Kept | None = session.scratch.get(_KEPT)
    if kept is None or kept.nodes is not nodes:
        kept = session.scratch[_KEPT] = _Kept(nodes)
    return kept


def _asked_for(session: Session, kept: _Kept, task: TaskInfo) -> _Asked:
    """What `best_node` works with for `task`: what asks its shape's nodes (`_Looks`, with the nodes passing
    the pod's static predicates), the index of the one ranking, the pod's floor, the sparse scorers'
    indexes and floors, the sums, whether a pre-predicate refuses the pod when that reads its shape
    alone (`Session.refusal_reads_shape`; None: asked of each pod), the masks of the per-pod predicates
    that read its shape alone (`Session.shape_rest_masks`), and while something is being released where
    the ranking's floor may not hold (`Ranking.below_floor`); None when the shortcut does not apply
    (`_ranking`, `_wide`). Kept by request, placement constraints, nominated node and whether anything is
    being released (all that `_ranking` reads; `_wide` and the static predicates read the placement
    alone) while the node table stays: one look-up a pod rather than one per question (the indexes are
    brought up to date as they are used)."""
    key = (task.request, task.placement.key, task.nominated_node, kept.nodes.anything_releasing())
    asked = kept.asked
    found = asked.get(key, _NOT_KEPT)
    if found is not _NOT_KEPT:
        return found  # type: ignore[return-value]  # (a kept answer: _Asked)
    shape = _shape(kept, task)
    ranked = _ranking(session, shape, task)
    if ranked is None or not _wide(session, kept, task):
        asked[key] = None
        return None
    ranking, floor, sparse, summed = ranked
    looks = _Looks(session.static_passing(task.placement), kept.nodes.node_fits, task.request, shape)
    answer = asked[key] = (
        looks,
        ranking.finds if ranking.finds is not None and not sparse else _index(kept, ranking),
        floor,
        [(_index(kept, on), least) for on, least in sparse],
        summed,
        session.refused_everywhere(task) if session.refusal_reads_shape() else None,
        session.shape_rest_masks(task),
        ranking.below_floor if key[3] else None,  # (asked while something is being released)
    )
    return answer


def _check_refusal(session: Session, task: TaskInfo, kept: bool) -> None:
    """With `verify_carried`: a refusal kept for the pod's shape compared with the pod's own
    (`CarriedMismatch` when they differ)."""
    if session.refused_everywhere(task) != kept:
        from kai_scheduler.framework.job_memos import CarriedMismatch

        raise CarriedMismatch(
            f"whether a pre-predicate refuses pod {task.key}, kept for its request and placement, differs "
            "from its own answer"
        )


def _best_found(session: Session, finder: Finder, summed: _Summed, task: TaskInfo) -> int | Undecided | None:
    """`_best` over the nodes a ranking's own search answers (`Finder`), among those passing the rest of
    `Session.candidate_tests` (the pod's static predicates and its other masks, `Session.rest_masks`); asked
    again for more values while the walk needs values it left out (`FOUND_VALUES`, then four times as
    many, up to `BUDGET`)."""
    rest = session.rest_masks(task)
    static = session.static_passing(task.placement)
    allowed = np.logical_and.reduce([static, *rest]) if rest else static
    around = summed.around()
    if around is not None:  # the sums are the ranking's scores and constants: the finder walks too
        return finder.choose(task.request, allowed, around)
    count = FOUND_VALUES
    while count <= BUDGET:
        found = finder.best(task.request, allowed, count)
        if found is None:
            return UNDECIDED
        firsts, top, more = found
        if top < 0:
            return None
        best = _best_of_listed(firsts, top, more, summed, task)
        if not isinstance(best, Undecided):
            return best
        count *= 4
    return UNDECIDED


def _best_of_listed(
    firsts: list[int], top: int, more: bool, summed: _Summed, task: TaskInfo
) -> int | Undecided:
    """`_best`'s walk over the first candidates of the lowest values (`firsts`, lowest first; `more`: values
    below `top`'s were left out) and the first candidate of the highest (`top`)."""
    included: list[int] = []
    at = 0
    while True:
        found = firsts[at] if at < len(firsts) else -1
        at += 1
        if found >= 0:
            included.append(found)
            if len(included) < 2:
                continue
        elif more:
            return UNDECIDED  # the walk needs values the search left out
        rows = sorted({*included, top})
        sums = summed.scores(task, rows, [])
        best, best_score, last_score = _best_of_sums(rows, sums, rows.index(included[-1]) if included else -1)
        if found < 0 or last_score < best_score:
            return best


def _scored_sparsely(index: _ValueIndex, floor: float, looks: _Looks) -> list[int]:
    """The candidates valued above 0 and at or above `floor` by `index` (those a sparse scorer may
    score); given up at once when more than `BUDGET` nodes are so valued. Why: nearly all of them are
    candidates, so the walk would look at `BUDGET` of them and give up (a one-GPU pod pipelined on a half
    full cluster, whose nodes with an idle GPU nodeavailability may score)."""
    values, members = index.values, index.members
    start = max(bisect.bisect_right(values, 0.0), bisect.bisect_left(values, floor))
    valued = 0
    for at in range(start, len(values)):
        valued += members[values[at]].size
    if valued > BUDGET:
        raise _GiveUp
    found: list[int] = []
    for at in range(start, len(values)):
        found += looks.every(members[values[at]])
    return found


# What the walk over values found (`_best`): the node, its value, the candidates' lowest and highest values,
# and a candidate of each of those two (see `Choice`).
_Walked = tuple[int, float, float, float, tuple[int, int]]


def _best(
    index: _ValueIndex,
    looks: _Looks,
    floor: float,
    summed: _Summed,
    task: TaskInfo,
    scored: list[int],
    walked: list[_Walked] | None = None,
) -> int | None:
    """The best candidate: see the module's docstring (`scored`: S, the candidates sparse scorers score).
    With `walked`, what the walk found is added to it when its sums read the candidates' values alone."""
    values, members = index.values, index.members
    start = bisect.bisect_left(values, floor)
    by_values = summed.reads_values_alone()
    top_at, top = -1, -1
    if by_values and start < len(values) and looks.witnessed(index.value_at, values[-1]):
        top_at = len(values) - 1  # the top's value is known: its first candidate is asked only if needed
    else:
        for at in range(len(values) - 1, start - 1, -1):
            top = looks.first(members[values[at]])
            if top >= 0:
                top_at = at
                break
        if top_at < 0:
            return None  # every node valued at or above the floor was looked at: none is a candidate
        if top_at == len(values) - 1:
            looks.witness(members[values[top_at]], top)
    included: list[int] = []
    included_values: list[float] = []
    at = start - 1
    while True:
        found = -1
        while found < 0 and at + 1 < top_at:
            at += 1
            found = looks.first(members[values[at]])
        if found >= 0:
            included.append(found)
            included_values.append(values[at])
            if len(included) < 2:
                # (The next value may be the top's: then the top sums strictly below, and needs no node.)
                if by_values and _next_below(summed, values[at], values[at + 1], values[top_at]):
                    if walked is not None:
                        top_node = top if top >= 0 else looks.witness_node
                        walked.append((found, values[at], values[at], values[top_at], (found, top_node)))
                    return found
                continue  # the lowest value's first candidate is the best so far: take the next value too
        # R in value order (the values taken in, then the top's) when the sums read the values alone;
        # else in index order.
        sums = summed.of_values((*included_values, values[top_at])) if by_values else None
        if sums is not None:
            if top < 0 and (isinstance(sums, float) or _ties_for_best(sums)):
                top = looks.first(members[values[top_at]])  # the top ties for the best: its node counts
            rows = [*included, top]
            last = len(included) - 1
        else:
            rows = sorted({*included, top, *scored})
            value_at = index.value_at
            sums = summed.scores(task, rows, [value_at[row] for row in rows])
            last = rows.index(included[-1]) if included else -1
        best, best_score, last_score = _best_of_sums(rows, sums, last)
        # Done when the last value taken in scores below the best (so do all above it), or every value
        # with a candidate is in.
        if found < 0 or last_score < best_score:
            if walked is not None and by_values:
                walked.append(_walked(best, included, included_values, top, values[top_at], looks))
            return best


def _walked(
    best: int, included: list[int], included_values: list[float], top: int, top_value: float, looks: _Looks
) -> _Walked:
    """What a walk whose sums read the values alone found (`_best`): R is `included` (the first candidate of
    each value taken in, lowest first) and the top (its first candidate `top`, or -1 when its value was
    known from a witness, `_Looks.witness_node`, and it did not tie for the best: then it is not `best`)."""
    top_node = top if top >= 0 else looks.witness_node
    value = top_value if best == top else included_values[included.index(best)]
    lowest, lowest_node = (included_values[0], included[0]) if included else (top_value, top_node)
    return best, value, lowest, top_value, (lowest_node, top_node)


def _best_of_sums(rows: list[int], sums: list[float] | float, last: int) -> tuple[int, float, float]:
    """Of R's `rows` summed `sums` (one float: all alike): the best (ties to the lowest index, as numpy's
    argmax in index order), its sum, and the sum of the row at `last` (the last value taken in; -1:
    none, the best's). (Plain loops over R's two to four rows: a call of the builtin max or min costs
    more than the loop, and this is asked several times a pod.)"""
    if isinstance(sums, float):
        best = rows[0]
        for row in rows:
            if row < best:
                best = row
        return best, sums, sums
    best, best_score = rows[0], sums[0]
    for row, score in zip(rows, sums, strict=True):
        if score > best_score:  # (the first of equal sums kept, as max keeps it)
            best, best_score = row, score
        elif score == best_score and row < best:
            best = row
    return best, best_score, sums[last] if last >= 0 else best_score


def _ties_for_best(sums: list[float]) -> bool:
    """Whether the last of `sums` is the highest (`max(sums)`, without the builtin's call)."""
    last = sums[-1]
    for score in sums:  # noqa: SIM110 - a loop: the builtin and a generator cost more
        if score > last:
            return False
    return True


def _next_below(summed: _Summed, lowest: float, following: float, top: float) -> bool:
    """Whether the value `following` the lowest candidate's in the index (a candidate's or not) sums
    strictly below it, the top's value the highest (see the module's docstring)."""
    sums = summed.of_values((lowest, following, top))
    return isinstance(sums, list) and sums[1] < sums[0]


class _Looks:
    """Asks nodes whether they are candidates (`Session.candidate_tests`'s two parts: the first inlined,
    the second's masks worked out at once, `Session.rest_masks`), `BUDGET` at most, passing over those known
    not to hold the pod's shape (`SKIP_BUDGET` at most), noting those found not to and those found to
    (`_Shape.unfit`, `_Shape.holding`: the first part is not asked of them again while they stay).
    One is kept per question (`_asked_for`: the pods of one request) and made ready for each pod's walk
    (`begin`): a pod's walk is a few microseconds, and making one cost a good part of that."""

    __slots__ = (
        "_fits",
        "_holding",
        "_left",
        "_position",
        "_request",
        "_rest",
        "_skips_left",
        "_stamps",
        "_static",
        "_unfit",
        "_witness",
    )

    def __init__(self, static: BoolArray, fits: NodeFits, request: PodRequest, shape: _Shape) -> None:
        self._static = static
        self._fits = fits
        self._request = request
        self._unfit = shape.unfit
        self._holding = shape.holding
        self._rest: list[BoolArray] = []
        self._stamps: list[int] = []
        self._position = 0
        self._left = BUDGET
        self._skips_left = SKIP_BUDGET
        self._witness = -1

    def begin(self, rest: list[BoolArray], stamps: list[int], position: int) -> None:
        """Ready for a pod's walk: the masks it must pass besides (`Session.rest_masks`), the table's log
        read up to `position` (`_Kept`), and the budgets in full."""
        self._rest = rest
        self._stamps = stamps
        self._position = position
        self._left = BUDGET
        self._skips_left = SKIP_BUDGET

    def _passes(self, node: int) -> bool:
        """Whether a node not known unfit is a candidate (noted unfit when it does not hold the shape)."""
        self._left -= 1
        if self._left < 0:
            raise _GiveUp
        found = self._holding.get(node)
        if found is None or self._stamps[node] > found:
            if not (
                (found is not None or self._static.item(node)) and self._fits(self._request, node, soon=True)
            ):
                self._unfit[node] = self._position
                return False
            self._holding[node] = self._position
        return not self._rest or all(mask.item(node) for mask in self._rest)

    # The nodes known unfit, most of a long walk's, are passed over by `first` and `every` themselves,
    # without a call each. A node is known so while it has not changed since it was found so: its stamp
    # (the position of the log once its last change was read) is no later than the position then. A node
    # once found to hold the shape, changed since, is asked again whether it holds the request alone: the
    # static predicates read no usage, and it passed them (most of a walk's nodes asked are such: the
    # last pod of the shape took the first of them).

    def first(self, members: _Members) -> int:
        """The lowest-indexed candidate of `members`, or -1. (`_passes` written out: most pods' walks end
        at the first node asked, three or four walks a pod.)"""
        unfit, holding, stamps, position, static, fits, request, rest = (
            self._unfit,
            self._holding,
            self._stamps,
            self._position,
            self._static,
            self._fits,
            self._request,
            self._rest,
        )
        chunks = members.chunks
        for chunk in members.order:
            for node in chunks[chunk]:
                found = unfit.get(node)
                if found is not None and stamps[node] <= found:
                    self._skips_left -= 1
                    if self._skips_left < 0:
                        raise _GiveUp
                    continue
                self._left -= 1
                if self._left < 0:
                    raise _GiveUp
                found = holding.get(node)
                if found is None or stamps[node] > found:
                    if not ((found is not None or static.item(node)) and fits(request, node, soon=True)):
                        unfit[node] = position
                        continue
                    holding[node] = position
                if not rest or all(mask.item(node) for mask in rest):
                    return node
        return -1

    def witness(self, members: _Members, top: int) -> None:
        """Keep a candidate of the highest value, `members` (whose first candidate is `top`), to tell later
        walks that value has one (`witnessed`): its last node when that holds the shape, else `top`.
        Why the last: binpack sends a pod to the first of the emptiest nodes, so the first candidate of
        the highest value changes every few pods, and its last stays; each pod's walk asked its first
        anew (a fit worked out for most pods)."""
        last = members.chunks[members.order[-1]][-1]
        found = self._holding.get(last)
        if found is None or self._stamps[last] > found:
            if last in self._unfit and self._stamps[last] <= self._unfit[last]:
                found = None
            elif (found is not None or self._static.item(last)) and self._fits(
                self._request, last, soon=True
            ):
                found = self._holding[last] = self._position
            else:
                self._unfit[last] = self._position
                found = None
        self._witness = top if found is None else last

    @property
    def witness_node(self) -> int:
        """The candidate of the highest value kept by `witness` (-1: none)."""
        return self._witness

    @property
    def static(self) -> BoolArray:
        """The nodes passing the pod's static predicates."""
        return self._static

    def witnessed(self, value_at: list[float], top_value: float) -> bool:
        """Whether the kept candidate of the highest value (`witness`) is still one, and still of that
        value, `top_value` (unchanged since found to hold the shape, and passing this pod's masks): then
        the top's value is known without its first candidate, which counts only when it ties for the
        best (see the module's docstring)."""
        node = self._witness
        if node < 0 or value_at[node] != top_value:
            return False
        found = self._holding.get(node)
        if found is None or self._stamps[node] > found:
            return False
        return not self._rest or all(mask.item(node) for mask in self._rest)

    def any_of(self, nodes: Collection[int]) -> bool:
        """Whether any of `nodes` is a candidate."""
        for node in nodes:  # noqa: SIM110 - a loop: the builtin and a generator cost more
            if self._passes(node):
                return True
        return False

    def every(self, members: _Members) -> list[int]:
        """The candidates of `members`, in index order."""
        unfit, stamps = self._unfit, self._stamps
        found = []
        chunks = members.chunks
        for chunk in members.order:
            for node in chunks[chunk]:
                at = unfit.get(node)
                if at is not None and stamps[node] <= at:
                    self._skips_left -= 1
                    if self._skips_left < 0:
                        raise _GiveUp
                elif self._passes(node):
                    found.append(node)
        return found


# Sums by the candidates' values (`_Summed.of_values`).
_SumsByValues = dict[tuple[float, ...], list[float] | float]
# The sums by values of a session's questions, by the terms they add (`_Summed._value_terms`: constants and
# the ranking's scores of values). Why: a backlog's pods come in hundreds of shapes whose sums add the same
# terms (binpack's scores and the same constants), and each shape's first pods worked out anew the sums of
# values another shape had kept (0.45 a pod at 500 nodes). Exact: those terms read the values alone, the
# same callable and equal floats (a constant is never 0.0, `_learn`, so equal ones have the same bits).
SumsByTerms = dict[tuple[object, ...], _SumsByValues]


class _Summed:
    """The summed scores of a pod shape's candidates (`Session._scores`'s sums, the same bits), asking only
    the scorers that are not constant for it: each constant scorer's one score is kept from the first sum
    (`constant_for` at `alike_nodes.add_scorer` promises the same score for every pod of one request,
    placement constraints and nominated node while `NodeTable.anything_releasing` stays, the key this is
    kept by). Why: five of a pod's six scorers are constant for it, and calling each was most of a pod's
    sum. When every scorer left scores in plain floats (`PlainScore`, by position), the sums are worked
    out so: the same IEEE additions in the same order as numpy's elementwise ones, without an array for
    two or three candidates a pod."""

    def __init__(
        self,
        scorers: list[ScoreOf],
        constant: frozenset[int],
        plain: dict[int, PlainScore] | None,
        by_values: Callable[[list[float]], list[float] | float] | None,
        unscored: _Summed | None = None,
        shared: SumsByTerms | None = None,
    ) -> None:
        self._scorers = scorers
        # With sparse scorers: the same sums where they score no candidate, each sparse scorer taken as one
        # score, 0 (`sparse_on` promises 0 at every node not valued above 0 and at or above the floor), so
        # that they read the candidates' values alone as without sparse scorers. Why: while pods are being
        # released after allocate has filled a deep backlog's cluster, no node holds a whole-GPU pod now,
        # and asking nodeavailability whether the pod fits now at each of R's rows was a fifth of a pod's
        # choice. Exact: a sum with a 0 added is the same float (x + 0.0 is x for every x but -0.0, which
        # becomes 0.0; and sums that differ only in the sign of a zero stay equal through the additions
        # after, and compare alike: -0.0 == 0.0, neither is greater), so R's best is the same row.
        self.unscored = unscored
        self._constant = constant
        self._plain = plain
        # The ranking scorer's scores of values (`Ranking.scores_of_values`) when no other scorer reads the
        # candidates (no sparse scorer): the sums then read the candidates' values alone (`of_values`).
        self._by_values = by_values
        # The sums by the candidates' values (`of_values`). Why: a whole-GPU pod's candidates are valued in
        # a few counts of free GPUs, and its shape's pods ask the sums of the same few values over and over.
        # Once learned, shared with the session's other questions that add the same terms (`shared`).
        self._sums_by_values: _SumsByValues = {}
        self._shared = shared
        # Once learned: the terms in scorer order, a constant's score or a scorer to ask; the constants
        # before the first scorer asked folded into one (0.0 + a + b, as `Session._scores` adds them).
        self._terms: list[float | ScoreOf] | None = None
        # The same terms with each scorer's plain scores (None: not learned, or not every scorer has them).
        self._plain_terms: list[float | PlainScore] | None = None
        # The same terms with the ranking scorer's scores of values (None: not learned, or not `by_values`).
        self._value_terms: list[float | Callable[[list[float]], list[float] | float]] | None = None
        # `around`, once learned.
        self._around: tuple[float, FloatArray] | object | None = _NOT_LEARNED

    def around(self) -> tuple[float, FloatArray] | None:
        """When the one scorer asked is the ranking (no sparse scorer), the constants around its scores as
        the sums add them: the one added before (0.0: none; the constants before the first scorer asked are
        folded into one) and those added after, in order; None otherwise or until learned. Kept: each pod
        of the shape asks it."""
        if self._around is _NOT_LEARNED:
            terms = self._plain_terms
            if terms is None:
                return None
            self._around = None
            asked = [at for at, term in enumerate(terms) if not isinstance(term, float)]
            if len(asked) == 1 and self._plain is not None and len(self._plain) == 1:
                before = [term for term in terms[: asked[0]] if isinstance(term, float)]
                after = [term for term in terms[asked[0] + 1 :] if isinstance(term, float)]
                if len(before) <= 1:
                    self._around = (before[0] if before else 0.0, np.array(after, dtype=np.float64))
        return self._around  # type: ignore[return-value]  # (learned: the pair or None)

    def reads_values_alone(self) -> bool:
        """Whether the sums are worked out from the candidates' values alone (`of_values`)."""
        return self._value_terms is not None

    def of_values(self, values: tuple[float, ...]) -> list[float] | float | None:
        """The sums at candidates valued `values`, in that order: any order, since each term then reads
        the values alone, a ranking's score of a candidate its own value and the lowest and highest (see
        `Ranking`); None when the sums read more (a sparse scorer), or are not learned in plain floats.
        Why: the walk takes R in value order, the values known; sorting R by index and reading its values
        were a sixth of a pod's walk."""
        terms = self._value_terms
        if terms is None:
            return None
        kept = self._sums_by_values
        found = kept.get(values)
        if found is not None:
            return found
        as_list = list(values)
        summed: list[float] | float = 0.0
        for term in terms:
            summed = _add_plain(summed, term if isinstance(term, float) else term(as_list))
        if len(kept) < SUMS_KEPT:
            kept[values] = summed
        return summed

    def scores(self, task: TaskInfo, rows: list[int], values: list[float]) -> list[float] | float:
        """The sums at `rows` (index order), valued `values` by the ranking."""
        terms = self._plain_terms
        if terms is None:
            sums = self._array_scores(task, np.array(rows, dtype=np.int64))
            return sums if isinstance(sums, float) else sums.tolist()
        summed: list[float] | float = 0.0
        for term in terms:
            summed = _add_plain(summed, term if isinstance(term, float) else term(task, rows, values))
        return summed

    def _array_scores(self, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        terms = self._terms
        if terms is None:
            return self._learn(task, rows)
        summed: FloatArray | float = 0.0
        for term in terms:
            summed = add_score(summed, term if isinstance(term, float) else term(task, rows))
        return summed

    def _learn(self, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        """The sum, asking every scorer, and the terms of later sums from it: a constant scorer's score is
        one float (an array's first item, all alike); adding a float to each item is adding that item."""
        summed: FloatArray | float = 0.0
        terms: list[float | ScoreOf] = []
        plain_terms: list[float | PlainScore] = []
        value_terms: list[float | Callable[[list[float]], list[float] | float]] = []
        for position, scorer in enumerate(self._scorers):
            score = scorer(task, rows)
            if position in self._constant:
                constant = float(score) if isinstance(score, float) else float(score.item(0))
                if constant == 0.0:
                    pass  # adds nothing
                elif len(terms) == 1 and isinstance(terms[0], float):  # only constants so far
                    terms[0] = constant if terms[0] == 0.0 else terms[0] + constant
                    plain_terms[0] = value_terms[0] = terms[0]
                else:
                    terms.append(constant)
                    plain_terms.append(constant)
                    value_terms.append(constant)
            else:
                terms.append(scorer)
                if self._plain is not None:
                    plain_terms.append(self._plain[position])
                if self._by_values is not None:  # (then this is the ranking scorer: the one not constant)
                    value_terms.append(self._by_values)
            summed = add_score(summed, score)
        self._terms = terms
        self._plain_terms = None if self._plain is None else plain_terms
        self._value_terms = None if self._by_values is None or self._plain is None else value_terms
        if self._value_terms is not None and self._shared is not None:
            self._sums_by_values = self._shared.setdefault(tuple(value_terms), self._sums_by_values)
        return summed


def _add_plain(summed: list[float] | float, score: list[float] | float) -> list[float] | float:
    """`add_score` on plain floats, a list standing for an array (added elementwise as numpy adds)."""
    if isinstance(score, float):
        if score == 0.0:
            return summed
        return summed + score if isinstance(summed, float) else [item + score for item in summed]
    if isinstance(summed, float):
        return score if summed == 0.0 else [summed + item for item in score]
    return [left + right for left, right in zip(summed, score, strict=True)]


def add_score(summed: FloatArray | float, score: FloatArray | float) -> FloatArray | float:
    """`summed` with one more scorer's `score` added, as `Session._scores` sums them: scores common to every
    candidate stay a plain float until the first per-node score (0.0 + a + b is the same sum, elementwise),
    adding 0.0 changes nothing, and the first score needs no sum (0.0 + s is s: the scorer's own array).
    One rule for every sum, since the ranked index's choice is the full scoring's only while the bits are."""
    if isinstance(score, float) and score == 0.0:
        return summed
    return score if isinstance(summed, float) and summed == 0.0 else summed + score


_Said = tuple[Ranking, float, list[tuple[Ranking, float]], _Summed] | None


class _Shape:
    """What `best_node` keeps for one pod shape (request and placement constraints) in a session: the
    nodes known not to pass its static predicates or not to hold its request soon (the first part of
    `Session.candidate_tests`, which reads only the shape and what of a node changes with its usage), and
    those known to pass and hold it, each with the position of the table's log when it was found so
    (`_Kept.catch_up`: known so while the node has not changed since); and what the scorers say for it by
    nominated node and whether anything is being released. Why the known nodes: nodes that hold little of
    one resource (a full CPU beside free GPUs, a shared GPU with room on a node out of CPU) stay in the
    range the index walks for a shape, more of them the larger the cluster, and each pod of the shape
    asked them again; and each pod of a shape asks again the candidates the last one found (the
    emptiest, the next fullest), which only the node it took has changed."""

    def __init__(self) -> None:
        self.unfit: dict[int, int] = {}
        self.holding: dict[int, int] = {}
        self.said: dict[tuple[int, bool], _Said] = {}


def _shape(kept: _Kept, task: TaskInfo) -> _Shape:
    key = (task.request, task.placement.key)
    shape = kept.shapes.get(key)
    if shape is None:
        shape = kept.shapes[key] = _Shape()
    return shape


def _ranking(session: Session, shape: _Shape, task: TaskInfo) -> _Said:
    """The one ranking of the session's scorers for `task` and the pod's floor, when every other scorer
    gives one score or scores sparsely (those values, in scorer order); kept per pod shape (see the
    module's docstring: what the scorers' answers may read)."""
    key = (task.nominated_node, session.snapshot.nodes.anything_releasing())
    if key in shape.said:
        return shape.said[key]
    said = session.scratch.get(_SAID)
    if said is None:
        # The session's scorers are all registered before its first pod is placed: read them once.
        points = session.points
        said = session.scratch[_SAID] = [
            (
                points.scorers_ranking.get(position),
                points.scorers_constant.get(position),
                points.scorers_sparse.get(position),
            )
            for position in range(len(points.node_scorers))
        ]
    shared: SumsByTerms | None = session.scratch.get(_SUMS)
    if shared is None:
        shared = session.scratch[_SUMS] = {}
    answer = shape.said[key] = _asked(said, session.points.node_scorers, task, shared)
    return answer


def _asked(
    said: list[tuple[RanksBy | None, Callable[[TaskInfo], bool] | None, SparseOn | None]],
    scorers: list[ScoreOf],
    task: TaskInfo,
    shared: SumsByTerms | None = None,
) -> _Said:
    """`_ranking` asked of every scorer (`shared`: the session's sums by values, `SumsByTerms`)."""
    found = None
    sparse: list[tuple[Ranking, float]] = []
    sparse_at: set[int] = set()
    constant_at = set()
    plain: dict[int, PlainScore] | None = {}
    ranking_plain: dict[int, PlainScore] | None = {}
    for position, (ranks, constant, sparse_on) in enumerate(said):
        ranked = None if ranks is None else ranks(task)
        if ranked is not None:
            if found is not None:
                return None
            found = ranked
            # (A ranking that searches itself answers nodes, not values: its plain scores read the rows.)
            ranking = ranked[0]
            score = (
                _by_values(ranking.scores_of_values)
                if ranking.finds is None
                else _at_rows(ranking.scores_at_rows)
            )
            plain = _plain_at(plain, position, score)
            ranking_plain = _plain_at(ranking_plain, position, score)
        elif constant is not None and constant(task):
            constant_at.add(position)
        else:
            on = None if sparse_on is None else sparse_on(task)
            if on is None:
                return None
            sparse.append(on)
            sparse_at.add(position)
            plain = _plain_at(plain, position, _at_rows(on[0].scores_at_rows))
    if found is None:
        return None
    # (The sums read the candidates' values alone with no sparse scorer, unless the ranking searches
    # the nodes itself: its plain scores read the rows.)
    ranking = found[0]
    own_values = None if ranking.finds is not None else ranking.scores_of_values
    unscored = (
        _Summed(scorers, frozenset(constant_at | sparse_at), ranking_plain, own_values, shared=shared)
        if sparse
        else None
    )
    by_values = None if sparse else own_values
    return (*found, sparse, _Summed(scorers, frozenset(constant_at), plain, by_values, unscored, shared))


def _plain_at(
    plain: dict[int, PlainScore] | None, position: int, score: PlainScore | None
) -> dict[int, PlainScore] | None:
    """`plain` with the scorer at `position`'s plain scores; None once a scorer has none (the sums are
    then numpy's)."""
    if plain is None or score is None:
        return None
    plain[position] = score
    return plain


def _by_values(scores_of_values: Callable[[list[float]], list[float] | float] | None) -> PlainScore | None:
    if scores_of_values is None:
        return None
    return lambda task, rows, values: scores_of_values(values)


def _at_rows(
    scores_at_rows: Callable[[TaskInfo, list[int]], list[float] | float] | None,
) -> PlainScore | None:
    if scores_at_rows is None:
        return None
    return lambda task, rows, values: scores_at_rows(task, rows)


def _wide(session: Session, kept: _Kept, task: TaskInfo) -> bool:
    """Whether the pod's static predicates pass at least half the nodes; kept by placement. Why not by
    shape: pods with a node selector come in many shapes of few placements (a request and a rack), nearly
    every one new, and each shape asked the count anew."""
    placement = task.placement
    wide = kept.wide.get(placement.key)
    if wide is None:
        wide = kept.wide[placement.key] = (
            2 * session.static_passing_count(placement) >= session.snapshot.nodes.size
        )
    return wide


def _index(kept: _Kept, ranking: Ranking) -> _ValueIndex:
    index = kept.indexes.get(ranking.key)
    if index is None:
        index = kept.indexes[ranking.key] = _ValueIndex(kept.nodes, ranking)
    return index


def _runs(values: FloatArray) -> Iterator[tuple[list[int], bool]]:
    """The nodes in order of their `values` (stable: each value's nodes in index order), cut where the value
    or the chunk of `_Members` changes: each run, and whether it starts a value. Equal values are one value
    (0.0 and -0.0 too, as keys of a dict)."""
    order = np.argsort(values, kind="stable")
    ordered = values.take(order)
    starts_value = np.ones(order.size, dtype=np.bool_)
    np.not_equal(ordered[1:], ordered[:-1], out=starts_value[1:])
    chunks = order >> _CHUNK_BITS
    starts = starts_value.copy()
    starts[1:] |= chunks[1:] != chunks[:-1]
    at = np.flatnonzero(starts)
    nodes: list[int] = order.tolist()
    bounds: list[int] = [*at.tolist(), order.size]
    for (start, end), first in zip(itertools.pairwise(bounds), starts_value.take(at).tolist(), strict=True):
        yield nodes[start:end], first


class _ValueIndex:
    """Every node of a table by its value: each node's value (`value_at`), the distinct values in order,
    and each value's nodes (`_Members`); brought up to date from the table's log of usage changes."""

    def __init__(self, nodes: NodeTable, ranking: Ranking) -> None:
        self.nodes = nodes
        self._ranking = ranking
        self._rebuild()

    @property
    def ranking(self) -> Ranking:
        return self._ranking

    def _rebuild(self) -> None:
        """Every node read afresh, taken in runs of one value and one chunk of `_Members` (`_runs`). Why: a
        session's first pod built each index node by node, where an empty cluster's nodes share one value
        (some eighty runs at 5,000 nodes)."""
        self._position = self.nodes.change_position()
        values = self._ranking.values()
        self.value_at: list[float] = values.tolist()
        self.members: dict[float, _Members] = {}
        self.values: list[float] = []
        held = _Members()
        for run, starts_value in _runs(values):
            if starts_value:
                value = self.value_at[run[0]]  # (as its lowest-indexed node holds it)
                held = self.members[value] = _Members()
                self.values.append(value)
            held.extend(run)

    def caught_up(self) -> _ValueIndex:
        """Itself, brought up to date."""
        changed = self.nodes.changed_since(self._position)
        if changed is None:
            self._rebuild()
            return self
        if not changed:
            return self
        self._position += len(changed)  # (where the log stands now: see `_Kept.catch_up`)
        value_at = self.value_at
        values_of = self._ranking.values_of
        if values_of is not None:
            nodes = list(set(changed))
            for node, new in zip(nodes, values_of(nodes), strict=True):
                if new != value_at[node]:
                    self._move(node, value_at[node], new)
                    value_at[node] = new
            return self
        value_of = self._ranking.value_of
        # (Most catch-ups follow one pod placed: one node, or the same node twice.)
        for node in changed if len(changed) == 1 else set(changed):
            old, new = value_at[node], value_of(node)
            if new != old:
                value_at[node] = new
                self._move(node, old, new)
        return self

    def _move(self, node: int, old: float, new: float) -> None:
        left = self.members[old]
        if left.size == 1 and new not in self.members:
            self._revalue(left, old, new)
            return
        left.remove(node)
        if not left.size:
            del self.members[old]
            del self.values[bisect.bisect_left(self.values, old)]
        joined = self.members.get(new)
        if joined is None:
            joined = self.members[new] = _Members()
            bisect.insort(self.values, new)
        joined.add(node)

    def _revalue(self, alone: _Members, old: float, new: float) -> None:
        """The one node valued `old` (`alone`) moved to `new`, a value no node has: its members kept under
        the new value, in `values` at the old one's place when no value lies between the two. Why: binpack
        fills the fullest node that holds a pod, most often the only node of its value, so most moves
        (18,000 of 28,500 in a first cycle at 5,000 nodes) take a node alone from one value to another,
        and emptying one value's members to make another's cost a good part of the index's upkeep."""
        members, values = self.members, self.values
        del members[old]
        members[new] = alone
        at = bisect.bisect_left(values, old)
        if (at == 0 or values[at - 1] < new) and (at + 1 == len(values) or new < values[at + 1]):
            values[at] = new
        else:
            del values[at]
            bisect.insort(values, new)


# Nodes a chunk of `_Members` holds at most (consecutive indices).
_CHUNK_BITS: Final = 6


class _Members:
    """The nodes of one value in index order, in chunks of consecutive indices (`_CHUNK_BITS`): `order`,
    the chunks that hold any, ascending, and `chunks`, each one's nodes, ascending. Why: most nodes of a
    filling cluster share a few counts of free GPUs, so one value holds thousands of nodes at 20,000
    nodes, and a node moved into or out of the middle of one list of them cost that list's length (a
    move a pod placed, 1.4 us more at 20,000 nodes than at 1,000); a chunk is short however many share
    the value."""

    __slots__ = ("chunks", "order", "size")

    def __init__(self) -> None:
        self.chunks: dict[int, list[int]] = {}
        self.order: list[int] = []
        self.size = 0

    def extend(self, run: list[int]) -> None:
        """Add the nodes `run`: ascending, above every node held, and all of one chunk no node held is in."""
        chunk = run[0] >> _CHUNK_BITS
        self.chunks[chunk] = run
        self.order.append(chunk)
        self.size += len(run)

    def add(self, node: int) -> None:
        chunk = node >> _CHUNK_BITS
        nodes = self.chunks.get(chunk)
        if nodes is None:
            self.chunks[chunk] = [node]
            bisect.insort(self.order, chunk)
        else:
            bisect.insort(nodes, node)
        self.size += 1

    def remove(self, node: int) -> None:
        chunk = node >> _CHUNK_BITS
        nodes = self.chunks[chunk]
        del nodes[bisect.bisect_left(nodes, node)]
        if not nodes:
            del self.chunks[chunk]
            del self.order[bisect.bisect_left(self.order, chunk)]
        self.size -= 1
