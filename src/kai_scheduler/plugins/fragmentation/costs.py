"""What placing a pod on each node costs in stranded GPUs, kept up to date through a session.

`PlacementCosts` keeps every node's state and fragmentation (`measure`), and per distinct request the
cost of placing it on each node, as one array over all nodes with the moment each entry was computed. A
placement changes one node (a rollback or an eviction as well), so the node states are brought up to date
from the node table's log of changes, for the changed nodes only, and a request's costs only for the
candidates that changed since it was last asked: a pod is costed in a few small numpy operations however
large the cluster, and a request asked for again (the pods of a trace or of a gang are mostly alike)
costs next to nothing.

A cost is turned into an order with ties broken towards packing: the lower cost first (compared to a
millionth of a GPU, below which differences are rounding), then the node left with fewer idle GPUs, then
with less idle CPU, then (the session's own rule) the node name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from kai_scheduler.model.nodes import FloatArray, GpuGroup, IntArray, NodeTable
from kai_scheduler.model.resources import EPSILON, PodRequest
from kai_scheduler.plugins.fragmentation.measure import (
    MixArrays,
    NodeStates,
    after_placing,
    cheapest_per_row,
    fragmentation,
    idle,
    join,
    mig_columns,
    node_states,
    shared_options,
)

_COST_QUANTUM: Final = 1e-6  # GPUs: cost differences below it are rounding, not a preference
_IDLE_GPU_WEIGHT: Final = 1e-7  # per idle GPU of the largest node, below one quantum
_IDLE_CPU_WEIGHT: Final = 1e-9  # per idle CPU of the largest node, below that
_NEW_GPU: Final = -1  # the cheapest option is to start sharing a free whole GPU
_FEW_ROWS: Final = 32  # up to this many nodes are costed as they are, without looking for alike ones


@dataclass(slots=True)
class _Costs:
    """One request's order keys on every node, when each was computed (-1: never), and for a
    shared-GPU request the GPU its cheapest option takes (a column of the node's state, or _NEW_GPU)."""

    keys: FloatArray
    computed: IntArray
    gpu: IntArray


class PlacementCosts:
    def __init__(self, table: NodeTable, mix: MixArrays) -> None:
        self.table = table
        self.mix = mix
        self.mig, self.mig_units = mig_columns(table)
        everything = np.arange(table.size)
        self.width = max((len(groups) for groups in table.groups.values()), default=0) + 1
        self.state = node_states(table, everything, self.width, self.mig)
        self.frag = fragmentation(mix, self.state, self.mig_units)
        # Nodes whose state changed since their `frag` was computed: it is computed again together
        # with the next costs that need it (one evaluation instead of two).
        self._frag_stale = np.zeros(table.size, dtype=np.bool_)
        self._position = table.change_position()
        # How many times node states were refreshed, and each node's last refresh.
        self._refreshes = 0
        self._refreshed = np.zeros(table.size, dtype=np.int64)
        self._costs: dict[PodRequest, _Costs] = {}
        # The last request costed, for the GPU chooser that the session asks right after (see
        # `choose_gpus`).
        self._last: PodRequest | None = None
        self._gpu_scale = max(float(table.cap_gpus.max(initial=0.0)), 1.0)
        self._cpu_scale = max(float(table.cap_cpu.max(initial=0.0)), 1.0)
        # Nodes alike for the mix (the same classes may run there, with the same portions and GPU
        # memory): in the same state, a placement costs the same on each.
        alike = np.column_stack([mix.whole_portions, mix.per_portion, mix.demand, table.gpu_memory_mib])
        self._kind = np.unique(alike, axis=0, return_inverse=True)[1].reshape(-1).astype(np.float64)

    # --- node states ------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Bring the node states up to date with the table."""
        table = self.table
        changed = table.changed_since(self._position)
        self._position = table.change_position()
        if changed is not None and not changed:
            return
        if changed is None:
            rows = np.arange(table.size)
        elif len(changed) == 1:
            rows = np.array(changed, dtype=np.int64)
        else:
            rows = np.array(sorted(set(changed)), dtype=np.int64)
        most = max((len(table.groups.get(node, ())) for node in rows.tolist()), default=0)
        if most + 1 > self.width:  # a node shares more GPUs than any did: widen every row
            extra = np.zeros((table.size, most + 1 - self.width))
            self.state.shared = np.concatenate([self.state.shared, extra], axis=1)
            self.width = most + 1
        fresh = node_states(table, rows, self.width, self.mig)
        state = self.state
        state.cpu[rows] = fresh.cpu
        state.memory[rows] = fresh.memory
        state.whole[rows] = fresh.whole
        state.shared[rows] = fresh.shared
        state.mig[rows] = fresh.mig
        self._frag_stale[rows] = True
        self._refreshes += 1
        self._refreshed[rows] = self._refreshes

    def _frag_of(self, rows: IntArray, *others: NodeStates) -> tuple[FloatArray, list[FloatArray]]:
        """`frag` of the nodes `rows` (brought up to date), and the fragmentation of other states, in
        one evaluation."""
        stale = rows[self._frag_stale.take(rows)]
        parts = [*others]
        if stale.size:
            parts.insert(0, self._rows(stale))
        results: list[FloatArray] = []
        if parts:
            joined = parts[0] if len(parts) == 1 else join(parts)
            values = fragmentation(self.mix, joined, self.mig_units)
            start = 0
            for part in parts:
                results.append(values[start : start + part.nodes.size])
                start += part.nodes.size
        if stale.size:
            self.frag[stale] = results.pop(0)
            self._frag_stale[stale] = False
        return self.frag.take(rows), results

    def _rows(self, rows: IntArray) -> NodeStates:
        state = self.state
        return NodeStates(
            nodes=rows,
            cpu=state.cpu[rows],
            memory=state.memory[rows],
            whole=state.whole[rows],
            shared=state.shared[rows],
            mig=state.mig[rows],
        )

    # --- costs ------------------------------------------------------------------------------------

    def order(self, request: PodRequest, rows: IntArray) -> FloatArray:
        """How good a place each node of `rows` is for a pod of `request` (higher is better; see the
        module)."""
        self._sync()
        costs = self._costs.get(request)
        if costs is None:
            size = self.table.size
            costs = self._costs[request] = _Costs(
                np.zeros(size), np.full(size, -1, dtype=np.int64), np.zeros(size, dtype=np.int64)
            )
        stale = rows[costs.computed.take(rows) < self._refreshed.take(rows)]
        if stale.size:
            self._compute(request, stale, costs)
            costs.computed[stale] = self._refreshes
        self._last = request
        keys: FloatArray = costs.keys.take(rows)
        return keys

    def _compute(self, request: PodRequest, rows: IntArray, costs: _Costs) -> None:
        if rows.size > _FEW_ROWS:
            # Many nodes are alike and in the same state (a new cluster, full nodes): cost each state
            # once.
            first, inverse = self._distinct(rows)
            if first.size < rows.size:
                self._compute(request, first, costs)
                costs.keys[rows] = costs.keys.take(first).take(inverse)
                costs.gpu[rows] = costs.gpu.take(first).take(inverse)
                return
        before = self._rows(rows)
        after = after_placing(before, request, self.mig, self.table.scalar_index)
        if request.is_shared_gpu:
            portion = self._portion(request, rows)
            options, row, column = shared_options(after, portion)
            frag, (frag_after,) = self._frag_of(rows, options)
            cost = np.round((frag_after - frag.take(row)) / _COST_QUANTUM)
            opens = column == self.width - 1
            room = np.where(opens, 1.0, before.shared[row, np.where(opens, 0, column)])
            cheapest = cheapest_per_row(rows.size, row, cost, room)
            costs.gpu[rows] = np.where(opens[cheapest], _NEW_GPU, column[cheapest])
            cost = cost[cheapest] * (_COST_QUANTUM * request.gpu_devices)
            left = idle(after, self.mig_units) - portion * request.gpu_devices
        else:
            frag, (frag_after,) = self._frag_of(rows, after)
            cost = frag_after - frag
            left = idle(after, self.mig_units)
            cost = np.round(cost / _COST_QUANTUM) * _COST_QUANTUM
        keys = -cost
        keys -= _IDLE_GPU_WEIGHT * np.maximum(left, 0.0) / self._gpu_scale
        keys -= _IDLE_CPU_WEIGHT * np.maximum(after.cpu, 0.0) / self._cpu_scale
        costs.keys[rows] = keys

    def _distinct(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        """The first of each set of alike nodes of `rows` in the same state, and which set each is."""
        state = self.state
        key = np.column_stack(
            [
                self._kind.take(rows),
                state.cpu.take(rows),
                state.memory.take(rows),
                state.whole.take(rows),
                state.shared.take(rows, axis=0),
                state.mig.take(rows, axis=0),
            ]
        )
        _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        return rows.take(first), inverse.reshape(-1)

    def _portion(self, request: PodRequest, rows: IntArray) -> FloatArray:
        portion = self.table.portion_for(request, rows)
        return np.where(np.isfinite(portion), np.minimum(portion, 1.0), 1.0)

    # --- shared GPUs ------------------------------------------------------------------------------

    def choose_gpus(self, node: int, portion: float, devices: int) -> list[GpuGroup | None]:
        """The shared GPUs of `node` a pod of `portion` on `devices` devices strands least on; None: start
        sharing a free whole GPU.

        The session asks right after costing the pod's request on the candidates, so for one device the
        cheapest option it found is the answer while the node has not changed since; otherwise (several
        devices, or asked out of turn) the options are costed again: the cheapest first, ties to the GPU
        with the least room that fits (as gpupack), a new one last."""
        self._sync()
        groups = self.table.groups.get(node, [])
        last = self._costs.get(self._last) if self._last is not None else None
        if (
            devices == 1
            and last is not None
            and self._last is not None
            and self._last.is_shared_gpu
            and last.computed[node] >= self._refreshed[node]
            and abs(self.table.portion_on(self._last, node) - portion) <= EPSILON
        ):
            gpu = int(last.gpu[node])
            return [None if gpu == _NEW_GPU else groups[gpu]]
        row = np.array([node], dtype=np.int64)
        options, _, column = shared_options(self._rows(row), np.array([min(portion, 1.0)]))
        frag, (frag_after,) = self._frag_of(row, options)
        cost = np.round((frag_after - frag[0]) / _COST_QUANTUM)
        room = [groups[c].free_now if c < len(groups) else 1.0 for c in column.tolist()]
        ranked = sorted(zip(cost.tolist(), room, column.tolist(), strict=True))
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
