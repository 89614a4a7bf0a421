"""numa: place pods where the kubelet's Topology Manager will align them, as KAI v0.17's plugin of that
name (`pkg/scheduler/plugins/numa/`). Off unless the configuration lists it.

Each node with a NodeResourceTopology has NUMA zones (`zones`) and a Topology Manager policy:

* Filter: on `single-numa-node` and `restricted` nodes, a pod the kubelet would refuse to admit
  (`evaluator`) is kept off. Only what the kubelet aligns counts: a Guaranteed pod's CPU (whole CPUs)
  and memory, and devices reported per zone whatever the pod's QoS (`requests`); resources named in the
  `ignoreList` argument (comma separated) are not aligned.
* Score: a pod that cares (Guaranteed, or asking for a device some zone reports) prefers the nodes where
  it spans the fewest zones, NUMA/span in its own band (`scoring.NUMA`): between `resourcetype` and
  `nodeavailability`. A node without zones is scored as spanning as many zones as the largest node has,
  a `none` node as spanning all of its own; `best-effort` nodes are scored and accounted, never filtered.
* Ledger: what each zone has free is its allocatable less what the pods on the node take there
  (`reconstructAvailable`, the default; false: the zones' `available` as the exporter last wrote it).
  A pod's zones are its observed placement, else the scheduler's prediction written at bind
  (`records`); a pod with neither takes nothing. Placing a pod in the session charges its zones, taking it
  off (a rollback, an eviction) gives them back, so a victim frees the zones its preemptor needs.
* A bound pod's decision carries its predicted zones (`Decision.numa_zones`): the simulator writes them
  on the pod, live mode on the BindRequest (`predictedNUMAZones`) for the binder to write on the pod.

A session whose cluster has no NodeResourceTopology registers nothing (the snapshot carries none).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import numpy as np

from kai_scheduler.api.numa_placement import NumaZonePlacement
from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.jobs import TaskInfo, TaskStatus
from kai_scheduler.model.nodes import BoolArray, FloatArray, IntArray, NodeTable
from kai_scheduler.model.snapshot import NumaInputs
from kai_scheduler.plugins.numa.evaluator import Allocation, solve, span
from kai_scheduler.plugins.numa.records import allocation_of, placement_record, zone_placements
from kai_scheduler.plugins.numa.requests import NumaRequests, is_qos_gated, numa_requests
from kai_scheduler.plugins.numa.zones import FILTERING, SCORED, NodeZones, node_zones
from kai_scheduler.plugins.scoring import NUMA

NAME: Final = "numa"
REJECTION: Final = "node(s) cannot NUMA-align the pod's resources under their Topology Manager policy"
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_ignore_list(arguments: dict[str, Any]) -> frozenset[str]:
    value = arguments.get("ignoreList", "")
    if not isinstance(value, str):
        raise ValueError(
            f"{NAME}.arguments.ignoreList: expected resource names separated by commas, got {value!r}"
        )
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def parse_reconstruct(arguments: dict[str, Any]) -> bool:
    """`reconstructAvailable`, true unless given false (a boolean, or a string as Go's ParseBool reads)."""
    value = arguments.get("reconstructAvailable", True)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in _TRUE | _FALSE:
        return value in _TRUE
    raise ValueError(f"{NAME}.arguments.reconstructAvailable: expected true or false, got {value!r}")


class NumaPlugin:
    name = NAME

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.ignore = parse_ignore_list(arguments)
        self.reconstruct = parse_reconstruct(arguments)
        self.ledger: NumaLedger | None = None

    def on_session_open(self, session: Session) -> None:
        inputs = session.snapshot.numa
        self.ledger = None
        if inputs is None:
            return
        ledger = NumaLedger.open(session.snapshot.nodes, session.snapshot.tasks, inputs, self)
        if ledger is None:
            return
        self.ledger = ledger
        points = session.points
        if ledger.filtering:
            points.task_predicates.append(NamedPredicate(NAME, REJECTION, ledger.nodes_passing))
        points.node_scorers.append(ledger.scores)
        points.on_allocate.append(ledger.allocated)
        points.on_deallocate.append(ledger.deallocated)
        points.stays_put.append(ledger.stays_put)

    def on_session_close(self, session: Session) -> None:
        """Bind decisions carry their pods' predicted zones."""
        ledger, self.ledger = self.ledger, None
        if ledger is None or not ledger.placed:
            return
        names = session.snapshot.nodes.names
        decisions = session.decisions
        for index, decision in enumerate(decisions):
            if decision.type != "bind":
                continue
            placed = ledger.placed.get(decision.pod)
            if placed is not None and names[placed[0]] == decision.node and placed[1]:
                decisions[index] = replace(decision, numa_zones=placed[1])


class NumaLedger:
    """The zones of one session's nodes, as its placements and evictions change them."""

    def __init__(self, nodes: NodeTable, inputs: NumaInputs, plugin: NumaPlugin) -> None:
        self.inputs = inputs
        self.ignore = plugin.ignore
        self.by_node: dict[int, NodeZones] = {}
        for name, topology in inputs.topologies.items():
            index = nodes.index.get(name)
            zones = node_zones(topology) if index is not None else None
            if index is not None and zones is not None:
                self.by_node[index] = zones
        self.filtering = {i: z for i, z in self.by_node.items() if z.policy in FILTERING}
        self.scored = {i: z for i, z in self.by_node.items() if z.policy in SCORED}
        # The devices (resources other than CPU, memory and hugepages) some scored node reports per zone.
        self.devices = (
            frozenset(name for z in self.scored.values() for name in z.aware if not is_qos_gated(name))
            - self.ignore
        )
        max_zones = max((len(z.zones) for z in self.by_node.values()), default=0)
        # A node's score when the pod's span there is not evaluated: a node without zones as the largest
        # node's zone count, one whose zones are not scored (policy none) or not the pod's as all of its own.
        self.base = np.full(nodes.size, NUMA / max_zones if max_zones else 0.0)
        for index, zones in self.by_node.items():
            self.base[index] = NUMA / len(zones.zones)
        self.everywhere = np.ones(nodes.size, dtype=np.bool_)
        self.everywhere.flags.writeable = False
        self._requests: dict[str, NumaRequests] = {}
        self._aligned_by: dict[tuple[bool, tuple[str, ...]], tuple[str, ...]] = {}
        # Placements: a running pod's from its record; a pod placed in this session (node, zones).
        self.recorded: dict[str, Allocation] = {}
        self.placed: dict[str, tuple[int, tuple[NumaZonePlacement, ...]]] = {}
        self._charged: dict[str, Allocation] = {}
        self._released: dict[str, Allocation] = {}  # what a pod held when it was last taken off
        # Answers per kind of pod (`NumaRequests.signature`) for every node, each node's as of its
        # version: a placement or eviction changes one node, and only its answers are asked again.
        self.node_versions = np.zeros(nodes.size, dtype=np.int64)
        self.filtering_rows = np.array(sorted(self.filtering), dtype=np.int64)
        self.scored_rows = np.array(sorted(self.scored), dtype=np.int64)
        self._passing: dict[tuple[object, ...], tuple[BoolArray, IntArray]] = {}
        self._scores: dict[tuple[object, ...], tuple[FloatArray, IntArray]] = {}

    @classmethod
    def open(
        cls, nodes: NodeTable, tasks: dict[str, TaskInfo], inputs: NumaInputs, plugin: NumaPlugin
    ) -> NumaLedger | None:
        ledger = cls(nodes, inputs, plugin)
        if not ledger.by_node:
            return None
        ledger._account_pods(nodes, tasks, reconstruct=plugin.reconstruct)
        return ledger

    def _account_pods(self, nodes: NodeTable, tasks: dict[str, TaskInfo], *, reconstruct: bool) -> None:
        """Each running pod's recorded zones; with `reconstruct`, the zones' room made again from them."""
        if reconstruct:
            for zones in self.scored.values():
                for zone in zones.zones:
                    zone.available = dict(zone.allocatable)
        for key, state in self.inputs.pods.items():
            index = nodes.index.get(state.node_name) if state.node_name else None
            on_node = self.scored.get(index) if index is not None else None
            if on_node is None or state.phase in ("Succeeded", "Failed") or state.terminating:
                continue
            zones = on_node
            record = placement_record(state.pod.metadata.annotations)
            allocation = allocation_of(record, zones) if record else None
            if allocation is None:
                continue
            if reconstruct:
                _charge(zones, allocation, -1.0)
            task = tasks.get(key)
            if (
                task is not None
                and task.status is TaskStatus.RUNNING
                and self._accounts(self.requests(task), zones)
            ):
                self.recorded[key] = allocation

    # --- what a pod asks of the zones ----------------------------------------------------------------

    def requests(self, task: TaskInfo) -> NumaRequests | None:
        cached = self._requests.get(task.key)
        if cached is None:
            state = self.inputs.pods.get(task.key)
            if state is None:
                return None
            cached = self._requests[task.key] = numa_requests(state.pod)
        return cached

    def _asks_for_device(self, requests: NumaRequests, zones: NodeZones) -> bool:
        return any(
            requests.total.get(name, 0.0) > 0
            for name in zones.aware
            if not is_qos_gated(name) and name not in self.ignore
        )

    def _accounts(self, requests: NumaRequests | None, zones: NodeZones) -> bool:
        """Whether the pod is aligned on these zones at all (KAI's shouldScore / shouldFilter)."""
        return requests is not None and (requests.guaranteed or self._asks_for_device(requests, zones))

    def _aligned(self, requests: NumaRequests, zones: NodeZones) -> tuple[str, ...]:
        key = (requests.guaranteed, zones.aware)
        aligned = self._aligned_by.get(key)
        if aligned is None:
            aligned = self._aligned_by[key] = tuple(
                name
                for name in zones.aware
                if name not in self.ignore and (requests.guaranteed or not is_qos_gated(name))
            )
        return aligned

    def evaluate(self, task: TaskInfo, zones: NodeZones) -> Allocation | None:
        """The pod's predicted zones on the node (empty: none aligned), None: the kubelet would refuse."""
        requests = self.requests(task)
        if requests is None:
            return {}
        concurrent, serial = requests.for_scope(zones.scope)
        allocation: Allocation = {}
        return (
            allocation
            if solve(zones, self._aligned(requests, zones), concurrent, serial, allocation)
            else None
        )

    # --- the extension points --------------------------------------------------------------------------

    def nodes_passing(self, task: TaskInfo) -> BoolArray:
        requests = self.requests(task)
        if requests is None or not (requests.guaranteed or requests.total.keys() & self.devices):
            return self.everywhere
        entry = self._passing.get(requests.signature)
        if entry is None:
            passing, seen = self.everywhere.copy(), np.full(self.node_versions.size, -1, dtype=np.int64)
        else:
            passing, seen = entry
        stale = self._stale(self.filtering_rows, seen)
        if stale.size:
            passing = passing.copy()  # a caller may still hold the earlier answer
            for index in stale.tolist():
                zones = self.filtering[index]
                passing[index] = not self._accounts(requests, zones) or self._solves(requests, zones)
            seen = seen.copy()
            seen[stale] = self.node_versions[stale]
            self._passing[requests.signature] = (passing, seen)
        return passing

    def _stale(self, rows: IntArray, seen: IntArray) -> IntArray:
        """The nodes of `rows` whose zones changed since an answer was made (all: never made)."""
        stale: IntArray = rows[self.node_versions[rows] != seen[rows]]
        return stale

    def _solves(self, requests: NumaRequests, zones: NodeZones) -> bool:
        concurrent, serial = requests.for_scope(zones.scope)
        return solve(zones, self._aligned(requests, zones), concurrent, serial)

    def scores(self, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        requests = self.requests(task)
        if requests is None or not (requests.guaranteed or requests.total.keys() & self.devices):
            return 0.0
        entry = self._scores.get(requests.signature)
        if entry is None:
            every, seen = self.base.copy(), np.full(self.node_versions.size, -1, dtype=np.int64)
        else:
            every, seen = entry
        stale = self._stale(self.scored_rows, seen)
        if stale.size:
            every, seen = every.copy(), seen.copy()
            for index in stale.tolist():
                zones = self.scored[index]
                if self._accounts(requests, zones):
                    allocation = self.evaluate(task, zones)
                    every[index] = 0.0 if allocation is None else NUMA / span(allocation)
            seen[stale] = self.node_versions[stale]
            self._scores[requests.signature] = (every, seen)
        scores: FloatArray = every.take(rows)
        return scores

    def allocated(self, task: TaskInfo) -> None:
        zones = self.scored.get(task.node)
        if zones is None:
            return
        if task.status is TaskStatus.RUNNING:  # an eviction taken back: the pod's zones as recorded
            allocation = self.recorded.get(task.key)
        elif self._accounts(self.requests(task), zones):
            allocation = self.evaluate(task, zones) or {}
            self.placed[task.key] = (task.node, zone_placements(allocation, zones))
        else:
            allocation = None
        if allocation:
            _charge(zones, allocation, -1.0)
            self._charged[task.key] = allocation
            self.node_versions[task.node] += 1

    def deallocated(self, task: TaskInfo) -> None:
        zones = self.scored.get(task.node)
        allocation = self._charged.pop(task.key, None)
        if allocation is None and task.status is TaskStatus.RUNNING:
            allocation = self.recorded.get(task.key)
        if zones is not None and allocation:
            _charge(zones, allocation, 1.0)
            self.node_versions[task.node] += 1
            self._released[task.key] = allocation

    def stays_put(self, task: TaskInfo, node: int) -> bool:
        """Whether a pod evicted and placed back on its node would take the zones it held (KAI compares
        the fresh placement with the old one): if another pod took them meanwhile, it moves instead, so
        that its old zones are not charged twice."""
        zones = self.scored.get(node)
        held = self._released.get(task.key)
        if zones is None or not held:
            return True
        return self.evaluate(task, zones) == held


def _charge(zones: NodeZones, allocation: Allocation, sign: float) -> None:
    for index, amounts in allocation.items():
        available = zones.zones[index].available
        for name, value in amounts.items():
            available[name] = available.get(name, 0.0) + sign * value
