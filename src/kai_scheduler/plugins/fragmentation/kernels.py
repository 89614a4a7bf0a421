"""The measure of stranded GPUs (`measure`'s module description), compiled: one row of node states at a time.

Why compiled: a placement changes one or two nodes, so most evaluations are of a few rows, where numpy's
per-call overhead (some 45 calls an evaluation) is nearly all of the cost (issue #23: 85 us an
evaluation, 17,000 of them in the first cycle at 5,000 nodes). Here a row is evaluated in one loop over
the classes.

Why every row alone and in a fixed order: a row's value depends on its state alone (never on the rows
evaluated with it), and every sum runs from the first term to the last, with no library kernel in
between (numpy's pairwise sums, BLAS's matrix-vector product, whose order depends on the CPU), so a state
gives the same bits on every machine and in every batch; classes whose stranded GPUs tie are ranked by
their position in the mix (as a stable sort would). Every other step is numpy's elementwise operation on
the same operands (IEEE: the same result), and the power of OFFERS is that many multiplications (numpy's
`power` may call a vectorised library whose last bit differs by CPU).

Compiled by numba and cached on disk (`cache=True`: next to this file, or in the user's cache directory
where the package is read-only, or in NUMBA_CACHE_DIR); where none is writable, each process compiles them
again (`_compiled`). The plugin loads them when it is configured (`start`), and only then, so a scheduler
without the plugin never loads numba.

A mix is passed as the tuple `MixKernel` (see `measure.MixArrays` for what each array holds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

import numba
import numpy as np

from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray
from kai_scheduler.model.resources import EPSILON
from kai_scheduler.plugins.fragmentation import held

_Function = TypeVar("_Function", bound=Callable[..., Any])

# How many pods of the mix a node's idle capacity is offered before it is judged (`measure`).
OFFERS: Final = 3
# How likely GPUs that a class's pods leave for lack of CPU or memory go to lighter pods (`measure`).
LIGHTER_FILL: Final = 0.75
# Slack for counting how many pods fit: 0.3 + 0.3 + 0.4 portions must fill a GPU exactly.
SLACK: Final = 1e-9
PER_QUANTUM: Final = 1e6  # costs are compared to a millionth of a GPU (`costs`)
# A node state's columns (`costs.PlacementCosts._matrix`): idle CPU, memory, whole GPUs, and from SHARED on
# the free portion of each shared GPU (the last one empty: a GPU a placement would start sharing). Its
# free MIG instances (one column per MIG profile) come beside it.
CPU: Final = 0
MEMORY: Final = 1
WHOLE: Final = 2
SHARED: Final = 3
NEW_GPU: Final = -1  # `place_costs`'s GPU for a pod that starts sharing a free whole GPU
MORE_KEYS: Final = -2  # `walk`: the walk needs keys the search left out
GAVE_UP: Final = -3  # `choose_fitting`: its searches or keys ran out

# weight, shared, gpu, per_cpu, per_memory, per_device, per_portion, whole_portions, per_mig, mig_unasked,
# demand, several_weight, pressure, capacity (`measure.MixArrays`'s fields of the same names).
MixKernel = tuple[
    FloatArray,
    int,
    int,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
    FloatArray,
]


# What `fits_soon` reads of a request (`costs._Costs.asks`): its CPU, memory and whole GPUs, and for a pod
# that shares a GPU its fraction of one (0: asked by GPU memory), its GPU memory in MiB and its devices (0:
# shares none).
FitKernel = tuple[float, float, float, float, float, int]


# A node table's states as the kernels take them: the mix, the states, their MIG columns and units, the
# nodes' fragmentation and whether it is stale (`costs.PlacementCosts`).
NodeStatesKernel = tuple[MixKernel, FloatArray, FloatArray, FloatArray, FloatArray, BoolArray]


def _compiled(function: _Function) -> _Function:
    return _njit(function)


def _uncounted(function: _Function) -> _Function:
    """`_compiled` without numba's reference counting, for a kernel that allocates nothing and returns no
    array. Why: numba takes a reference to an array whenever a name is bound to it (an argument, an array of
    a tuple unpacked, a row of a matrix, an array passed on to another kernel) and gives it back when the
    name dies, two calls of its runtime a binding: some 12 million in the plugin's first run at 2,000 nodes,
    most in the per-node loops, some 100 M instructions with the calls around them (of 475 M compiled).
    Without them nothing is lost: what such a kernel reads, its caller (a counted kernel, or Python) holds
    for the whole call. Numba refuses to compile one that allocates; one must not return an array (its
    caller would give back a reference never taken) nor call a kernel that returns a new one (it would
    never be given back). (numba's `_nrt` option, which numba's own helpers that allocate nothing use.)"""
    return _njit(function, _nrt=False)


def _inlined(function: _Function) -> _Function:
    """`_compiled`, and written into each kernel that calls it. Why: a call passes each array as seven
    values, more than a small function's own work (`_keep`, called a few million times a cycle)."""
    return _njit(function, inline="always")


def _njit(function: _Function, **options: Any) -> _Function:
    try:
        compiled = numba.njit(cache=True, **options)(function)
    except RuntimeError:  # no writable place for numba's cache: compiled in each process instead
        compiled = numba.njit(cache=False, **options)(function)
    return cast(_Function, compiled)


@_uncounted
def _idle_row(state: FloatArray, mig: FloatArray, mig_units: FloatArray) -> float:
    """A node state's idle GPUs: free whole GPUs, the free portions of its shared GPUs, free MIG instances."""
    portions = 0.0
    for column in range(SHARED, state.size):
        portions += state[column]
    instances = 0.0
    for column in range(mig.size):
        instances += mig[column] * mig_units[column]
    total: float = state[WHOLE] + portions + instances
    return total


@_compiled
def idle(states: FloatArray, mig: FloatArray, mig_units: FloatArray) -> FloatArray:
    """Each node state's idle GPUs."""
    result = np.empty(states.shape[0])
    for row in range(result.size):
        result[row] = _idle_row(states[row], mig[row], mig_units)
    return result


@_uncounted
def _usable_row(mix: MixKernel, node: int, state: FloatArray, mig: FloatArray, out: FloatArray) -> None:
    """`out[k]`: the GPUs of one node state that pods of class k could use (`measure.usable`).

    Every GPU class first as if the node shared no GPU, in a loop without branches that the compiler
    turns into vector instructions; then, where it does share some, the shared-GPU classes again with
    their pods on the shared GPUs; then the MIG classes. Why the first pass is exact for a node sharing
    none: each shared GPU's term is then floor(0 x a finite reciprocal + SLACK) = 0, and adding 0 changes
    no sum."""
    weight, shared_classes, gpu_classes = mix[:3]
    per_device, per_portion, whole_portions, per_mig, mig_unasked = mix[5:10]
    whole = state[WHOLE]
    for k in range(gpu_classes):
        out[k] = _used(mix, node, state, k, np.floor(whole * whole_portions[node, k] * per_device[k] + SLACK))
    for column in range(SHARED, state.size):
        if state[column] != 0.0:
            for k in range(shared_classes):
                # Pods by GPUs: a free whole GPU holds 1 // portion devices; a shared one, its free
                # portion // portion (whole numbers: their sum is exact in any order); // devices per pod.
                slots = whole * whole_portions[node, k]
                for shared in range(SHARED, state.size):
                    slots += np.floor(state[shared] * per_portion[node, k] + SLACK)
                out[k] = _used(mix, node, state, k, np.floor(slots * per_device[k] + SLACK))
            break
    for k in range(gpu_classes, weight.size):
        # MIG: the fewest pods any profile it asks for holds; none where no node has its profiles.
        slots = np.inf if mig.size else 0.0
        for column in range(mig.size):
            held = np.floor(mig[column] * per_mig[k - gpu_classes, column] + SLACK)
            slots = min(slots, held + mig_unasked[k - gpu_classes, column])
        out[k] = _used(mix, node, state, k, slots)


@_uncounted
def _used(mix: MixKernel, node: int, state: FloatArray, k: int, pods: float) -> float:
    """The GPUs pods of class k could use of a node state whose GPUs hold `pods` of them, bounded by its
    CPU and memory (see `measure.usable`)."""
    per_cpu, per_memory, demand = mix[3], mix[4], mix[10]
    by_cpu = np.floor(min(state[CPU] * per_cpu[k], state[MEMORY] * per_memory[k]) + SLACK)
    bounded = max(min(pods, by_cpu), 0.0) * (1.0 - LIGHTER_FILL)
    fits = 1.0 if by_cpu >= 1.0 else 0.0
    used: float = ((pods * fits) * LIGHTER_FILL + bounded) * demand[node, k]
    return used


@_compiled
def usable(mix: MixKernel, nodes: IntArray, states: FloatArray, mig: FloatArray) -> FloatArray:
    """Node states x classes: the GPUs of each state that pods of each class could use."""
    result = np.empty((nodes.size, mix[0].size))
    for row in range(nodes.size):
        _usable_row(mix, nodes[row], states[row], mig[row], result[row])
    return result


@_uncounted
def _frag_row(
    mix: MixKernel,
    node: int,
    state: FloatArray,
    mig: FloatArray,
    mig_units: FloatArray,
    stranded: FloatArray,
) -> tuple[float, float]:
    """One node state's stranded GPUs (`measure.evaluate`) and idle GPUs; `stranded` is scratch of one per
    class."""
    weight, several_weight, pressure, capacity = mix[0], mix[11], mix[12], mix[13]
    idle = _idle_row(state, mig, mig_units)
    classes = weight.size
    if classes == 0:  # no GPU pods in the cluster: none for which anything is stranded
        return 0.0, idle
    _usable_row(mix, node, state, mig, stranded)
    whole_nodes = 0.0
    least = most = idle - stranded[0]
    for k in range(classes):
        value = idle - stranded[k]
        stranded[k] = value
        whole_nodes += value * several_weight[k]
        least = value if value < least else least
        most = value if value > most else most
    # With the classes from least to most stranded (ties in class order), the least of the offers strands
    # at least the i-th value when every offer is of class i or later: (weight of those classes) **
    # OFFERS; summed over the steps between consecutive values, that is the expectation. A step between
    # equal values adds exactly 0, so only the steps between distinct values are taken: one pass per
    # distinct value (a node state has one to four), adding its classes' weights in class order (as the
    # stable order adds them) and finding the next value, without branches (adding 0.0 changes nothing).
    expected = 0.0
    earlier = 0.0
    current = least
    while current < most:
        following = most
        for k in range(classes):
            value = stranded[k]
            earlier += weight[k] if value == current else 0.0
            following = value if (value > current) & (value < following) else following
        later = max(1.0 - earlier, 0.0)
        power = later
        for _ in range(OFFERS - 1):
            power *= later
        expected += power * (following - current)
        current = following
    value = least + expected + whole_nodes
    return value + pressure[node] * (capacity[node] - idle), idle


@_compiled
def evaluate(
    mix: MixKernel, nodes: IntArray, states: FloatArray, mig: FloatArray, mig_units: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Each node state's stranded GPUs (`measure.evaluate`) and its idle GPUs."""
    frag = np.empty(nodes.size)
    free = np.empty(nodes.size)
    stranded = np.empty(mix[0].size)
    for row in range(nodes.size):
        frag[row], free[row] = _frag_row(mix, nodes[row], states[row], mig[row], mig_units, stranded)
    return frag, free


@_uncounted
def _fresh(
    mix: MixKernel,
    states: FloatArray,
    mig: FloatArray,
    mig_units: FloatArray,
    node: int,
    frag: FloatArray,
    frag_stale: BoolArray,
    stranded: FloatArray,
) -> float:
    """`frag[node]`, evaluated first if stale."""
    if frag_stale[node]:
        frag[node] = _frag_row(mix, node, states[node], mig[node], mig_units, stranded)[0]
        frag_stale[node] = False
    value: float = frag[node]
    return value


@_compiled
def _shared_options_row(
    mix: MixKernel,
    node: int,
    state: FloatArray,
    mig: FloatArray,
    mig_units: FloatArray,
    portion: float,
    before: float,
    stranded: FloatArray,
    options: tuple[IntArray, FloatArray, FloatArray],
) -> int:
    """Every way of putting one device of a shared-GPU pod (`portion` of a GPU) on a node in the state
    given: joining each shared GPU with room, or starting to share a free whole GPU (the last shared
    column), costed where there is no other option too (it fits only once releasing pods are gone).
    Writes each option's shared column, cost (in rounded quanta, against `before`) and the room of the
    GPU it takes into `options`, in column order; returns how many."""
    columns, costs, rooms = options
    option = state.copy()
    last = state.size - 1
    count = 0
    for column in range(SHARED, last):
        if state[column] >= portion - SLACK:
            option[column] = state[column] - portion
            placed = _frag_row(mix, node, option, mig, mig_units, stranded)[0]
            option[column] = state[column]
            columns[count], rooms[count] = column - SHARED, state[column]
            costs[count] = np.rint((placed - before) * PER_QUANTUM)
            count += 1
    if state[WHOLE] >= 1 - SLACK or count == 0:
        option[last] = state[last] - (portion - 1.0)
        option[WHOLE] = state[WHOLE] - 1.0
        placed = _frag_row(mix, node, option, mig, mig_units, stranded)[0]
        columns[count], rooms[count] = last - SHARED, 1.0
        costs[count] = np.rint((placed - before) * PER_QUANTUM)
        count += 1
    return count


@_compiled
def _option_arrays(states: FloatArray) -> tuple[IntArray, FloatArray, FloatArray]:
    width = states.shape[1] - SHARED
    return np.empty(width, dtype=np.int64), np.empty(width), np.empty(width)


@_compiled
def shared_options(
    mix: MixKernel,
    states: FloatArray,
    mig: FloatArray,
    mig_units: FloatArray,
    node: int,
    portion: float,
    frag: FloatArray,
    frag_stale: BoolArray,
) -> tuple[IntArray, FloatArray, FloatArray]:
    """The options of one device of a shared-GPU pod on `node` as it is (`_shared_options_row`): each
    one's shared column, cost and room."""
    stranded = np.empty(mix[0].size)
    before = _fresh(mix, states, mig, mig_units, node, frag, frag_stale, stranded)
    options = _option_arrays(states)
    count = _shared_options_row(
        mix, node, states[node], mig[node], mig_units, portion, before, stranded, options
    )
    return options[0][:count], options[1][:count], options[2][:count]


@_compiled
def place_costs(
    mix: MixKernel,
    states: FloatArray,
    mig: FloatArray,
    mig_units: FloatArray,
    rows: IntArray,
    frag: FloatArray,
    frag_stale: BoolArray,
    pod: tuple[FloatArray, FloatArray, FloatArray, int],
    per_idle: tuple[float, float],
    keys: FloatArray,
    gpus: IntArray,
) -> None:
    """The order keys of placing a pod on each node of `rows`, into `keys` (the module of `costs` says
    how a cost becomes a key); a node's `frag` is evaluated first where stale. The pod takes `pod`: idle
    CPU, memory and whole GPUs, instances per MIG column, and for a shared-GPU pod its portion of a GPU
    on each node (taken as at most one GPU, one where unknown: inf) on some devices (none: 0 devices). A
    shared-GPU pod is costed at each node's cheapest option (`_shared_options_row`; ties to the least room,
    as gpupack, then the first), times its devices, and that option's shared column (or NEW_GPU) goes into
    `gpus`. `per_idle`: the keys' weights of an idle
    GPU and CPU left."""
    taken, mig_taken, portions, devices = pod
    per_idle_gpu, per_idle_cpu = per_idle
    stranded = np.empty(mix[0].size)
    options = _option_arrays(states)
    columns, costs, rooms = options
    after = np.empty(states.shape[1])
    after_mig = np.empty(mig.shape[1])
    for i in range(rows.size):
        node = rows[i]
        before = _fresh(mix, states, mig, mig_units, node, frag, frag_stale, stranded)
        after[:] = states[node]
        for column in range(taken.size):
            after[column] -= taken[column]
        for column in range(after_mig.size):
            after_mig[column] = mig[node, column] - mig_taken[column]
        if devices == 0:
            placed, left = _frag_row(mix, node, after, after_mig, mig_units, stranded)
            cost = placed - before
        else:
            portion = min(portions[node], 1.0) if np.isfinite(portions[node]) else 1.0
            count = _shared_options_row(
                mix, node, after, after_mig, mig_units, portion, before, stranded, options
            )
            best = 0
            for option in range(1, count):
                cheaper = costs[option] < costs[best]
                if cheaper or (costs[option] == costs[best] and rooms[option] < rooms[best]):
                    best = option
            gpus[node] = NEW_GPU if columns[best] == after.size - 1 - SHARED else columns[best]
            shared = 0.0
            for column in range(SHARED, after.size):
                shared += after[column]
            left = after[WHOLE] + shared - portion * devices
            cost = costs[best] * (devices / PER_QUANTUM)
        key = np.rint(cost * -PER_QUANTUM) * (1.0 / PER_QUANTUM)
        key -= max(left, 0.0) * per_idle_gpu
        keys[node] = key - max(after[CPU], 0.0) * per_idle_cpu


@_compiled
def rows_as_sets(matrix: FloatArray, first: IntArray, inverse: IntArray) -> bool:
    """Whether every row of `matrix` equals the first row of its set (`first[inverse[row]]`), as
    `np.array_equal` compares two rows (NaN equals nothing), without the copies numpy's `take`s make."""
    for row in range(matrix.shape[0]):
        other = first[inverse[row]]
        if other != row:
            for column in range(matrix.shape[1]):
                if matrix[row, column] != matrix[other, column]:
                    return False
    return True


@_compiled
def take_changed(rows: IntArray, changed: BoolArray) -> IntArray:
    """The rows whose `changed` flag is set, in order; their flags cleared."""
    found = np.empty(rows.size, dtype=np.int64)
    count = 0
    for node in rows:
        if changed[node]:
            changed[node] = False
            found[count] = node
            count += 1
    return found[:count]


@_compiled
def scaled(keys: FloatArray, rows: IntArray, top: float) -> tuple[FloatArray, float]:
    """The keys of `rows` scaled so that the lowest is 0 and the highest `top`, and how far apart those
    two are (the scaling only holds where that is above 0)."""
    result = keys[rows]
    low = high = result[0]
    for value in result:
        if value < low:
            low = value
        elif value > high:
            high = value
    spread = high - low
    if spread > 0.0:
        factor = top / spread
        for i in range(result.size):
            result[i] = (result[i] - low) * factor
    return result, spread


# A node lacks what a pod takes of a resource when it has less than that by more than this share of it
# (at least of 1): far above rounding, so that a node found lacking does not hold the pod by
# `NodeTable.node_fits`'s arithmetic either (`may_hold`).
_LACKING: Final = 1e-6


@_inlined
def _lacks(free: float, taken: float) -> bool:
    return free - taken < -_LACKING * max(1.0, taken)


@_inlined
def may_hold(
    states: FloatArray, mig: FloatArray, node: int, pod: tuple[FloatArray, FloatArray, FloatArray, int]
) -> bool:
    """Whether `node` in its state (a row of `states` and of `mig`) may hold a pod that takes `pod`: its idle
    CPU, memory and whole GPUs, its instances per MIG column, and for a pod sharing one GPU the portion it
    takes on each node (a node that lacks a portion's room on every shared GPU and a free whole GPU does not
    hold it). False only where the node lacks one of these (`_lacks`): a node found so does not hold the
    pod, nothing is said of one that passes (pod slots, other devices, several shared GPUs:
    `NodeTable.node_fits` decides). (Read element by element: a row taken as an array costs more.)"""
    taken, mig_taken, portions, devices = pod
    for column in range(taken.size):
        if _lacks(states[node, column], taken[column]):
            return False
    for column in range(mig_taken.size):
        if _lacks(mig[node, column], mig_taken[column]):
            return False
    if devices != 1 or not _lacks(states[node, WHOLE], 1.0):
        return True
    room = 0.0  # (a loop: numba compiles no generator into `any`)
    for column in range(SHARED, states.shape[1]):
        room = max(room, states[node, column])
    return not _lacks(room, portions[node])


@_compiled
def stale_holding(
    nodes: IntArray,
    changed: BoolArray,
    lacking: BoolArray,
    states: FloatArray,
    mig: FloatArray,
    pod: tuple[FloatArray, FloatArray, FloatArray, int],
) -> IntArray:
    """Of `nodes`, those whose keys are stale (`changed`) and that may hold the pod (`may_hold`), their flags
    cleared: the keys to work out; the others stale are noted `lacking`."""
    found = np.empty(nodes.size, dtype=np.int64)
    return found[: _stale_holding_into(nodes, changed, lacking, states, mig, pod, found)]


@_uncounted
def _stale_holding_into(
    nodes: IntArray,
    changed: BoolArray,
    lacking: BoolArray,
    states: FloatArray,
    mig: FloatArray,
    pod: tuple[FloatArray, FloatArray, FloatArray, int],
    found: IntArray,
) -> int:
    """`stale_holding`, written to the start of `found`: how many."""
    count = 0
    for node in nodes:
        if not changed[node] or lacking[node]:
            continue
        if may_hold(states, mig, node, pod):
            changed[node] = False
            found[count] = node
            count += 1
        else:
            lacking[node] = True
    return count


@_compiled
def cost_stale_holding(
    nodes: IntArray,
    changed: BoolArray,
    lacking: BoolArray,
    node_states: NodeStatesKernel,
    pod: tuple[FloatArray, FloatArray, FloatArray, int],
    per_idle: tuple[float, float],
    keys: FloatArray,
    gpus: IntArray,
) -> None:
    """`stale_holding`, and the keys of the nodes it finds worked out (`place_costs`), in one call.
    `node_states`: the mix, the states, their MIG columns and units, the nodes' fragmentation and whether
    it is stale."""
    mix, states, mig, mig_units, frag, frag_stale = node_states
    stale = stale_holding(nodes, changed, lacking, states, mig, pod)
    place_costs(mix, states, mig, mig_units, stale, frag, frag_stale, pod, per_idle, keys, gpus)


@_compiled
def take_in(
    log: tuple[IntArray, int, int], changed: BoolArray, excluded: BoolArray, holding: BoolArray
) -> None:
    """Mark the nodes of the log `(changes, start, end)` (refreshed since a request's costs last took them
    in) as changed for it, neither excluded nor known to hold its pod any more."""
    changes, start, end = log
    for at in range(start, end):
        node = changes[at]
        changed[node] = True
        excluded[node] = False
        holding[node] = False


# What a search keeps of a request's keys between its searches (`summarized_best`): per block of
# 2**shift nodes, the first node of each of its SUMMARY_WIDTH best keys (the searches' usual count of
# keys, `ranked_nodes.FOUND_VALUES`, and one more) and of its lowest key; which blocks are out of date;
# how far the log of node refreshes has been read for it; the shift. See `costs._Summary`.
SUMMARY_WIDTH: Final = 4
SummaryKernel = tuple[FloatArray, IntArray, BoolArray, int, int]


@_compiled
def search(
    log: tuple[IntArray, int, int, int],
    request_state: tuple[FloatArray, BoolArray, BoolArray, BoolArray, IntArray],
    node_states: NodeStatesKernel,
    pod: tuple[FloatArray, FloatArray, FloatArray, int],
    per_idle: tuple[float, float],
    allowed: BoolArray,
    count: int,
    summary: SummaryKernel,
) -> tuple[IntArray, int, bool]:
    """A request's search in one call (`costs.PlacementCosts.best`): the nodes of the log `(changes, seen,
    swept, end)` refreshed since its costs last took them in are taken in (`take_in`: from `seen`), the
    keys of those refreshed since its last search that may hold the pod worked out (`cost_stale_holding`:
    from `swept`), and the nodes searched: from the summary of its keys over `allowed` (`summarized_best`)
    when it keeps as many keys as asked, else key by key (`best_keyed`). `request_state`: its keys,
    changed, excluded and holding flags, and GPUs; the rest as `cost_stale_holding` takes them."""
    changes, seen, swept, end = log
    keys, changed, excluded, holding, gpus = request_state
    take_in((changes, seen, end), changed, excluded, holding)
    if swept < end:
        cost_stale_holding(changes[swept:end], changed, excluded, node_states, pod, per_idle, keys, gpus)
    _, _, stale, summarized, shift = summary
    for at in range(summarized, end):  # the blocks of every node refreshed since the summary's last search
        stale[changes[at] >> shift] = True
    if count < SUMMARY_WIDTH:
        return summarized_best(keys, changed, allowed, excluded, count, summary)
    return best_keyed(keys, changed, allowed, excluded, count)


@_compiled
def best_keyed(
    keys: FloatArray,
    changed: BoolArray,
    allowed: BoolArray,
    excluded: BoolArray,
    count: int,
) -> tuple[IntArray, int, bool]:
    """Among the nodes `allowed` and not `excluded` with a current key (not `changed`): the first node
    (lowest index) of each of the `count` best keys above the lowest, best first; the first node of the
    lowest key (-1: no such node); and whether keys above the lowest were left out."""
    kept_keys = np.empty(count + 1)
    kept_nodes = np.empty(count + 1, dtype=np.int64)
    kept, lowest, lowest_node = _keep_best(
        keys, changed, allowed, excluded, 0, keys.size, kept_keys, kept_nodes, count + 1
    )
    return _found(kept_keys, kept_nodes, kept, lowest, lowest_node, count)


@_inlined
def _keep_best(
    keys: FloatArray,
    changed: BoolArray,
    allowed: BoolArray,
    excluded: BoolArray,
    start: int,
    stop: int,
    kept_keys: FloatArray,
    kept_nodes: IntArray,
    width: int,
) -> tuple[int, float, int]:
    """Of the nodes from `start` to `stop` that a search reads (`best_keyed`): the first node of each of the
    `width` best keys, best first, in `kept_keys` and `kept_nodes`; how many were kept, and the lowest key
    and its first node (inf, -1: none). A node's flags are read only where its key would change the answer:
    most keys lie between the lowest and the kept."""
    kept = 0
    lowest_node = -1
    # A node whose key is the lowest's, or lies between the lowest and the last of `width` kept keys, changes
    # nothing (tied with a node before it, or below every kept key and above the lowest): plain locals, so
    # that the loop reads little more than each key.
    lowest = np.inf
    floor = -np.inf
    for node in range(start, stop):
        key = keys[node]
        if lowest <= key <= floor or key == lowest:
            continue
        if changed[node] or excluded[node] or not allowed[node]:
            continue
        if key < lowest:
            lowest, lowest_node = key, node
        kept = _keep(kept_keys, kept_nodes, kept, width, key, node)
        if kept == width:
            floor = kept_keys[width - 1]
    return kept, lowest, lowest_node


@_inlined
def _keep(kept_keys: FloatArray, kept_nodes: IntArray, kept: int, width: int, key: float, node: int) -> int:
    """Insert `key` at `node` among the `kept` keys (best first, at most `width`) unless it is kept already
    (a node before it came first) or below them all; how many are kept."""
    at = 0
    while at < kept and kept_keys[at] > key:
        at += 1
    if at == width or (at < kept and kept_keys[at] == key):
        return kept
    if kept < width:
        kept += 1
    for move in range(kept - 1, at, -1):
        kept_keys[move] = kept_keys[move - 1]
        kept_nodes[move] = kept_nodes[move - 1]
    kept_keys[at], kept_nodes[at] = key, node
    return kept


@_compiled
def _found(
    kept_keys: FloatArray, kept_nodes: IntArray, kept: int, lowest: float, lowest_node: int, count: int
) -> tuple[IntArray, int, bool]:
    """A search's answer from the first nodes of its `count` + 1 best keys (`kept`) and of the lowest: the
    last kept is the lowest if there are no more keys, else one left out."""
    left_out = False
    if kept and kept_keys[kept - 1] == lowest:
        kept -= 1
    elif kept > count:
        kept = count
        left_out = True
    return kept_nodes[:kept].copy(), lowest_node, left_out


@_compiled
def summarized_best(
    keys: FloatArray,
    changed: BoolArray,
    allowed: BoolArray,
    excluded: BoolArray,
    count: int,
    summary: SummaryKernel,
) -> tuple[IntArray, int, bool]:
    """`best_keyed` (at most SUMMARY_WIDTH - 1 keys) from the summary of the keys by blocks: the blocks out
    of date (`stale`) are summarized again (`_keep_best` over the block), then the blocks' kept keys merged
    in node order. The same answer: a key among the best `count` + 1 overall is among its block's best as
    many, and its first node is in the first block holding it; the lowest likewise. Why: a search then
    reads some 80 summaries and the few blocks that changed instead of every node's key (5,000 a pod)."""
    _summarize_stale(keys, changed, allowed, excluded, summary)
    kept_keys = np.empty(count + 1)
    kept_nodes = np.empty(count + 1, dtype=np.int64)
    kept, lowest, lowest_node = _merge_summaries(summary, kept_keys, kept_nodes)
    return _found(kept_keys, kept_nodes, kept, lowest, lowest_node, count)


@_uncounted
def _summarize_stale(
    keys: FloatArray, changed: BoolArray, allowed: BoolArray, excluded: BoolArray, summary: SummaryKernel
) -> None:
    """The blocks of `summary` out of date summarized again (`summarized_best`)."""
    summary_keys, summary_nodes, stale, _, shift = summary
    width = SUMMARY_WIDTH
    for block in range(stale.size):
        if stale[block]:
            start = block << shift
            stop = min(start + (1 << shift), keys.size)
            kept_keys, kept_nodes = summary_keys[block], summary_nodes[block]
            kept, lowest, lowest_node = _keep_best(
                keys, changed, allowed, excluded, start, stop, kept_keys, kept_nodes, width
            )
            kept_keys[width], kept_nodes[width], kept_nodes[width + 1] = lowest, lowest_node, kept
            stale[block] = False


@_uncounted
def _merge_summaries(
    summary: SummaryKernel, kept_keys: FloatArray, kept_nodes: IntArray
) -> tuple[int, float, int]:
    """The blocks' kept keys of `summary` (all up to date) merged in node order (`summarized_best`): the
    first node of each of the best keys, as many as `kept_keys` holds, in `kept_keys` and `kept_nodes`; how
    many were kept, and the lowest key and its first node (inf, -1: none)."""
    summary_keys, summary_nodes, stale, _, _ = summary
    width = SUMMARY_WIDTH
    capacity = kept_keys.size
    kept = 0
    floor = -np.inf
    lowest, lowest_node = np.inf, -1
    # (Read element by element: a row of a summary taken as an array costs more than the block's keys.)
    for block in range(stale.size):
        if summary_keys[block, width] < lowest:
            lowest, lowest_node = summary_keys[block, width], summary_nodes[block, width]
        for at in range(summary_nodes[block, width + 1]):
            key = summary_keys[block, at]
            if key <= floor:  # (a block's keys best first: the rest lie below too)
                break
            kept = _keep(kept_keys, kept_nodes, kept, capacity, key, summary_nodes[block, at])
            if kept == capacity:
                floor = kept_keys[capacity - 1]
    return kept, lowest, lowest_node


@_compiled
def walk(
    keys: FloatArray, firsts: IntArray, top: int, more: bool, sums: tuple[float, float, FloatArray]
) -> tuple[int, int]:
    """`ranked_nodes`' walk (its module's docstring; `_best_of_listed` is the same walk in Python) over the
    first nodes of the best keys (`firsts`, best first; `more`: keys above `top`'s were left out) and the
    first node of the lowest key (`top`), for a pod whose summed scores are this ranking's between
    constants: `sums` is (the best's score, the constant added before it (0.0: none), those added after,
    in order). A score is `costs.PlacementCosts.plain_scores`' (the lowest key of the nodes walked 0, the
    highest the best's score), and the sums are added as `ranked_nodes._Summed` adds them: the same bits.
    The node chosen (MORE_KEYS: the walk needs keys the search left out), and how many of `firsts` the
    walk read (with `top`: the nodes it relies on)."""
    best_score, before, after = sums
    included = 0
    while True:
        found = firsts[included] if included < firsts.size else -1
        if found >= 0:
            included += 1
            if included < 2:
                continue
        elif more:
            return MORE_KEYS, included
        low = high = keys[top]
        for at in range(included):
            key = keys[firsts[at]]
            low = min(low, key)
            high = max(high, key)
        spread = high - low
        factor = best_score / spread if spread > 0.0 else 0.0
        chosen, chosen_sum, last_sum = -1, -np.inf, -np.inf
        for at in range(-1, included):
            node = top if at < 0 else firsts[at]
            score = (keys[node] - low) * factor if spread > 0.0 else best_score
            summed = score if before == 0.0 else before + score
            for constant in after:
                summed = summed + constant
            if summed > chosen_sum or (summed == chosen_sum and node < chosen):
                chosen, chosen_sum = node, summed
            last_sum = summed
        if found < 0 or last_sum < chosen_sum:
            return chosen, included


@_compiled
def choose(
    session: held.Session,
    request: held.Request,
    summary: held.Summary,
    log: tuple[int, int, int],
    read: tuple[int, int],
    allowed: BoolArray,
    count: int,
    sums: tuple[float, float, FloatArray],
) -> tuple[int, int]:
    """`search`, then `walk` over what it found: the node chosen (-1: none may hold the pod; MORE_KEYS),
    and how many nodes the walk relies on are not known to hold the pod (`holding`), to be asked: written
    to the start of the session's `asked` (at least `count` + 1 long). What `search` takes, from what
    numba holds (`held`): the session's log of refreshes with the request's positions in it `log` (seen,
    swept, end), the request's flags and pod, and the summary's arrays with `read` (the position its
    last search read the log to, the block shift). Why no array returned: numba's making one for Python
    costs as much as the walk."""
    flags = request.flags
    keys, holding, unknown = flags[0], flags[3], session.asked
    position, shift = read
    firsts, top, more = search(
        (session.changes, log[0], log[1], log[2]),
        flags,
        session.node_states,
        request.pod,
        request.per_idle,
        allowed,
        count,
        (summary.keys, summary.nodes, summary.stale, position, shift),
    )
    if top < 0:
        return -1, 0
    chosen, included = walk(keys, firsts, top, more, sums)
    count_unknown = 0
    for at in range(-1, included):
        node = top if at < 0 else firsts[at]
        if not holding[node]:
            unknown[count_unknown] = node
            count_unknown += 1
    return chosen, count_unknown


@_compiled
def choose_fitting(
    session: held.Session,
    request: held.Request,
    summary: held.Summary,
    table: held.Table,
    log: tuple[int, int, int],
    read: tuple[int, int],
    allowed: BoolArray,
    count: int,
    sums: tuple[float, float, FloatArray],
    limits: tuple[int, int],
) -> tuple[int, int]:
    """`choose` until every node its walk relies on holds the pod by `fits_soon` (each such node noted in
    the request's `holding`), for a request `fits_soon` judges: the first node found not to is noted
    `excluded`, its block of the summary out of date, written to the session's `unfit`, and the search made
    again; a walk that needs keys the search left out searches for four times as many. `limits`: how many
    searches, and how many keys a search may ask for, before it gives up. The node chosen (-1: none may
    hold the pod; GAVE_UP), and how many nodes were found not to hold it. Why here: asking
    `NodeTable.node_fits` from Python for the nodes a walk relies on cost a pod as much as its search."""
    searches, most_keys = limits
    seen, swept, end = log
    position, shift = read
    holding, excluded = request.flags[3], request.flags[2]
    asked, unfit, stale = session.asked, session.unfit, summary.stale
    found_unfit = 0
    for _ in range(searches):
        chosen, asking = choose(
            session, request, summary, (seen, swept, end), (position, shift), allowed, count, sums
        )
        seen = swept = position = end  # (the log is taken in: a search made again has nothing more to read)
        if chosen == MORE_KEYS:
            count *= 4
            if count > most_keys:
                return GAVE_UP, found_unfit
            continue
        node_unfit = -1
        for at in range(asking):
            node = asked[at]
            if node >= 0 and not holding[node]:
                if not fits_soon(table, request.asks, node):
                    node_unfit = node
                    break
                holding[node] = True
        if node_unfit < 0:
            return chosen, found_unfit
        excluded[node_unfit] = True
        stale[node_unfit >> shift] = True
        unfit[found_unfit] = node_unfit
        found_unfit += 1
    return GAVE_UP, found_unfit


@_compiled
def fits_soon(table: held.Table, asks: FitKernel, node: int) -> bool:
    """`NodeTable.node_fits(request, node, soon=True)` for a request of `asks` (no scalar resources, at most
    one shared GPU): the same arithmetic in the same order, so the same answer to the last bit. (The
    releasing columns are added whether or not anything is being released: they hold zeros then.)"""
    cpu, memory, whole, fraction, memory_mib, devices = asks
    cap, used, releasing = table.cpu
    cpu_free = cap[node] - used[node] + releasing[node]
    cap, used, releasing = table.memory
    memory_free = cap[node] - used[node] + releasing[node]
    cap, used, releasing = table.pods
    pods_free = cap[node] - used[node] + releasing[node]
    free, releasing, shared_free = table.gpus
    gpus_free = free[node] + releasing[node]
    if not (cpu_free >= cpu - EPSILON and memory_free >= memory - EPSILON and pods_free >= 1 - EPSILON):
        return False
    if whole != 0.0 and not gpus_free >= whole - EPSILON:
        return False
    if devices == 0:
        return True
    gpu_memory = table.gpu_memory_mib[node]
    if fraction > 0.0:  # (`SharedGpuRequest.fit_portion`)
        portion = fraction
    elif gpu_memory <= 0.0:
        portion = np.inf
    else:
        portion = memory_mib / gpu_memory
    joins = shared_free[node] >= portion - EPSILON
    opens = gpus_free >= 1 - EPSILON and pods_free >= 2 - EPSILON
    return portion <= 1.0 + EPSILON and (joins or opens)


@_compiled
def refresh(table: held.Table, session: held.Session, node: int, at: int) -> None:
    """A node's state from the table (`costs.PlacementCosts._refresh`): its idle CPU, memory, whole GPUs and
    MIG instances, no shared GPU (the caller writes those the node has); its fragmentation noted out of
    date and the node written to the log of refreshes at `at`."""
    _, states, mig, _, _, frag_stale = session.node_states
    cap, used, _ = table.cpu
    states[node, CPU] = cap[node] - used[node]
    cap, used, _ = table.memory
    states[node, MEMORY] = cap[node] - used[node]
    states[node, WHOLE] = table.gpus[0][node]
    for column in range(SHARED, states.shape[1]):
        states[node, column] = 0.0
    cap_scalars, used_scalars, columns = table.mig
    for k in range(columns.size):
        mig[node, k] = cap_scalars[node, columns[k]] - used_scalars[node, columns[k]]
    frag_stale[node] = True
    session.changes[at] = node


@_compiled
def hold_session(
    node_states: NodeStatesKernel, changes: IntArray, asked: IntArray, unfit: IntArray
) -> held.Session:
    """A session's arrays as `choose` takes them (`held.Session`)."""
    return held.Session(node_states, changes, asked, unfit)


@_compiled
def hold_request(
    flags: tuple[FloatArray, BoolArray, BoolArray, BoolArray, IntArray],
    pod: tuple[FloatArray, FloatArray, FloatArray, int],
    per_idle: tuple[float, float],
    asks: FitKernel,
) -> held.Request:
    """A request's arrays as `choose` takes them (`held.Request`)."""
    return held.Request(flags, pod, per_idle, asks)


@_compiled
def hold_table(
    cpu: tuple[FloatArray, FloatArray, FloatArray],
    memory: tuple[FloatArray, FloatArray, FloatArray],
    pods: tuple[FloatArray, FloatArray, FloatArray],
    gpus: tuple[FloatArray, FloatArray, FloatArray],
    gpu_memory_mib: FloatArray,
    mig: tuple[FloatArray, FloatArray, IntArray],
) -> held.Table:
    """A node table's columns as `refresh` and `fits_soon` take them (`held.Table`)."""
    return held.Table(cpu, memory, pods, gpus, gpu_memory_mib, mig)


@_compiled
def hold_summary(keys: FloatArray, nodes: IntArray, stale: BoolArray) -> held.Summary:
    """A summary's arrays as `choose` takes them (`held.Summary`)."""
    return held.Summary(keys, nodes, stale)


class Bound:
    """A kernel called without numba's dispatch, its compiled code for the types of its first call's
    arguments taken once. Why: numba types every argument at each call (a tuple element by element: for
    `choose`'s 30 arrays in nested tuples, before `held`, some 14,000 instructions); a caller whose
    arguments keep their types call after call spares that. Only for such a caller: the compiled code reads
    each argument as the type it was compiled for, unchecked (see `costs.PlacementCosts.choose`)."""

    def __init__(self, kernel: Callable[..., Any]) -> None:
        self._kernel = kernel
        self._compiled: Callable[..., Any] | None = None

    def __call__(self, *arguments: Any) -> Any:
        compiled = self._compiled
        if compiled is None:
            typeof: Callable[[Any], Any] = numba.typeof  # (numba's own, untyped)
            compile_for: Callable[[tuple[Any, ...]], Callable[..., Any]] = self._kernel.compile  # type: ignore[attr-defined]
            compiled = self._compiled = compile_for(tuple(typeof(argument) for argument in arguments))
        return compiled(*arguments)


def start() -> None:
    """Load every kernel the plugin calls from Python, on the types it calls them with, from numba's cache
    (compiled into it the first time). Why: a kernel's first call in a process loads it (the first one
    starts numba: some 0.2 s of CPU; the next ones tens of ms each, some 0.2 s in all), which the plugin's
    first session paid before."""
    floats, ints, flags = np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.bool_)
    rows, int_rows = np.zeros((1, 1)), np.zeros((1, 1), dtype=np.int64)
    mix = (floats, 0, 0, floats, floats, floats, rows, rows, rows, rows, rows, floats, floats, floats)
    node_states = (mix, rows, rows, floats, floats, flags)
    pod, per_idle = (floats, floats, floats, 0), (0.0, 0.0)
    summary = (rows, int_rows, flags, 0, 0)
    flags_of_request = (floats, flags, flags, flags, ints)
    searched = (
        (ints, 0, 0, 0),
        flags_of_request,
        node_states,
        pod,
        per_idle,
        flags,
        0,
        summary,
    )
    columns = (floats, floats, floats)
    table = hold_table(columns, columns, columns, columns, floats, (rows, rows, ints))
    held_ones = (
        hold_session(node_states, ints, ints, ints),
        hold_request(flags_of_request, pod, per_idle, (0.0, 0.0, 0.0, 0.0, 0.0, 0)),
        hold_summary(rows, int_rows, flags),
    )
    calls: list[tuple[Any, tuple[Any, ...]]] = [
        (evaluate, (mix, ints, rows, rows, floats)),
        (usable, (mix, ints, rows, rows)),
        (idle, (rows, rows, floats)),
        (place_costs, (mix, rows, rows, floats, ints, floats, flags, pod, per_idle, floats, ints)),
        (shared_options, (mix, rows, rows, floats, 0, 0.0, floats, flags)),
        (scaled, (floats, ints, 0.0)),
        (take_changed, (ints, flags)),
        (rows_as_sets, (rows, ints, ints)),
        (take_in, ((ints, 0, 0), flags, flags, flags)),
        (stale_holding, (ints, flags, flags, rows, rows, pod)),
        (best_keyed, (floats, flags, flags, flags, 0)),
        (search, searched),
        (choose, (*held_ones, (0, 0, 0), (0, 0), flags, 0, (0.0, 0.0, floats))),
        (choose_fitting, (*held_ones, table, (0, 0, 0), (0, 0), flags, 0, (0.0, 0.0, floats), (0, 0))),
        (refresh, (table, held_ones[0], 0, 0)),
    ]
    typeof: Callable[[Any], Any] = numba.typeof  # (numba's own, untyped)
    for kernel, arguments in calls:
        kernel.compile(tuple(typeof(argument) for argument in arguments))
