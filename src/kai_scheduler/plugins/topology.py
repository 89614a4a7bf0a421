"""topology: keep a job's pods within one domain of a Topology (KAI's topology-aware scheduling).

A PodGroup (or one of its sub-groups) may name a Topology and a `requiredTopologyLevel` (all its pods in
one domain of that level, or none placed) and/or a `preferredTopologyLevel` (one domain of that level if
possible). A non-leaf sub-group's pods are those of all its descendants: e.g. sub-group "workers" in one
zone and each of its leaf segments in one rack (`actions.placement` descends the tree of sub-groups).
For each allocation attempt the plugin offers node subsets, narrowest first: the domains of the
preferred level, then of each wider level up to the required one (or the whole topology when nothing is
required). At each level only domains whose free (or releasing) resources could hold the pods are
offered, in KAI's bin-packing order: the tree below the domain the candidate nodes share is sorted, each
domain's children the fullest first (by the job's dominant share of their free resources, then by id), and
a level's domains are offered in that tree's order, so the fullest wider domain's children come first
(KAI's `sortTree` and `sortDomainInfos`). Pods that already run (the job's, or the sub-group's
descendants') pin it to the domains of the required level that hold them. Nodes outside the topology
(missing a level's label) are never offered.

When a job or sub-group has a preferred level, its pods' nodes are scored as KAI's topology plugin scores
them (`PREFERRED_DOMAIN_SCORE` steps): each preferred-level domain below the shared domain by its place in
that sorted order, the last the highest, fixed for the whole attempt. So where a wider subset is used, the
pods start in the last (the emptiest, on equal packing the highest id) preferred domain and fill the
domains in that order.

A job naming a Topology that does not exist, or a level the Topology does not have (in its own
constraint or any sub-group's), waits with a reason.
"""

from __future__ import annotations

import math
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
# A preferred domain's nodes score up to 10 steps of this (KAI's scores.Topology): above binpack/spread and
# GPU sharing order, up to Kubernetes' affinity scores (see plugins/scoring.py).
PREFERRED_DOMAIN_SCORE = 100_000.0
# KAI's ratio for a resource the job asks for and a domain has none of (job_filtering.go).
_NOT_IN_DOMAIN_RATIO = 1000.0


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
        scores = _GroupScores()
        session.points.node_subsets.append(partial(node_subsets, session, scores))
        if any(_has_preferred(job) for job in constrained):
            session.points.node_scorers.append(partial(preferred_domain_scores, scores))

    def on_session_close(self, session: Session) -> None:
        return None


def _has_preferred(job: JobInfo) -> bool:
    return any(c is not None and c.preferred for c in job.topology_constraints())


class _GroupScores:
    """The node scores of the groups with a preferred level (by the group's id, the job's for its root), as
    set when their subsets were last made in the current job's attempt (KAI keeps them per sub-group and
    drops them when the next job's allocation starts)."""

    def __init__(self) -> None:
        self.by_group: dict[int, FloatArray] = {}

    def of(self, task: TaskInfo) -> FloatArray | None:
        """The scores of the pod's narrowest group that has them (its pod set, its parents, the job)."""
        group: PodSet | SubGroupSet | None = task.podset
        while group is not None:
            found = self.by_group.get(id(group))
            if found is not None:
                return found
            group = group.parent
        return self.by_group.get(id(task.job))


def preferred_domain_scores(scores: _GroupScores, task: TaskInfo, rows: IntArray) -> FloatArray | float:
    """Scores for the candidate nodes `rows`: those of the pod's narrowest group with a preferred level."""
    found = scores.of(task)
    return 0.0 if found is None else np.asarray(found.take(rows), dtype=np.float64)


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
    session: Session,
    scores: _GroupScores,
    job: JobInfo,
    group: PodSet | SubGroupSet | None,
    tasks: Sequence[TaskInfo],
) -> NodeSubsets | None:
    if group is None:
        scores.by_group.clear()  # a new attempt of a job (KAI's preJobAllocationFn)
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
    common = _common_domain(tree, base, lowest if preferred is not None else len(tree.levels) - 1)
    capacity = _Capacity(nodes, tasks)
    order = _PackingOrder(tree, capacity, lowest)
    if preferred is not None:
        scores.by_group[id(job if group is None else group)] = _preferred_scores(
            tree, order, preferred, common, nodes.size
        )
    # Running pods of the group (its descendants') pin it to the required-level domains holding them, as
    # KAI did up to v0.14; KAI v0.15+ counts only the pod sets being placed (allocate.go, #1416), which
    # lets a sub-group's new pods leave the domain its running siblings hold: not followed.
    group_tasks = job.tasks if group is None else group.tasks
    running = [t for t in group_tasks if t.status in ACTIVE_ALLOCATED and t.node >= 0]
    if required is not None and running:
        base = base & _pinned(tree, required, running, nodes.size)
    # The levels above the shared domain would offer its nodes again (KAI finds them empty); but a
    # required level wider than it is still offered, as the nodes it has (KAI would offer nothing).
    widest = common[0] if top < common[0] <= lowest else top
    masks: list[BoolArray] = []
    for level in range(lowest, widest - 1, -1):
        masks.extend(_feasible_domains(tree, level, base, capacity, order))
    return NodeSubsets(masks, _failure(constraint, job))


def _common_domain(tree: TopologyTree, base: BoolArray, deepest: int) -> tuple[int, int]:
    """The narrowest domain (level, index) holding every node of `base`, no deeper than `deepest`
    (KAI's lowestCommonDomainID, which stops at the preferred level); (ROOT, 0) when none."""
    found = (ROOT, 0)
    for level in range(deepest + 1):
        ids = np.unique(tree.node_domain[level][base])
        if ids.size != 1:
            break
        found = (level, int(ids[0]))
    return found


class _PackingOrder:
    """KAI's bin-packing order of domains for one attempt (job_filtering.go `sortTree`): siblings by the
    job's dominant share of their free (idle plus releasing) resources, the highest first, then by id; a
    domain ranks by its ancestors' places, then its own."""

    def __init__(self, tree: TopologyTree, capacity: _Capacity, deepest: int) -> None:
        self.tree = tree
        # KAI counts whole GPUs free (shared ones are used) against the GPUs the pods ask for.
        wanted = [(sum(amounts), free) for amounts, free in capacity.resources()]
        inside = tree.members
        self.ratios: list[FloatArray] = []
        for level in range(deepest + 1):
            ids = tree.node_domain[level][inside]
            count = len(tree.domains[level])
            ratio = np.zeros(count)
            for amount, free in wanted:
                if amount <= 0:
                    continue
                room = np.bincount(ids, weights=free[inside], minlength=count)
                with np.errstate(divide="ignore"):
                    share = np.where(room > 0, amount / np.maximum(room, EPSILON), _NOT_IN_DOMAIN_RATIO)
                ratio = np.maximum(ratio, share)
            self.ratios.append(ratio)

    def key(self, level: int, index: int) -> tuple[tuple[float, str], ...]:
        path = self.tree.ancestors(level)[index]
        return tuple(
            (-float(self.ratios[up][i]), self.tree.domains[up][int(i)].id) for up, i in enumerate(path)
        )


def _preferred_scores(
    tree: TopologyTree, order: _PackingOrder, preferred: int, common: tuple[int, int], size: int
) -> FloatArray:
    """KAI's calculateNodeScores (node_scoring.go): the preferred-level domains below the shared domain in
    packing order; the i-th of n scores floor((i + 1) / n * 10) steps, so the last (the emptiest) ranks
    first. Nodes elsewhere score nothing."""
    level, index = common
    below = np.arange(len(tree.domains[preferred]))
    if level != ROOT:
        below = below[tree.ancestors(preferred)[:, level] == index]
    ranked = sorted((int(i) for i in below), key=lambda i: order.key(preferred, i))
    per_domain = np.zeros(len(tree.domains[preferred]))
    for place, i in enumerate(ranked):
        per_domain[i] = math.floor((place + 1) / len(ranked) * 10) * PREFERRED_DOMAIN_SCORE
    ids = tree.node_domain[preferred]
    scores = np.zeros(size)
    scores[ids >= 0] = per_domain[ids[ids >= 0]]
    return scores


def _pinned(tree: TopologyTree, level: int, running: list[TaskInfo], size: int) -> BoolArray:
    """The domains of `level` that hold a running pod (KAI's getRelevantDomainsWithAllocatedPods)."""
    pinned = np.zeros(size, dtype=np.bool_)
    for index in {int(tree.node_domain[level][t.node]) for t in running}:
        if index >= 0:
            pinned |= tree.domains[level][index].nodes
    return pinned


def _feasible_domains(
    tree: TopologyTree, level: int, base: BoolArray, capacity: _Capacity, order: _PackingOrder
) -> list[BoolArray]:
    """The node sets of `level`'s domains (or the whole topology at ROOT) within `base` that could hold
    the pods, in packing order."""
    if level == ROOT:
        return [base] if base.any() and capacity.could_hold(base) else []
    ids = tree.node_domain[level]
    inside = base & (ids >= 0)
    if not inside.any():
        return []
    count = len(tree.domains[level])
    fitting = np.flatnonzero(capacity.domains_that_could_hold(ids[inside], inside, count))
    ranked = sorted((int(i) for i in fitting), key=lambda i: order.key(level, i))
    return [tree.domains[level][i].nodes & base for i in ranked]


class _Capacity:
    """Whether a domain could hold the pods of one attempt, as KAI's checkJobDomainFit judges it
    (job_filtering.go), against what its nodes have free now or once releasing pods are gone.

    Pods alike in kind (all or none ask for GPUs, every other countable resource asked for by all or
    none) are counted as KAI's "representor" pods: a node holds as many copies of the largest request (each
    resource's maximum over the pods) as fit it, and the domain must hold as many as there are pods.
    Otherwise the pods' sum must fit the domain's free resources, whole GPUs only. Predicates and the
    exact GPU fit are left to the placement itself."""

    def __init__(self, nodes: NodeTable, tasks: Sequence[TaskInfo]) -> None:
        requests = [t.request for t in tasks if t.status is TaskStatus.PENDING]
        self.count = len(requests)
        gpus = [r.device_gpus for r in requests]
        whole_free = nodes.free_gpus + nodes.rel_gpus
        # Per other resource asked for: each pod's amount and every node's free amount.
        asked: list[tuple[list[float], FloatArray]] = [
            ([r.cpu for r in requests], nodes.cap_cpu - nodes.used_cpu + nodes.rel_cpu),
            ([r.memory for r in requests], nodes.cap_memory - nodes.used_memory + nodes.rel_memory),
        ]
        scalar_names = sorted({name for r in requests for name, amount in r.scalars if amount > 0})
        for name in scalar_names:
            j = nodes.scalar_index.get(name)
            if j is None:
                continue  # no node lists it (e.g. backed by DRA): KAI's vectors do not track it either
            free = nodes.cap_scalars[:, j] - nodes.used_scalars[:, j] + nodes.rel_scalars[:, j]
            asked.append(([dict(r.scalars).get(name, 0.0) for r in requests], free))
        self.gpus, self.whole_free, self.asked = gpus, whole_free, asked
        # KAI's useRepresentorPodsAccounting: device-plugin GPUs (not DRA's) and every scalar by all or none.
        using_gpu = sum(1 for r in requests if r.device_gpus - r.dra_gpus > 0)
        alike = using_gpu in (0, self.count) and all(all(a > 0 for a in amounts) for amounts, _ in asked[2:])
        self.per_node: FloatArray | None = None
        self.totals: list[tuple[float, FloatArray]] = []
        if alike:
            largest = max(gpus, default=0.0)
            # A fractional pod may also go to the unused parts of shared GPUs (KAI's calcNodeAccommodation).
            gpu_free = whole_free + nodes.shared_free_total if 0 < largest < 1 else whole_free
            self.per_node = self._representors([(gpus, gpu_free), *asked], nodes.size)
        else:
            self.totals = [(sum(amounts), free) for amounts, free in self.resources()]

    def resources(self) -> list[tuple[list[float], FloatArray]]:
        """Each resource asked for, GPUs (whole ones free) first: the pods' amounts and the nodes' free."""
        return [(self.gpus, self.whole_free), *self.asked]

    def _representors(self, asked: list[tuple[list[float], FloatArray]], size: int) -> FloatArray:
        """How many copies of the largest request each node holds."""
        held = np.full(size, float(self.count))  # a pod asking for nothing: KAI counts them all
        for amounts, free in asked:
            largest = max(amounts, default=0.0)
            if largest > 0:
                held = np.minimum(held, np.floor(np.maximum(free, 0.0) / largest + EPSILON))
        return held

    def domains_that_could_hold(self, ids: IntArray, inside: BoolArray, count: int) -> BoolArray:
        """`could_hold` for every domain of a level at once: `ids` are the domain indices of the nodes
        selected by `inside`."""

        def per_domain(values: FloatArray) -> FloatArray:
            return np.asarray(np.bincount(ids, weights=values[inside], minlength=count), dtype=np.float64)

        ok = np.bincount(ids, minlength=count) > 0
        if self.per_node is not None:
            return ok & (per_domain(self.per_node) >= self.count)
        for total, free in self.totals:
            if total > 0:
                ok &= per_domain(free) >= total - EPSILON
        return ok

    def could_hold(self, mask: BoolArray) -> bool:
        if self.per_node is not None:
            return bool(self.per_node[mask].sum() >= self.count)
        return all(total <= 0 or free[mask].sum() >= total - EPSILON for total, free in self.totals)


def _failure(constraint: TopologyConstraint, job: JobInfo) -> str:
    level = constraint.required or constraint.preferred
    return (
        f"topology {constraint.topology}, requirement {level} couldn't be satisfied for job {job.key}: "
        "not enough resources in the cluster to allocate the job."
    )
