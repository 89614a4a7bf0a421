"""topology: keep a job's pods within one domain of a Topology (KAI's topology-aware scheduling).

A PodGroup (or one of its sub-groups) may name a Topology and a `requiredTopologyLevel` (all its pods in
one domain of that level, or none placed) and/or a `preferredTopologyLevel` (one domain of that level if
possible). A non-leaf sub-group's pods are those of all its descendants: e.g. sub-group "workers" in one
zone and each of its leaf segments in one rack (`actions.placement` descends the tree of sub-groups).
For each allocation attempt the plugin offers node subsets, narrowest first: the domains of the
preferred level, then of each wider level up to the required one (or the whole topology when nothing is
required). At each level only domains whose free (or releasing) resources could hold the pods are
offered, the fullest first so that jobs pack into domains and leave others whole. Pods that already run
(the job's, or the sub-group's descendants') pin it to their domain of the required level, and are
offered first at the other levels (a growing job stays with its pods when it can). Nodes outside the
topology (missing a level's label) are never offered.

When no single domain of the preferred level can hold the pods and a wider subset is used, node scores
(up to `PREFERRED_DOMAIN_SCORE`, as KAI's topology score) keep them in as few preferred domains as
possible: a node scores by the share of the pods placed so far that sit in its preferred domain, and a
little by how much room its domain has (so pods start, and go on once a domain is full, where most fit).

A job naming a Topology that does not exist, or a level the Topology does not have (in its own
constraint or any sub-group's), waits with a reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from kai_scheduler.framework.session import NodeSubsets, Session
from kai_scheduler.model.jobs import (
    ACTIVE_ALLOCATED,
    JobInfo,
    PodSet,
    SubGroupSet,
    TaskInfo,
    TaskStatus,
    TopologyConstraint,
)
from kai_scheduler.model.nodes import BoolArray, FloatArray, NodeTable
from kai_scheduler.model.resources import EPSILON
from kai_scheduler.model.topology import IntArray, TopologyTree

ROOT = -1  # the level "above" the widest: the whole topology
# Node scores that keep pods in their preferred domain: above binpack/spread and GPU sharing order, below
# Kubernetes' affinity scores and the nominated node (see plugins/scoring.py).
PREFERRED_DOMAIN_SCORE = 100_000.0
ROOMIEST_DOMAIN_SCORE = 500.0


class TopologyPlugin:
    name = "topology"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        snapshot = session.snapshot
        topologies = snapshot.topologies
        # Only the jobs with a topology constraint, as the snapshot lists them (most clusters have none).
        constrained = [snapshot.jobs[key] for key in snapshot.topology_jobs]
        for job in constrained:
            if job.invalid_reason is None:
                job.invalid_reason = _problem(job, topologies)
        if not constrained:
            return  # nothing to confine: placements cost nothing extra
        session.points.node_subsets.append(partial(node_subsets, session))
        if any(_has_preferred(job) for job in constrained):
            session.points.node_scorers.append(partial(preferred_domain_scores, session))

    def on_session_close(self, session: Session) -> None:
        return None


def _has_preferred(job: JobInfo) -> bool:
    return any(c is not None and c.preferred for c in job.topology_constraints())


def _innermost_preferred(task: TaskInfo) -> tuple[TopologyConstraint, list[TaskInfo]] | None:
    """The narrowest constraint with a preferred level that covers the pod (its pod set's, then its
    parent sub-groups', then the job's), and the pods it covers."""
    group: PodSet | SubGroupSet | None = task.podset
    while group is not None:
        if group.topology is not None and group.topology.preferred:
            return group.topology, group.tasks
        group = group.parent
    job = task.job
    if job.topology is not None and job.topology.preferred:
        return job.topology, job.tasks
    return None


def preferred_domain_scores(session: Session, task: TaskInfo, rows: IntArray) -> FloatArray | float:
    """Scores for the candidate nodes `rows`: the domain the pod's group already occupies most, then the
    roomiest domain (room counted over every node of the domain, candidates or not)."""
    nodes = session.snapshot.nodes
    scores = np.zeros(nodes.size)
    found = _innermost_preferred(task)
    if found is None:
        return 0.0
    constraint, covered = found
    tree = session.snapshot.topologies.get(constraint.topology)
    level = tree.level_of(constraint.preferred) if tree is not None else None
    if tree is None or level is None:
        return 0.0
    ids = tree.node_domain[level]
    count = len(tree.domains[level])
    inside = ids >= 0
    placed = [t.node for t in covered if t.status in ACTIVE_ALLOCATED and t.node >= 0 and ids[t.node] >= 0]
    room = np.bincount(ids[inside], weights=(nodes.free_gpus + nodes.rel_gpus)[inside], minlength=count)
    most = float(room.max()) if count else 0.0
    per_domain: FloatArray = np.asarray(
        ROOMIEST_DOMAIN_SCORE * room / most if most > 0 else np.zeros(count), dtype=np.float64
    )
    if placed:
        per_domain += PREFERRED_DOMAIN_SCORE * np.bincount(ids[placed], minlength=count) / len(placed)
    scores[inside] = per_domain[ids[inside]]
    return np.asarray(scores[rows], dtype=np.float64)


def _problem(job: JobInfo, topologies: dict[str, TopologyTree]) -> str | None:
    groups: list[SubGroupSet | PodSet] = [*job.subgroups.values(), *job.podsets.values()]
    constraints = [("", job.topology)] + [(f"sub-group {g.name}: ", g.topology) for g in groups]
    for where, constraint in constraints:
        if constraint is None:
            continue
        tree = topologies.get(constraint.topology)
        if tree is None:
            return f"{where}topology {constraint.topology} does not exist"
        for kind, level in (("required", constraint.required), ("preferred", constraint.preferred)):
            if level and tree.level_of(level) is None:
                return (
                    f"{where}topology {constraint.topology} has no level {level} "
                    f"(the {kind} level; it has {', '.join(tree.levels)})"
                )
        required, preferred = tree.level_of(constraint.required), tree.level_of(constraint.preferred)
        if required is not None and preferred is not None and preferred < required:
            return (
                f"{where}topology {constraint.topology}: the preferred level {constraint.preferred} is wider "
                f"than the required level {constraint.required}"
            )
    return None


def node_subsets(
    session: Session, job: JobInfo, group: PodSet | SubGroupSet | None, tasks: Sequence[TaskInfo]
) -> NodeSubsets | None:
    constraint = job.topology if group is None else group.topology
    if constraint is None or not tasks:
        return None
    tree = session.snapshot.topologies.get(constraint.topology)
    if tree is None:  # reported as the job's invalid reason when the session opened
        return NodeSubsets([], f"topology {constraint.topology} does not exist")
    nodes = session.snapshot.nodes
    base = tree.members if session.allowed is None else tree.members & session.allowed
    required = tree.level_of(constraint.required) if constraint.required else None
    preferred = tree.level_of(constraint.preferred) if constraint.preferred else None
    top = ROOT if required is None else required
    lowest = preferred if preferred is not None else top
    running = [t for t in (job.tasks if group is None else group.tasks) if t.status in ACTIVE_ALLOCATED]
    if required is not None and running:
        base = base & _pinned(tree, required, running, nodes.size)
    capacity = _Capacity(nodes, tasks)
    masks: list[BoolArray] = []
    for level in range(lowest, top - 1, -1):
        # A growing job stays with its running pods where it can (its home domain first).
        home = (
            {int(tree.node_domain[level][t.node]) for t in running if t.node >= 0} if level != ROOT else set()
        )
        masks.extend(_feasible_domains(tree, level, base, capacity, home))
    return NodeSubsets(masks, _failure(constraint, job))


def _pinned(tree: TopologyTree, level: int, running: list[TaskInfo], size: int) -> BoolArray:
    """The domain of `level` that holds every running pod (none when they span several)."""
    domains = {int(tree.node_domain[level][t.node]) for t in running if t.node >= 0}
    if len(domains) != 1 or -1 in domains:
        return np.zeros(size, dtype=np.bool_)
    return tree.domains[level][domains.pop()].nodes


def _feasible_domains(
    tree: TopologyTree, level: int, base: BoolArray, capacity: _Capacity, home: set[int]
) -> list[BoolArray]:
    """The node sets of `level`'s domains (or the whole topology at ROOT) within `base` that could hold
    the pods: the `home` domains (holding the job's running pods) first, then the fullest first (ties:
    domain id)."""
    if level == ROOT:
        return [base] if base.any() and capacity.could_hold(base) else []
    ids = tree.node_domain[level]
    inside = base & (ids >= 0)
    if not inside.any():
        return []
    count = len(tree.domains[level])
    ids_inside = ids[inside]
    free = np.bincount(ids_inside, weights=capacity.free_gpus[inside], minlength=count)
    free_cpu = np.bincount(ids_inside, weights=capacity.free_cpu[inside], minlength=count)
    fitting = np.flatnonzero(capacity.domains_that_could_hold(ids_inside, inside, count))
    candidates = []
    for index in fitting:
        domain = tree.domains[level][int(index)]
        away = int(index) not in home
        candidates.append((away, float(free[index]), float(free_cpu[index]), domain.id, domain.nodes & base))
    candidates.sort(key=lambda item: item[:4])
    return [mask for *_, mask in candidates]


class _Capacity:
    """What the pods of one attempt need, against what nodes have free now or once releasing pods are
    gone: a quick upper bound that never rejects a domain that could hold them (predicates and the exact
    GPU fit are left to the placement itself)."""

    def __init__(self, nodes: NodeTable, tasks: Sequence[TaskInfo]) -> None:
        self.free_gpus: FloatArray = nodes.free_gpus + nodes.rel_gpus + nodes.shared_free_total
        self.free_cpu: FloatArray = nodes.cap_cpu - nodes.used_cpu + nodes.rel_cpu
        self.free_memory: FloatArray = nodes.cap_memory - nodes.used_memory + nodes.rel_memory
        self.free_pods: FloatArray = nodes.cap_pods - nodes.used_pods + nodes.rel_pods
        self.whole_free: FloatArray = nodes.free_gpus + nodes.rel_gpus
        requests = [t.request for t in tasks if t.status is TaskStatus.PENDING]
        self.count = len(requests)
        self.cpu = sum(r.cpu for r in requests)
        self.memory = sum(r.memory for r in requests)
        self.whole = sorted((r.whole_gpus for r in requests if r.whole_gpus > 0), reverse=True)
        self.shared = sum(r.gpu_portion * r.gpu_devices for r in requests if r.is_shared_gpu)

    def domains_that_could_hold(self, ids: IntArray, inside: BoolArray, count: int) -> BoolArray:
        """`could_hold` for every domain of a level at once: `ids` are the domain indices of the nodes
        selected by `inside`."""

        def per_domain(values: FloatArray) -> FloatArray:
            return np.asarray(np.bincount(ids, weights=values[inside], minlength=count), dtype=np.float64)

        ok = per_domain(self.free_pods) >= self.count - EPSILON
        ok &= per_domain(self.free_cpu) >= self.cpu - EPSILON
        ok &= per_domain(self.free_memory) >= self.memory - EPSILON
        ok &= per_domain(self.free_gpus) >= sum(self.whole) + self.shared - EPSILON
        if self.whole:
            slots = np.floor((self.whole_free + EPSILON) / self.whole[-1])
            ok &= per_domain(slots) >= len(self.whole)
        ok &= np.bincount(ids, minlength=count) > 0
        return ok

    def could_hold(self, mask: BoolArray) -> bool:
        if self.free_pods[mask].sum() < self.count - EPSILON:
            return False
        if (
            self.free_cpu[mask].sum() < self.cpu - EPSILON
            or self.free_memory[mask].sum() < self.memory - EPSILON
        ):
            return False
        if self.free_gpus[mask].sum() < sum(self.whole) + self.shared - EPSILON:
            return False
        if self.whole:
            # Whole-GPU pods need that many free GPUs on one node each: count slots for the smallest.
            slots = np.floor((self.whole_free[mask] + EPSILON) / self.whole[-1]).sum()
            if slots < len(self.whole):
                return False
        return True


def _failure(constraint: TopologyConstraint, job: JobInfo) -> str:
    level = constraint.required or constraint.preferred
    return (
        f"topology {constraint.topology}, requirement {level} couldn't be satisfied for job {job.key}: "
        "not enough resources in the cluster to allocate the job."
    )
