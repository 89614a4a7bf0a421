"""What placing a pod on each node costs in stranded GPUs, kept up to date through a session.

`PlacementCosts` keeps every node's state and fragmentation (`measure`), and per distinct request the
cost of placing it on each node, as one array over all nodes. A placement changes one node (a rollback
or an eviction as well), so the node states are brought up to date from the node table's log of changes,
for the changed nodes only, and a request's costs only for the nodes that changed since it was last
asked: a pod is costed in one compiled evaluation of those nodes (`kernels`) however large the cluster,
and a request asked for again (the pods of a trace or of a gang are mostly alike) costs next to nothing.
Many nodes alike and in the same state (a new cluster) are costed once.

A cost is turned into an order (higher is better) with ties broken towards packing: the lower cost
first (compared to a millionth of a GPU, below which differences are rounding), then the node left with
fewer idle GPUs, then with less idle CPU, then (the session's own rule) the node name. A CPU-only pod
goes first where the fewest GPUs are idle and only then by cost: the measure sees the next pods of the
mix, not that CPU taken next to idle GPUs is missing later, when the cluster is fuller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from kai_scheduler.framework import ranked_nodes
from kai_scheduler.model.nodes import BoolArray, FloatArray, GpuGroup, IntArray, NodeTable
from kai_scheduler.model.resources import EPSILON, PodRequest
from kai_scheduler.plugins.fragmentation import held, kernels
from kai_scheduler.plugins.fragmentation.kernels import CPU, MEMORY, NEW_GPU, SHARED, WHOLE
from kai_scheduler.plugins.fragmentation.measure import (
    MixArrays,
    NodeStates,
    mig_columns,
    node_states,
)

_IDLE_GPU_WEIGHT: Final = 1e-7  # per idle GPU of the largest node: below one quantum
_IDLE_CPU_WEIGHT: Final = 1e-9  # per idle CPU of the largest node: below that
_CPU_POD_PER_IDLE_GPU: Final = 1e3  # for a CPU-only pod, one idle GPU outweighs any cost
_PROJECTION_SEED: Final = 11  # any fixed seed: the same sets every run
# Up to this many nodes are costed as they are, without looking for alike ones: a node costs some 2 us
# (`kernels`), looking for alike sets some 250 us, and below this their sets spare too few (at 5,000
# nodes, 84% of 33-100 stale candidates and 62% of 100-300 were sets of their own; 0.8% of 3,000 or more).
_FEW_ROWS: Final = 256
# Searches for one pod (`PlacementCosts.best`) before giving up: each one after the first follows a node
# answered that does not hold the pod (out of pod slots, say), which `may_hold` cannot tell.
_SEARCHES: Final = 16
_LIMITS: Final = (_SEARCHES, ranked_nodes.BUDGET)  # (as `kernels.choose_fitting` takes them)
# A request's keys are summarized by blocks of 2**_BLOCK_SHIFT nodes for its searches (`_Summary`): the
# blocks a search reads (5,000 nodes: 79) against the nodes it reads again in the blocks changed since.
_BLOCK_SHIFT: Final = 6
# Summaries kept per request, one per set of nodes allowed (a pod's static predicates: most requests are
# asked over one or two), the least recently made given up first.
_SUMMARIES: Final = 4


@dataclass(slots=True)
class _Costs:
    """One request's order keys on every node, which nodes changed since their keys were computed (or
    never had them), how many of the node refreshes it has taken in (`PlacementCosts._changes`), and
    for a shared-GPU request the GPU its cheapest option takes (a column of the node's state, or
    NEW_GPU)."""

    keys: FloatArray
    changed: BoolArray
    seen: int
    gpu: IntArray
    # What a pod takes, as the kernels take it: a node's idle CPU, memory and whole GPUs; each MIG column's
    # free instances; the portion of a GPU a shared-GPU pod takes on each node (0: shares none); devices.
    pod: tuple[FloatArray, FloatArray, FloatArray, int]
    # The order key's weights of each idle GPU and idle CPU a placement leaves (see the module).
    per_idle: tuple[float, float]
    # What `kernels.fits_soon` reads of the request, and whether it judges the request's fit (no scalar
    # resources, at most one shared GPU): `NodeTable.node_fits` judges the others.
    asks: kernels.FitKernel
    fits_judged: bool
    # Nodes found not to hold a pod of the request since they last changed: lacking what it takes
    # (`kernels.may_hold`), or by `NodeTable.node_fits` (`PlacementCosts.best`).
    excluded: BoolArray
    # Nodes found to hold a pod of the request (`NodeTable.node_fits`) since they last changed.
    holding: BoolArray
    # How far `PlacementCosts.best` has looked at the node refreshes (`PlacementCosts._changes`), -1:
    # never. Why: after it every stale key is of a node excluded, so it looks only at those refreshed since.
    swept: int

    # Per set of nodes allowed (by identity), what its searches keep of the keys (`_Summary`).
    summaries: dict[int, _Summary]
    # The flags, pod and weights as `kernels.choose` takes them (made at its first choice).
    choosing: held.Request | None = None

    def flags(self) -> tuple[FloatArray, BoolArray, BoolArray, BoolArray, IntArray]:
        """The keys, flags and GPUs as `kernels.search` takes them."""
        return self.keys, self.changed, self.excluded, self.holding, self.gpu

    def held_request(self) -> held.Request:
        """The request's flags, pod and weights as `kernels.choose` takes them (the same arrays)."""
        if self.choosing is None:
            self.choosing = kernels.hold_request(self.flags(), self.pod, self.per_idle, self.asks)
        return self.choosing

    def summary(self, allowed: BoolArray, size: int, position: int) -> _Summary:
        """The summary of the keys over the nodes `allowed`, a new one (every block out of date) if there is
        none: `position` is the log's end (what a new one has read of it)."""
        summary = self.summaries.get(id(allowed))
        if summary is None or summary.allowed is not allowed:
            if len(self.summaries) >= _SUMMARIES:
                del self.summaries[next(iter(self.summaries))]
            summary = self.summaries[id(allowed)] = _Summary.new(allowed, size, position)
        return summary

    def exclude(self, node: int) -> None:
        """Note `node` as not holding a pod of the request until it changes, in every summary too."""
        self.excluded[node] = True
        for summary in self.summaries.values():
            summary.stale[node >> _BLOCK_SHIFT] = True


@dataclass(slots=True)
class _Summary:
    """What a request's searches over one set of nodes `allowed` keep of its keys
    (`kernels.summarized_best`): per block of 2**_BLOCK_SHIFT nodes, the first node of each of its
    `kernels.SUMMARY_WIDTH` best keys and of its lowest (`keys`: those keys, the lowest last; `nodes`: those
    nodes, the lowest's, then how many were kept), which blocks are out of date (`stale`), and how far the
    log of node refreshes was read for it (`position`). A block is out of date once a node of it is refreshed
    (the search reads the log from `position`) or excluded (`_Costs.exclude`): nothing else changes what a
    search reads of a node between its searches (a key is worked out only for a node refreshed since)."""

    allowed: BoolArray  # (kept: the summaries are found by its identity)
    keys: FloatArray
    nodes: IntArray
    stale: BoolArray
    position: int
    choosing: held.Summary  # its arrays as `kernels.choose` takes them
    plain: bool  # whether `allowed` is a plain mask (`_plain_mask`: an array's layout never changes)

    @staticmethod
    def new(allowed: BoolArray, size: int, position: int) -> _Summary:
        blocks = max((size + (1 << _BLOCK_SHIFT) - 1) >> _BLOCK_SHIFT, 1)
        width = kernels.SUMMARY_WIDTH
        keys = np.empty((blocks, width + 1))
        nodes = np.empty((blocks, width + 2), dtype=np.int64)
        stale = np.ones(blocks, dtype=np.bool_)
        held_summary = kernels.hold_summary(keys, nodes, stale)
        return _Summary(allowed, keys, nodes, stale, position, held_summary, _plain_mask(allowed))

    def read(self, end: int) -> kernels.SummaryKernel:
        """As `kernels.search` takes it, noting that the search reads the log up to `end`."""
        return self.keys, self.nodes, self.stale, self.advance(end), _BLOCK_SHIFT

    def advance(self, end: int) -> int:
        """How far the log was read for it, noting that a search now reads it up to `end`."""
        position, self.position = self.position, end
        return position


class PlacementCosts:
    def __init__(self, table: NodeTable, mix: MixArrays, top_score: float) -> None:
        self.table = table
        self.mix = mix
        self.top_score = top_score  # the score of the best of the candidates scored (`scores`)
        self.mig, self.mig_units = mig_columns(table)
        self.width = max((len(groups) for groups in table.groups.values()), default=0) + 1
        self._set_states(node_states(table, np.arange(table.size), self.width, self.mig))
        self._mix = mix.kernel()
        self.frag = kernels.evaluate(
            self._mix, np.arange(table.size), self._matrix, self.state.mig, self.mig_units
        )[0]
        # Nodes whose state changed since their `frag` was computed: it is computed again together
        # with the next costs that need it (one evaluation instead of two).
        self._frag_stale = np.zeros(table.size, dtype=np.bool_)
        self._position = table.change_position()
        # Every node refresh in turn: each request's costs take in those since it was last asked, so
        # that a pod's candidates are looked up once, in one mask (a pod asks over thousands of nodes).
        # An array filled up to `_changed` (doubled when full): what a request takes in is a slice of it,
        # where a list's slice is made into an array at each ask (thousands for a request asked rarely).
        self._changes = np.empty(max(table.size, 1), dtype=np.int64)
        self._changed = 0
        self._costs: dict[PodRequest, _Costs] = {}
        self._choose = kernels.Bound(kernels.choose)
        self._choose_fitting = kernels.Bound(kernels.choose_fitting)
        self._refresh_row = kernels.Bound(kernels.refresh)
        # Where `kernels.choose` writes the nodes to ask `node_fits` (at most one more than the keys asked),
        # and `kernels.choose_fitting` the nodes it found not to hold a pod (at most one a search).
        self._asked = np.empty(ranked_nodes.BUDGET + 1, dtype=np.int64)
        self._unfit = np.empty(_SEARCHES, dtype=np.int64)
        # The session's arrays as the kernels take them, and the arrays (of those the plugin may replace) it
        # was made of (`_held_session`); the table's columns (`kernels.refresh`, `kernels.fits_soon`).
        self._choosing: tuple[FloatArray, FloatArray, IntArray, held.Session] | None = None
        self._held_table = kernels.hold_table(
            (table.cap_cpu, table.used_cpu, table.rel_cpu),
            (table.cap_memory, table.used_memory, table.rel_memory),
            (table.cap_pods, table.used_pods, table.rel_pods),
            (table.free_gpus, table.rel_gpus, table.shared_free_soon),
            table.gpu_memory_mib,
            (table.cap_scalars, table.used_scalars, self.mig),
        )
        # The last request costed, for the GPU chooser that the session asks right after (`choose_gpus`).
        self._last: PodRequest | None = None
        self._per_gpu = _IDLE_GPU_WEIGHT / max(float(table.cap_gpus.max(initial=0.0)), 1.0)
        self._per_cpu = _IDLE_CPU_WEIGHT / max(float(table.cap_cpu.max(initial=0.0)), 1.0)
        # Nodes alike for the mix (the same classes may run there, with the same portions and GPU
        # memory, and as many GPUs: the GPUs in use count; and as much pressure, which the CPU and
        # memory of the node when idle decide too): in the same state, a placement costs the same on each.
        alike = np.column_stack(
            [
                mix.whole_portions,
                mix.per_portion,
                mix.demand,
                table.gpu_memory_mib,
                mix.capacity,
                mix.pressure,
            ]
        )
        self._kind = _row_sets(alike)[1].astype(np.float64)

    # --- node states ------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Bring the node states up to date with the table."""
        table = self.table
        changed = table.changed_since(self._position)
        self._position = table.change_position()
        if changed is None:  # too much changed to tell what: everything afresh
            self.width = max((len(groups) for groups in table.groups.values()), default=0) + 1
            self._set_states(node_states(table, np.arange(table.size), self.width, self.mig))
            self._frag_stale[:] = True
            self._costs.clear()
        elif changed:
            for node in set(changed):
                self._refresh(node)

    def _refresh(self, node: int) -> None:
        """One node's state from the table, in one compiled call (`kernels.refresh`) but for the free portions
        of its shared GPUs (Python objects: `GpuGroup.free_now`)."""
        groups = self.table.groups.get(node, ())
        if len(groups) + 1 > self.width:  # a node shares more GPUs than any did: widen every row
            extra = np.zeros((self.table.size, len(groups) + 1 - self.width))
            self.width = len(groups) + 1
            self._set_states(replace(self.state, shared=np.concatenate([self.state.shared, extra], axis=1)))
        if self._changed == self._changes.size:
            self._changes = np.concatenate([self._changes, np.empty_like(self._changes)])
        self._refresh_row(self._held_table, self._held_session(), node, self._changed)
        self._changed += 1
        if groups:
            matrix = self._matrix
            for column, group in enumerate(groups, SHARED):
                matrix[node, column] = group.free_now

    def _set_states(self, states: NodeStates) -> None:
        """Keep every node's state as one matrix (`_matrix`: idle CPU, memory, whole GPUs, then the
        shared GPUs' free portions), `state` its columns: some rows' states are then gathered in one go
        (for the usual few rows, numpy's per-call overhead is most of the cost)."""
        self._matrix = np.column_stack([states.cpu, states.memory, states.whole, states.shared])
        self.state = _columns(states.nodes, self._matrix, states.mig)

    # --- costs ------------------------------------------------------------------------------------

    def order(self, request: PodRequest, rows: IntArray) -> FloatArray:
        """How good a place each node of `rows` is for a pod of `request` (higher is better)."""
        keys: FloatArray = self._current(request, rows).keys.take(rows)
        return keys

    def best(self, request: PodRequest, allowed: BoolArray, count: int) -> tuple[list[int], int, bool] | None:
        """For `ranked_nodes` (a `Finder`): among the nodes `allowed` that hold a pod of `request` soon
        (`NodeTable.node_fits`), the first node of each of the `count` best keys above the lowest, best
        first; the first node of the lowest key (-1: no such node); and whether keys above the lowest
        were left out. None: `_SEARCHES` searches found nodes that do not hold it.

        The keys of the nodes refreshed since the request's last search that may hold the pod
        (`kernels.may_hold`: a node that lacks what it takes does not) are worked out, and the nodes
        searched in a pass that reads little more than each key, in one compiled call (`kernels.search`),
        where scoring every candidate took numpy's masks and arrays. A node answered is asked `node_fits` once
        until it changes (pod slots, devices: what `may_hold` does not read); one that does not hold the
        pod is excluded until it changes, and the search is made again."""
        costs, log, node_states = self._searching(request)
        summary = costs.summary(allowed, self.table.size, log[3])
        for _ in range(_SEARCHES):
            read = summary.read(log[3])
            found, lowest, left_out = kernels.search(
                log, costs.flags(), node_states, costs.pod, costs.per_idle, allowed, count, read
            )
            log = self._taken_in(log)
            firsts: list[int] = found.tolist()
            unfit = self._first_unfit(request, [lowest, *firsts], costs)
            if unfit < 0:
                return firsts, int(lowest), bool(left_out)
            costs.exclude(unfit)
        return None

    def choose(
        self, request: PodRequest, allowed: BoolArray, around: tuple[float, FloatArray]
    ) -> int | ranked_nodes.Undecided | None:
        """For `ranked_nodes` (a `Finder`): the node its walk would choose over what `best` answers, for a
        pod whose summed scores are this ranking's (`scores`) between constants (`around`), in one
        compiled call with the search (`kernels.choose`, its walk `kernels.walk`); None: no node holds
        the pod; UNDECIDED: it gave up. The nodes the walk relies on are asked `node_fits` as `best`
        asks them (the search is made again without one that does not hold the pod), and the search
        asked for more keys while the walk needs keys it left out (as `ranked_nodes._best_found`): in the
        same compiled call for a request whose fit `kernels.fits_soon` judges (`kernels.choose_fitting`)."""
        costs, log, _ = self._searching(request)
        summary = costs.summary(allowed, self.table.size, log[3])
        session, held_request = self._held_session(), costs.held_request()
        sums = (self.top_score, *around)
        count = ranked_nodes.FOUND_VALUES
        asked = self._asked
        # Every argument keeps its type through a session (the plugin's own arrays; the sums' constants an
        # array of floats, `ranked_nodes._Summed.around`) but the nodes allowed, a session's mask: called
        # without numba's dispatch where that is a plain mask (`kernels.Bound`).
        plain = summary.plain
        if costs.fits_judged and plain:
            read = (summary.advance(log[3]), _BLOCK_SHIFT)
            chosen, unfit = self._choose_fitting(
                session,
                held_request,
                summary.choosing,
                self._held_table,
                log[1:],
                read,
                allowed,
                count,
                sums,
                _LIMITS,
            )
            if unfit:
                for node in self._unfit[:unfit].tolist():  # (its other summaries' blocks too)
                    costs.exclude(node)
            if chosen == kernels.GAVE_UP:
                return ranked_nodes.UNDECIDED
            return chosen if chosen >= 0 else None
        choose = self._choose if plain else kernels.choose
        for _ in range(_SEARCHES):
            read = (summary.advance(log[3]), _BLOCK_SHIFT)
            held_summary = summary.choosing
            chosen, asking = choose(session, held_request, held_summary, log[1:], read, allowed, count, sums)
            log = self._taken_in(log)
            if chosen == kernels.MORE_KEYS:
                count *= 4
                if count > ranked_nodes.BUDGET:
                    return ranked_nodes.UNDECIDED
                continue
            unfit = self._first_unfit(request, asked[:asking].tolist(), costs)
            if unfit < 0:
                return chosen if chosen >= 0 else None
            costs.exclude(unfit)
        return ranked_nodes.UNDECIDED

    def _held_session(self) -> held.Session:
        """The session's arrays as the kernels take them (`_node_states`, the log, where `kernels.choose`
        writes the nodes to ask and `kernels.choose_fitting` those found not to hold a pod), made again once
        the plugin replaced one (`_set_states`, the log grown)."""
        kept = self._choosing
        if (
            kept is None
            or kept[0] is not self._matrix
            or kept[1] is not self.state.mig
            or kept[2] is not self._changes
        ):
            session = kernels.hold_session(self._node_states(), self._changes, self._asked, self._unfit)
            kept = self._choosing = self._matrix, self.state.mig, self._changes, session
        return kept[3]

    def _first_unfit(self, request: PodRequest, nodes: list[int], costs: _Costs) -> int:
        """The first of `nodes` (-1 stands for none) that does not hold a pod of `request` soon
        (`NodeTable.node_fits`), or -1; each found to hold it is noted (`holding`: not asked again until it
        changes)."""
        node_fits, holding = self.table.node_fits, costs.holding
        for node in nodes:
            if node >= 0 and not holding.item(node):
                if not node_fits(request, node, soon=True):
                    return node
                holding[node] = True
        return -1

    def _searching(
        self, request: PodRequest
    ) -> tuple[_Costs, tuple[IntArray, int, int, int], kernels.NodeStatesKernel]:
        """Ready a search for `request`: its costs, the log of the nodes refreshed since they took them in
        and since its last search (as `kernels.search` takes it: the nodes' keys are worked out there,
        but at its first search: here, alike ones once), and the node states."""
        self._sync()
        costs = self._costs_of(request)
        if costs.swept < 0:
            self._cost_every(request, costs)
        log = (self._changes, costs.seen, costs.swept, self._changed)
        costs.seen = costs.swept = self._changed
        self._last = request
        return costs, log, self._node_states()

    def _node_states(self) -> kernels.NodeStatesKernel:
        """The node states as the kernels take them (see `kernels.NodeStatesKernel`)."""
        return self._mix, self._matrix, self.state.mig, self.mig_units, self.frag, self._frag_stale

    def _taken_in(self, log: tuple[IntArray, int, int, int]) -> tuple[IntArray, int, int, int]:
        """The log of a search made again: nothing more to take in or cost."""
        end = log[3]
        return log[0], end, end, end

    def _cost_every(self, request: PodRequest, costs: _Costs) -> None:
        """The keys of a request's first search: of every node without a current key that may hold the pod,
        nodes alike in the same state costed once (`_compute`; at 5,000 nodes, some 5,000 nodes in some 40
        sets). Its later searches cost the nodes refreshed since in their own compiled call: of those, few
        may hold the pod (at 5,000 nodes some 25 of 550), too few for sets of alike nodes to pay (measured:
        costing them here, alike ones once, whenever more than 256 nodes were refreshed since cost the
        plugin's first run at 2,000 nodes 1.7% more)."""
        self._take_in(costs)
        every = np.arange(self.table.size)
        stale = kernels.stale_holding(
            every, costs.changed, costs.excluded, self._matrix, self.state.mig, costs.pod
        )
        if stale.size:
            self._compute(request, stale, costs)
        costs.swept = self._changed

    def values(self, request: PodRequest) -> FloatArray:
        """Every node's value for the ranked index (`ranked_nodes.Ranking`): its order key negated (the
        lower, the better a place), and -inf where a pod of `request` does not fit, even soon (below any
        floor: the index then never walks those nodes). Keys are brought up to date where it fits."""
        fits = self.table.fit(request, soon=True)
        costs = self._current(request, fits.nonzero()[0])
        return np.where(fits, -costs.keys, -math.inf)

    def values_at(self, request: PodRequest, nodes: list[int]) -> list[float]:
        """`values` at `nodes` (the same bits), costing in one evaluation the nodes where the pod fits."""
        node_fits = self.table.node_fits
        fitting = [node for node in nodes if node_fits(request, node, soon=True)]
        keys = self._current(request, np.array(fitting, dtype=np.int64)).keys
        values = dict.fromkeys(nodes, -math.inf)
        for node in fitting:
            values[node] = -keys.item(node)
        return [values[node] for node in nodes]

    def scores(self, request: PodRequest, rows: IntArray) -> FloatArray | float:
        """`order` scaled: the best of `rows` `top_score`, the worst 0, the others in between in order
        (`top_score` for all when they are alike)."""
        if rows.size == 0:
            return 0.0
        top = self.top_score
        scores, spread = kernels.scaled(self._current(request, rows).keys, rows, top)
        return scores if spread > 0.0 else top

    def plain_scores(self, request: PodRequest, rows: list[int]) -> list[float] | float:
        """`scores` at `rows` whose keys are current (those `best` or the ranked index answered), in plain
        floats: the same IEEE operations in the same order as `kernels.scaled`, so the same bits. The
        request is the last one scored (`choose_gpus` reads its costs next)."""
        self._last = request
        keys = self._costs[request].keys
        values = [keys.item(row) for row in rows]
        low, high = min(values), max(values)
        spread = high - low
        if spread > 0.0:
            factor = self.top_score / spread
            return [(value - low) * factor for value in values]
        return self.top_score

    def _current(self, request: PodRequest, rows: IntArray) -> _Costs:
        """The costs of `request`, up to date at `rows`."""
        self._sync()
        costs = self._costs_of(request)
        # Only the candidates whose node changed since they were costed (usually the one or two
        # nodes the last placements took).
        self._take_in(costs)
        stale = kernels.take_changed(rows, costs.changed)
        if stale.size:
            self._compute(request, stale, costs)
        self._last = request
        return costs

    def _costs_of(self, request: PodRequest) -> _Costs:
        costs = self._costs.get(request)
        if costs is None:
            size = self.table.size
            costs = self._costs[request] = _Costs(
                np.zeros(size),
                np.ones(size, dtype=np.bool_),
                self._changed,
                np.zeros(size, dtype=np.int64),
                (
                    np.array([request.cpu, request.memory, request.whole_gpus], dtype=np.float64),
                    self._mig_taken(request),
                    self.table.portion_for(request) if request.is_shared_gpu else np.zeros(size),
                    request.gpu_devices,
                ),
                (self._per_gpu if request.uses_gpu else _CPU_POD_PER_IDLE_GPU, self._per_cpu),
                _asks(request),
                not request.scalars and request.gpu_devices <= 1,
                np.zeros(size, dtype=np.bool_),
                np.zeros(size, dtype=np.bool_),
                -1,
                {},
            )
        return costs

    def _mig_taken(self, request: PodRequest) -> FloatArray:
        """The instances a pod of `request` takes of each MIG column."""
        taken = np.zeros(self.mig.size)
        for name, amount in request.mig_instances:
            taken[self.mig == self.table.scalar_index.get(name, -1)] += amount
        return taken

    def _take_in(self, costs: _Costs) -> None:
        """Mark the nodes refreshed since `costs` were last asked as changed for them."""
        if costs.seen < self._changed:
            log = (self._changes, costs.seen, self._changed)
            kernels.take_in(log, costs.changed, costs.excluded, costs.holding)
            costs.seen = self._changed

    def _compute(self, request: PodRequest, rows: IntArray, costs: _Costs) -> None:
        if rows.size > _FEW_ROWS:
            first, inverse = self._distinct(rows)
            if first.size < rows.size:
                self._compute_rows(request, first, costs)
                costs.keys[rows] = costs.keys.take(first).take(inverse)
                costs.gpu[rows] = costs.gpu.take(first).take(inverse)
                return
        self._compute_rows(request, rows, costs)

    def _compute_rows(self, request: PodRequest, rows: IntArray, costs: _Costs) -> None:
        # Every row alone, in one compiled loop: the node's own fragmentation where it is out of date,
        # then with the pod (for the usual one or two rows, numpy's calls would cost most).
        kernels.place_costs(
            self._mix,
            self._matrix,
            self.state.mig,
            self.mig_units,
            rows,
            self.frag,
            self._frag_stale,
            costs.pod,
            costs.per_idle,
            costs.keys,
            costs.gpu,
        )

    def _distinct(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        """The first of each set of alike nodes of `rows` in the same state, and which set each is
        (every row its own set if two states could not be told apart)."""
        kind, mig = self._kind.take(rows)[:, None], self.state.mig.take(rows, axis=0)
        key = np.concatenate([kind, self._matrix.take(rows, axis=0), mig], axis=1)
        first, inverse = _row_sets(key)
        return rows.take(first), inverse

    # --- shared GPUs ------------------------------------------------------------------------------

    def choose_gpus(self, node: int, portion: float, devices: int) -> list[GpuGroup | None]:
        """The shared GPUs of `node` a pod of `portion` on `devices` devices strands least on; None: start
        sharing a free whole GPU.

        The session asks right after costing the pod's request on the candidates, so for one device the
        cheapest option found then is the answer while the node has not changed since; otherwise
        (several devices, or asked out of turn) the options are costed again: the cheapest first, ties
        to the GPU with the least room that fits (as gpupack), a new one last."""
        self._sync()
        groups = self.table.groups.get(node, [])
        last = self._last
        costs = self._costs.get(last) if last is not None else None
        if costs is not None:
            self._take_in(costs)
        if (
            devices == 1
            and last is not None
            and costs is not None
            and last.is_shared_gpu
            and not costs.changed[node]
            and abs(self.table.portion_on(last, node) - portion) <= EPSILON
        ):
            gpu = int(costs.gpu[node])
            return [None if gpu == NEW_GPU else groups[gpu]]
        column, cost, room = kernels.shared_options(
            self._mix,
            self._matrix,
            self.state.mig,
            self.mig_units,
            node,
            min(portion, 1.0),
            self.frag,
            self._frag_stale,
        )
        ranked = sorted(zip(cost.tolist(), room.tolist(), column.tolist(), strict=True))
        chosen: list[GpuGroup | None] = []
        free_whole = int(self.table.free_gpus[node] + EPSILON)
        for _, _, c in ranked:
            if c < len(groups):
                chosen.append(groups[c])
            else:
                chosen.extend([None] * min(free_whole, devices - len(chosen)))
            if len(chosen) >= devices:
                break
        chosen.extend([None] * (devices - len(chosen)))
        return chosen[:devices]


_BOOL: Final = np.dtype(np.bool_)


def _plain_mask(mask: BoolArray) -> bool:
    """Whether `mask` is one-dimensional booleans in one piece (what `kernels.Bound` reads it as)."""
    return mask.dtype is _BOOL and mask.ndim == 1 and mask.flags.c_contiguous


def _asks(request: PodRequest) -> kernels.FitKernel:
    """What `kernels.fits_soon` reads of `request`."""
    shared = request.shared_gpu
    if shared is None:
        return request.cpu, request.memory, float(request.whole_gpus), 0.0, 0.0, 0
    return (
        request.cpu,
        request.memory,
        float(request.whole_gpus),
        shared.fraction,
        float(shared.memory_mib),
        shared.devices,
    )


def _columns(nodes: IntArray, matrix: FloatArray, mig: FloatArray) -> NodeStates:
    """Node states whose columns are views of `matrix` (as `PlacementCosts._set_states` lays it out)."""
    return NodeStates(nodes, matrix[:, CPU], matrix[:, MEMORY], matrix[:, WHOLE], matrix[:, SHARED:], mig)


def _row_sets(matrix: FloatArray) -> tuple[IntArray, IntArray]:
    """Equal rows of `matrix` as sets: the first row of each set, and which set each row is in (every
    row its own set if two rows could not be told apart)."""
    # Sets by a random projection of the rows (sorting numbers is far cheaper than sorting rows),
    # checked: rows put together that differ after all would be costed wrong, so then none are. Projected
    # by numpy's own sum of products (`einsum`), not BLAS (`@`): BLAS's threads go on spinning after a
    # call, some 55 ms of the process's CPU in the first cycle at 5,000 nodes (79 calls).
    projection = np.random.default_rng(_PROJECTION_SEED).random(matrix.shape[1]) + 0.5
    projected = np.einsum("ij,j->i", matrix, projection)
    _, first, inverse = np.unique(projected, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not kernels.rows_as_sets(matrix, first, inverse):
        every = np.arange(matrix.shape[0])
        return every, every
    return first, inverse
