"""The node table and what the pods on each node hold, accounted as a build from scratch would.

Every pod that holds a node has a `Hold` (ours: a task's request and shared GPUs; another scheduler's:
its request). A changed hold marks its node dirty, and `account_nodes` accounts a dirty node's row again
from its pods in creation order, so floating-point sums are the same as from scratch. Other schedulers'
pods also take from the capacity fair share divides and hold host ports (`account_foreign`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from kai_scheduler.model.builder import build_node_table, reported_gpu_memory_range
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.cache.changes import Changes
from kai_scheduler.model.cache.indexes import discard
from kai_scheduler.model.jobs import HostPort
from kai_scheduler.model.nodes import NodeSpecInfo, NodeTable
from kai_scheduler.model.resources import PodRequest, Resources
from kai_scheduler.model.snapshot import PodState


class Hold(NamedTuple):
    """What one pod holds on a node, as the cache accounted it (ours: a task; else another scheduler's)."""

    node: int
    request: PodRequest
    releasing: bool
    gpu_groups: tuple[str, ...]
    ours: bool


class NodeAccounting:
    def __init__(self, changes: Changes) -> None:
        self._changes = changes
        self.table = build_node_table([])
        self._holds: dict[str, Hold] = {}  # pod key -> what it holds
        self._occupants: dict[int, set[str]] = {}  # node index -> keys of the pods that hold it
        self.ready_capacity = Resources()
        self.capacity = Resources()  # the ready nodes' capacity less what other schedulers' pods take
        self.min_gpu_memory = self.max_gpu_memory = 0.0
        self.foreign_host_ports: list[tuple[int, tuple[HostPort, ...]]] = []
        # The rows of the table accounted with a pod on them since it was made: every other row is as
        # clearing it would leave it, so only these are cleared before they are accounted again (a first
        # cycle's 5,000 empty nodes: none; the nodes its binds filled, after them: none either).
        self._held_rows: set[int] = set()

    def reset(self, table: NodeTable, *, keep_holds: bool = False) -> None:
        """A new node table, every row to account: nothing held yet, or with `keep_holds` what the pods
        held on the last one (its nodes, in the same order: `Changes.node_table`)."""
        self.table = table
        self._held_rows = set()
        self._sum_ready()
        self.min_gpu_memory, self.max_gpu_memory = reported_gpu_memory_range(table.gpu_memory_mib)
        if not keep_holds:
            self._holds, self._occupants = {}, {}
        self._changes.nodes = set(range(table.size))
        self._changes.foreign = True

    def respecify(self, specs: Mapping[int, NodeSpecInfo]) -> None:
        """Nodes (by row) with new static facts and the capacity they had (`NodeTable.respecify`): every
        row keeps what it holds, so none is accounted again; only a node turned ready or not ready
        changes the capacity fair share divides."""
        table = self.table
        readiness_moved = any(table.specs[node].ready != spec.ready for node, spec in specs.items())
        table.respecify(specs)
        if readiness_moved:
            self._sum_ready()
            self._changes.foreign = True  # the capacity less what other schedulers' pods take

    def _sum_ready(self) -> None:
        table = self.table
        ready = np.array([spec.ready for spec in table.specs], dtype=np.bool_)
        self.ready_capacity = Resources(
            gpu=table.gpu_units(ready),
            cpu=float(table.cap_cpu[ready].sum()),
            memory=float(table.cap_memory[ready].sum()),
        )

    def hold(self, key: str, hold: Hold) -> None:
        """Account `hold` for a pod (its node's row is accounted again on refresh if anything changed)."""
        previous = self._holds.get(key)
        if previous == hold:
            return
        if previous is not None:
            self.release(key, ours=previous.ours)
        self._holds[key] = hold
        self._occupants.setdefault(hold.node, set()).add(key)
        self._changes.nodes.add(hold.node)

    def release(self, key: str, *, ours: bool) -> None:
        """Forget what a pod holds, if the hold is of that kind (a pod may have turned from ours into another
        scheduler's, or back, before its job was made again)."""
        hold = self._holds.get(key)
        if hold is not None and hold.ours == ours:
            del self._holds[key]
            discard(self._occupants, hold.node, key)
            self._changes.nodes.add(hold.node)

    def account_nodes(self, pods: Mapping[str, PodState]) -> None:
        """Account the pods on each dirty node again, in creation order (as a build from scratch would)."""
        table, holds, occupants, held_rows = self.table, self._holds, self._occupants, self._held_rows
        for node in self._changes.nodes:
            if node in held_rows:
                table.clear_node(node)
            on_node = occupants.get(node)
            if not on_node:
                held_rows.discard(node)
                continue
            held_rows.add(node)
            for key in sorted(on_node, key=lambda key: pods[key].rank):
                hold = holds[key]
                table.hold(node, hold.request, releasing=hold.releasing)
                if hold.ours:
                    table.share_gpus(node, hold.request, key, hold.gpu_groups, releasing=hold.releasing)
        self._changes.nodes.clear()

    def account_foreign(
        self, pods: Mapping[str, PodState], foreign: Mapping[str, int], asks: PodAsks
    ) -> None:
        """What other schedulers' pods (`foreign`: key -> node index) take: capacity fair share cannot
        divide, and host ports."""
        capacity = self.ready_capacity.copy()
        ports: list[tuple[int, tuple[HostPort, ...]]] = []
        table = self.table
        for state in sorted((pods[key] for key in foreign), key=lambda p: p.rank):
            node = foreign[state.pod.key]
            request, _, host_ports = asks.of(state.pod)
            if host_ports:
                ports.append((node, host_ports))
            if table.specs[node].ready:  # a node that is not ready adds no capacity to take from
                capacity.sub(request.queue_resources(float(table.gpu_memory_mib[node])))
        self.capacity = capacity
        self.foreign_host_ports = ports
        self._changes.foreign = False
