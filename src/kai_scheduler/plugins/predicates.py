"""predicates: which nodes a pod may run on at all.

Static filters (cordoned nodes, nodeSelector and required node affinity, taints) depend only on a pod's
placement constraints and the nodes, so the session evaluates them once per distinct placement. The
GPU-kind rules (MIG modes, shared GPUs, GPU memory) depend only on the request. Host ports and
inter-pod affinity depend on where other pods are, so they are evaluated per pod against indexes kept
live through the session. Preferred node affinity and PreferNoSchedule taints add node scores. KAI's
pre-filters (missing ConfigMaps, unusable claims: `storage_predicates.py`; a request above the pool's
largest node: `max_node_resources.py`) refuse a pod on every node; its claims' volumes restrict nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import compress
from operator import is_not
from typing import Any

import numpy as np

from kai_scheduler.api.objects import Toleration
from kai_scheduler.framework import alike_nodes
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.same_object import Same
from kai_scheduler.framework.session import NamedPredicate, Session, StaticPredicate
from kai_scheduler.framework.static_masks import NodeFlags, RowPredicate
from kai_scheduler.model.jobs import Placement, TaskInfo
from kai_scheduler.model.matching import (
    node_affinity_preferred_score,
    node_affinity_required_matches,
    prefer_no_schedule_count,
    untolerated_taint,
)
from kai_scheduler.model.nodes import (
    MIG_MIXED,
    MIG_SINGLE,
    BoolArray,
    FloatArray,
    IntArray,
    NodeSpecInfo,
    NodeTable,
)
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.plugins.max_node_resources import MaxNodeResources
from kai_scheduler.plugins.node_ports import node_ports_predicate
from kai_scheduler.plugins.pod_affinity import shared_index
from kai_scheduler.plugins.scoring import K8S_PLUGINS_SCORE
from kai_scheduler.plugins.storage_predicates import StorageChecks


def _node_flags(mask: BoolArray) -> StaticPredicate:
    """A static predicate that does not depend on the pod (cordon, readiness): computed once."""
    return NodeFlags(mask)


NamedFilter = tuple[str, str, StaticPredicate]
TaintKey = tuple[tuple[str, str, str], ...]


def _not_cordoned(spec: NodeSpecInfo) -> bool:
    return not spec.unschedulable


# Asked of every node as a session opens on a new node table (`NodeFacts.of`), and most nodes have no
# taint: an empty list is answered without making a generator (its function object and frame cost about as
# much as the rest of a node's facts).
def _taint_key(taints: list[Any]) -> TaintKey:
    if not taints:
        return ()
    return tuple((t.key, t.value, t.effect) for t in taints)


def _soft(taints: list[Any]) -> bool:
    if not taints:
        return False
    return any(t.effect == "PreferNoSchedule" for t in taints)


@dataclass(frozen=True, eq=False)
class NodeFacts:
    """What the plugin derives from the nodes' static facts alone (`NodeTable.specs`): the filters for
    cordon, readiness, node affinity and taints, and each node's taints."""

    specs: list[NodeSpecInfo]
    schedulable: BoolArray
    ready: BoolArray
    labels: _LabelIndex
    taints: list[list[Any]]
    # Nodes share a few distinct taint lists (most have none): each is checked once per placement. Every
    # node's list as a number (`taint_kinds`), and each number's list (a number no node has any more may
    # stay: it is checked, and read by no node).
    taint_numbers: dict[TaintKey, int]
    taint_kinds: IntArray
    soft_count: int  # nodes with a PreferNoSchedule taint
    # A list of each number's (`_taint_key`: any list of the number answers alike), carried through a
    # respecify so that the taint filter is not a walk over every node (0.2 ms at 5,000 nodes).
    taint_examples: dict[int, list[Any]]

    @property
    def soft_taints(self) -> bool:
        return self.soft_count > 0

    @cached_property
    def filters(self) -> list[NamedFilter]:
        return [
            ("unschedulable", "node(s) were unschedulable", _node_flags(self.schedulable)),
            ("notready", "node(s) were not ready", _node_flags(self.ready)),
            (
                "nodeaffinity",
                "node(s) didn't match Pod's node affinity/selector",
                _AffinityFilter(self.labels),
            ),
            ("taints", "node(s) had untolerated taint", _TaintFilter(self.taint_examples, self.taint_kinds)),
        ]

    @classmethod
    def of(cls, specs: list[NodeSpecInfo]) -> NodeFacts:
        taints = [list(spec.taints) for spec in specs]
        numbers: dict[TaintKey, int] = {}
        kinds = np.array([numbers.setdefault(_taint_key(t), len(numbers)) for t in taints], dtype=np.int64)
        return cls(
            specs,
            np.array([_not_cordoned(spec) for spec in specs], dtype=np.bool_),
            np.array([spec.ready for spec in specs], dtype=np.bool_),
            _LabelIndex(specs),
            taints,
            numbers,
            kinds,
            sum(map(_soft, filter(None, taints))),  # (of the nodes with a taint, a walk in C)
            {kind: node_taints for node_taints, kind in zip(taints, kinds.tolist(), strict=True)},
        )

    def alike(self, other: NodeFacts) -> bool:
        """Whether these facts answer every filter as `other`, of the same specs, does (the taint lists'
        numbers and the label keys asked so far may differ)."""
        examples = self.taint_examples
        return (
            np.array_equal(self.schedulable, other.schedulable)
            and np.array_equal(self.ready, other.ready)
            and self.taints == other.taints
            and self.soft_count == other.soft_count
            and all(
                _taint_key(examples[kind]) == _taint_key(node_taints)
                for kind, node_taints in zip(self.taint_kinds.tolist(), self.taints, strict=True)
            )
            and self.labels.alike(other.labels)
        )

    def respecified(self, specs: list[NodeSpecInfo]) -> NodeFacts | None:
        """The facts of `specs`, these facts' nodes with a few of them given new static facts
        (`NodeTable.respecify`: a cordon, a label, a taint), worked out for those rows alone (every fact is
        one row's spec's alone); None when the count differs or too many rows do (then `of` is cheaper)."""
        old = self.specs
        if len(specs) != len(old):
            return None
        rows = list(compress(range(len(specs)), map(is_not, old, specs)))  # (a walk in C: 0.3 -> 0.1 ms)
        if len(rows) * 16 > len(specs):
            return None
        schedulable, ready, kinds = self.schedulable.copy(), self.ready.copy(), self.taint_kinds.copy()
        taints, numbers, soft_count = list(self.taints), dict(self.taint_numbers), self.soft_count
        examples = dict(self.taint_examples)
        for row in rows:
            spec = specs[row]
            schedulable[row], ready[row] = _not_cordoned(spec), spec.ready
            soft_count -= _soft(taints[row])
            taints[row] = list(spec.taints)
            soft_count += _soft(taints[row])
            kind = kinds[row] = numbers.setdefault(_taint_key(taints[row]), len(numbers))
            examples.setdefault(kind, taints[row])
        labels = self.labels.respecified(specs, rows)
        return NodeFacts(specs, schedulable, ready, labels, taints, numbers, kinds, soft_count, examples)


# The facts of the last few node tables, by their specs (one list per table: a change to any node builds a
# new table). Every cycle of a cluster whose nodes do not change opens a session on the same nodes, and
# these are walks over all of them (a tenth of a small cycle, or more); a cordon makes a new list with one
# node's facts replaced, whose facts are the last ones' with that row worked out again.
_FACTS_KEPT = 8
_facts: dict[int, NodeFacts] = {}


def _node_facts(specs: list[NodeSpecInfo], *, verify: bool = False) -> NodeFacts:
    """The facts of `specs`, kept or carried from the last ones when it can; with `verify`
    (`KAI_SCHEDULER_VERIFY_REUSE`) those are compared with the facts made afresh, a difference raising
    `CarriedMismatch`."""
    known = _facts.get(id(specs))
    if known is not None and known.specs is specs:
        return _verified(known) if verify else known
    last = next(reversed(_facts.values()), None)
    carried = last.respecified(specs) if last is not None else None
    if len(_facts) >= _FACTS_KEPT:
        del _facts[next(iter(_facts))]  # the oldest
    _facts.pop(id(specs), None)  # (a list gone, whose id a new one took): the newest goes last
    if carried is not None and verify:
        _verified(carried)
    facts = _facts[id(specs)] = carried if carried is not None else NodeFacts.of(specs)
    return facts


def _verified(facts: NodeFacts) -> NodeFacts:
    if not facts.alike(NodeFacts.of(facts.specs)):
        raise CarriedMismatch(f"the node facts kept or carried for {len(facts.specs)} nodes are not theirs")
    return facts


def affinity_nodes(placement: Placement, nodes: NodeTable) -> BoolArray:
    return np.array(
        [
            node_affinity_required_matches(
                placement.affinity, placement.node_selector, spec.labels, spec.name
            )
            for spec in nodes.specs
        ],
        dtype=np.bool_,
    )


class _LabelIndex:
    """Nodes carrying a label with a given value: one walk over the nodes per label key asked for, then
    a plain nodeSelector is a few ANDs instead of a walk over every node's labels per placement, and a
    value's rows are a slice of the key's rows sorted by value (`rows_having`)."""

    def __init__(self, specs: list[NodeSpecInfo]) -> None:
        self._specs = specs
        # Label key -> (each node's value as a number, value -> that number); -1: no such label.
        self._keys: dict[str, tuple[IntArray, dict[str, int]]] = {}
        # Label key -> (the rows in order of their value's number, stably: each value's rows ascending;
        # where each number's rows start in it, and where the last one's end).
        self._sorted: dict[str, tuple[IntArray, list[int]]] = {}

    def _numbers(self, key: str) -> tuple[IntArray, dict[str, int]]:
        found = self._keys.get(key)
        if found is None:
            numbers: dict[str, int] = {}
            ids = [
                numbers.setdefault(spec.labels[key], len(numbers)) if key in spec.labels else -1
                for spec in self._specs
            ]
            found = self._keys[key] = (np.array(ids, dtype=np.int64), numbers)
        return found

    def having(self, key: str, value: str) -> BoolArray:
        ids_of_nodes, numbers = self._numbers(key)
        number = numbers.get(value)
        if number is None:
            return np.zeros(len(self._specs), dtype=np.bool_)
        return np.asarray(ids_of_nodes == number, dtype=np.bool_)

    def having_at(self, key: str, value: str, rows: IntArray) -> BoolArray:
        """`having(key, value)[rows]`."""
        ids_of_nodes, numbers = self._numbers(key)
        number = numbers.get(value)
        if number is None:
            return np.zeros(rows.size, dtype=np.bool_)
        return np.asarray(ids_of_nodes[rows] == number, dtype=np.bool_)

    def rows_having(self, key: str, value: str) -> IntArray:
        """`having(key, value).nonzero()[0]` (read-only): the key's rows sorted once, each value's a slice."""
        ids_of_nodes, numbers = self._numbers(key)
        number = numbers.get(value)
        by_value = self._sorted.get(key)
        if by_value is None:
            order = np.argsort(ids_of_nodes, kind="stable")
            order.flags.writeable = False
            starts = np.searchsorted(ids_of_nodes[order], np.arange(len(numbers) + 1)).tolist()
            by_value = self._sorted[key] = (order, starts)
        order, starts = by_value
        if number is None:
            return order[:0]
        return order[starts[number] : starts[number + 1]]

    def alike(self, other: _LabelIndex) -> bool:
        """Whether every label value asked of this index so far selects the nodes it does in `other`."""
        return all(
            np.array_equal(self.having(key, value), other.having(key, value))
            for key, (_, numbers) in self._keys.items()
            for value in numbers
        )

    def respecified(self, specs: list[NodeSpecInfo], rows: list[int]) -> _LabelIndex:
        """The index of `specs`, which differ from this one's at `rows` only: the label keys asked so far
        carried, those rows' values read again (a value no node has any more keeps its number, which no
        node then has); the rows sorted by value are sorted again when first asked."""
        index = _LabelIndex(specs)
        for key, (ids, numbers) in self._keys.items():
            ids, numbers = ids.copy(), dict(numbers)
            for row in rows:
                labels = specs[row].labels
                ids[row] = numbers.setdefault(labels[key], len(numbers)) if key in labels else -1
            index._keys[key] = (ids, numbers)
        return index


def _has_required_node_affinity(placement: Placement) -> bool:
    affinity = placement.affinity
    return (
        affinity is not None
        and affinity.node_affinity is not None
        and affinity.node_affinity.required_during_scheduling_ignored_during_execution is not None
    )


def _has_preferred_node_affinity(placement: Placement) -> bool:
    affinity = placement.affinity
    return (
        affinity is not None
        and affinity.node_affinity is not None
        and bool(affinity.node_affinity.preferred_during_scheduling_ignored_during_execution)
    )


class _AffinityFilter(RowPredicate):
    """Nodes matching a placement's required node affinity and node selector; a plain node selector (the
    common case) read from the label index, its rows among the few of a value (`_LabelIndex.rows_having`)."""

    __slots__ = ("_labels",)

    def __init__(self, labels: _LabelIndex) -> None:
        self._labels = labels

    def __call__(self, placement: Placement, nodes: NodeTable) -> BoolArray:
        if _has_required_node_affinity(placement):
            return affinity_nodes(placement, nodes)
        # Only the nodeSelector (every pair must match), the common case.
        ok = np.ones(nodes.size, dtype=np.bool_)
        for key, value in placement.node_selector.items():
            ok &= self._labels.having(key, value)
        return ok

    def at_rows(self, placement: Placement, nodes: NodeTable, rows: IntArray) -> BoolArray:
        if _has_required_node_affinity(placement):
            specs, affinity, selector = nodes.specs, placement.affinity, placement.node_selector
            return np.array(
                [
                    node_affinity_required_matches(affinity, selector, specs[row].labels, specs[row].name)
                    for row in rows.tolist()
                ],
                dtype=np.bool_,
            )
        ok = np.ones(rows.size, dtype=np.bool_)
        for key, value in placement.node_selector.items():
            ok &= self._labels.having_at(key, value, rows)
        return ok

    def selected_rows(self, placement: Placement, nodes: NodeTable) -> IntArray | None:
        selector = placement.node_selector
        if not selector or _has_required_node_affinity(placement):
            return None
        pairs = iter(selector.items())
        rows = self._labels.rows_having(*next(pairs))
        for key, value in pairs:
            rows = rows[self._labels.having_at(key, value, rows)]
        return rows


class _TaintFilter(RowPredicate):
    """Nodes whose taints (each node's list as a number, `kinds`; a list of each number's, `examples`) the
    placement tolerates: each distinct list checked once per distinct tolerations (most placements have
    none; a first cycle's placements are some hundreds, one per rack a pod selects)."""

    __slots__ = ("_by_tolerations", "_examples", "_kinds", "_size")

    def __init__(self, examples: dict[int, list[Any]], kinds: IntArray) -> None:
        self._examples, self._kinds = examples, kinds
        self._size = int(kinds.max(initial=-1)) + 1
        self._by_tolerations: dict[tuple[Toleration, ...], BoolArray] = {}

    def _tolerated(self, placement: Placement) -> BoolArray:
        """By taint list number, whether the placement tolerates the list."""
        tolerations = placement.tolerations
        tolerated = self._by_tolerations.get(tolerations)
        if tolerated is None:
            examples = self._examples
            tolerated = self._by_tolerations[tolerations] = np.array(
                [
                    kind in examples and untolerated_taint(examples[kind], tolerations) is None
                    for kind in range(self._size)
                ],
                dtype=np.bool_,
            )
        return tolerated

    def __call__(self, placement: Placement, nodes: NodeTable) -> BoolArray:
        return np.asarray(self._tolerated(placement)[self._kinds], dtype=np.bool_)

    def at_rows(self, placement: Placement, nodes: NodeTable, rows: IntArray) -> BoolArray:
        return np.asarray(self._tolerated(placement)[self._kinds[rows]], dtype=np.bool_)


def _gpu_kind_of(request: PodRequest) -> tuple[bool, ...]:
    """What `gpu_kind_nodes` reads of a request."""
    return (
        bool(request.mig_instances),
        request.uses_gpu,
        request.is_shared_gpu,
        bool(request.gpu_memory_mib),
    )


def gpu_kind_nodes(nodes: NodeTable, request: PodRequest) -> BoolArray:
    """KAI's GPU-type rules: `mixed` MIG nodes take only MIG-instance pods; `single` MIG nodes take no
    fractions; gpu-memory pods need nodes whose GPU memory is known (`_gpu_kind_of`: all it reads)."""
    ok = np.ones(nodes.size, dtype=np.bool_)
    if not request.mig_instances:
        ok &= nodes.mig_mode != MIG_MIXED if request.uses_gpu else ok
    if request.is_shared_gpu:
        ok &= nodes.mig_mode != MIG_SINGLE
        if request.gpu_memory_mib:
            ok &= nodes.gpu_memory_mib > 0
    return ok


class PredicatesPlugin:
    name = "predicates"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        nodes = session.snapshot.nodes
        facts = _node_facts(nodes.specs, verify=session.verify_carried)
        taints = facts.taints
        points = session.points
        points.static_predicates.extend(facts.filters)
        storage = StorageChecks(session.snapshot.storage)
        points.static_predicates.extend(storage.node_filters())
        largest = MaxNodeResources(nodes, session.snapshot.node_pool)

        def pre_filter(task: TaskInfo) -> str | None:
            # KAI's pre-filters: ConfigMaps, claims, then MaxNodePoolResources.
            return storage.pre_filter(task) or largest.pre_filter(task)

        points.pre_predicates.append(pre_filter)
        # (The storage objects are one object until they change.)
        reads = (Same(session.snapshot.storage), *largest.reads())
        points.pre_predicate_reads[pre_filter] = lambda: reads
        # Every one of them is about the pod and the pool, never about what runs where.
        points.victim_invariant_pre_predicates.append(pre_filter)
        # Whether it refuses reads the pod's placement (ConfigMaps, claims) and request (the largest node).
        points.shape_pre_predicates.add(pre_filter)

        # By request (equal requests: equal shapes), whose hash is kept: asked for every pod placed; and
        # by what `gpu_kind_nodes` reads of a request, so that the requests of a backlog share a few arrays
        # (79 requests, 3 arrays in a first cycle at 5,000 nodes: each array costs a pass over the nodes'
        # GPU kinds, and is found to pass every node once, `Session._narrowing`).
        kind_cache: dict[PodRequest, BoolArray] = {}
        by_kind: dict[tuple[bool, ...], BoolArray] = {}

        def gpu_kind(task: TaskInfo) -> BoolArray:
            request = task.request
            mask = kind_cache.get(request)
            if mask is None:
                kind = _gpu_kind_of(request)
                mask = by_kind.get(kind)
                if mask is None:
                    mask = by_kind[kind] = gpu_kind_nodes(nodes, request)
                    mask.flags.writeable = False  # handed out to every pod of the kind
                kind_cache[request] = mask
            return mask

        points.task_predicates.append(
            NamedPredicate(
                "gpukind",
                "node(s) didn't offer the kind of GPU the pod asks for",
                gpu_kind,
                reads_shape_alone=True,  # the request and the nodes' GPU kinds
            )
        )
        node_ports = node_ports_predicate(session)
        if node_ports is not None:
            points.task_predicates.append(node_ports)
        index = shared_index(session)
        points.task_predicates.append(
            NamedPredicate(
                "podaffinity",
                "node(s) didn't match pod affinity/anti-affinity rules",
                index.allowed_nodes,
                depends_on=index.what_matters,
                depends_on_reads=index.what_matters_reads,
            )
        )

        preference_cache: dict[str, FloatArray] = {}
        soft_taints = facts.soft_taints

        def indifferent(task: TaskInfo) -> bool:
            """Nothing to prefer or avoid: every node scores 0 (else nodes score by labels and taints)."""
            return not soft_taints and not _has_preferred_node_affinity(task.placement)

        def preferences(task: TaskInfo, rows: IntArray) -> FloatArray | float:
            if indifferent(task):
                return 0.0
            placement = task.placement
            if placement.key not in preference_cache:
                preference_cache[placement.key] = self._preference_scores(placement, nodes, taints)
            return preference_cache[placement.key][rows]

        alike_nodes.add_scorer(points, preferences, indifferent, constant_for=indifferent)

    @staticmethod
    def _preference_scores(placement: Placement, nodes: NodeTable, taints: list[list[Any]]) -> FloatArray:
        """Preferred node affinity minus PreferNoSchedule taints, each normalised to 0..1 across nodes."""
        affinity = np.array(
            [node_affinity_preferred_score(placement.affinity, s.labels, s.name) for s in nodes.specs],
            dtype=float,
        )
        avoided = np.array([prefer_no_schedule_count(t, placement.tolerations) for t in taints], dtype=float)
        score = np.zeros(nodes.size)
        if affinity.max(initial=0) > 0:
            score += affinity / affinity.max()
        if avoided.max(initial=0) > 0:
            score += 1.0 - avoided / avoided.max()
        return score * K8S_PLUGINS_SCORE

    def on_session_close(self, session: Session) -> None:
        return None
