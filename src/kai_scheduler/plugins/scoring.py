"""Node-order plugins: each adds a score per candidate node; the session picks the highest sum.

Scores use KAI's constants so that the plugins rank against each other as they do in KAI: a nominated
node beats everything, a shared GPU with room beats an empty one, fitting now beats waiting for releasing
resources, and bin-packing or spreading decides among the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

import numpy as np

from kai_scheduler.framework import alike_nodes, ranked_nodes
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import FloatArray, IntArray, NodeTable
from kai_scheduler.model.resources import EPSILON
from kai_scheduler.plugins import cpu_steering

MAX_HIGH_DENSITY: Final = 9.0
RESOURCE_TYPE: Final = 10.0
# The numa plugin's band (KAI v0.17 put it here and moved every band above it up tenfold).
NUMA: Final = 100.0
AVAILABILITY: Final = 1000.0
GPU_SHARING: Final = 10_000.0
K8S_PLUGINS_SCORE: Final = 1_000_000.0  # Kubernetes' own scoring plugins (affinity), as KAI scales them
NOMINATED_NODE: Final = 10_000_000.0

BINPACK: Final = "binpack"
# Binpack, gpusharingorder and nodeavailability score this many candidates or fewer in plain Python floats
# rather than numpy (`_binpack_few`, `_sharing_few`, `_availability_few`):
# the ranked index (`ranked_nodes`) has two to four candidates scored a pod, where numpy's cost per call
# is most of the work.
FEW_ROWS: Final = 16
SPREAD: Final = "spread"


class _ScoringPlugin:
    name = ""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        nodes = session.snapshot.nodes
        alike_nodes.add_scorer(
            session.points,
            partial(self.score, nodes),  # no frame of its own: every pod placed calls each scorer
            self.alike_for(),
            constant_for=self.constant_for(nodes),
            ranks_by=self.ranks_by(nodes),
            sparse_on=self.sparse_on(nodes),
        )

    def alike_for(self) -> Callable[[TaskInfo], bool]:
        """The pods for which this scorer gives empty nodes of one capacity one score (`alike_nodes`):
        every pod, as the scorers here read the node table's columns alone and compare candidates only by
        their lowest, highest or every value."""
        return alike_nodes.always

    def constant_for(self, nodes: NodeTable) -> Callable[[TaskInfo], bool] | None:
        """The pods for which this scorer gives every candidate one score (`ranked_nodes`); None: none."""
        return None

    def ranks_by(self, nodes: NodeTable) -> ranked_nodes.RanksBy | None:
        """How this scorer ranks the candidates of a pod by a value (`ranked_nodes`); None: never."""
        return None

    def sparse_on(self, nodes: NodeTable) -> ranked_nodes.SparseOn | None:
        """The per-node value and floor outside of which this scorer scores a pod 0 (`ranked_nodes`); None:
        it does not say."""
        return None

    def on_session_close(self, session: Session) -> None:
        return None

    def score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        """The scores of the candidate nodes `rows` (or one score for all of them)."""
        raise NotImplementedError


class NodeAvailabilityPlugin(_ScoringPlugin):
    """Prefer nodes where the pod fits the idle resources, so it binds now instead of being pipelined."""

    name = "nodeavailability"

    def constant_for(self, nodes: NodeTable) -> Callable[[TaskInfo], bool] | None:
        return lambda task: not nodes.anything_releasing()

    def sparse_on(self, nodes: NodeTable) -> ranked_nodes.SparseOn | None:
        """While something is being released, a pod of whole GPUs alone (no shared GPU) fits now only at
        nodes whose idle whole GPUs hold its GPUs, and whether it fits there reads that node alone
        (`NodeTable.node_fits`): it scores only there, by their idle whole GPUs (`ranked_nodes`). Why: the
        victim actions place pods pipelined onto releasing capacity, and every candidate of each was
        found and scored over the whole cluster."""
        idle = ranked_nodes.Ranking(
            "idle-whole-gpus",
            lambda: nodes.free_gpus,
            lambda node: nodes.free_gpus.item(node),
            scores_at_rows=partial(availability_scores, nodes),
        )

        def sparse(task: TaskInfo) -> tuple[ranked_nodes.Ranking, float] | None:
            request = task.request
            if request.whole_gpus < 1 or request.shared_gpu is not None:
                return None
            return idle, request.whole_gpus - EPSILON

        return sparse

    def score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        if not nodes.anything_releasing():
            return AVAILABILITY  # the candidates fit soon, and nothing is released: they all fit now
        if rows.size <= FEW_ROWS:
            return _availability_few(nodes, task, rows)
        return np.where(nodes.fit(task.request, soon=False)[rows], AVAILABILITY, 0.0)


def _availability_few(nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray:
    """nodeavailability's scores of a few candidates while something is being released, each node asked
    alone (`availability_scores`), rather than from the whole cluster's fit mask of the pod's request now.
    Why: a pod the ranked index leaves to scoring (a shared-GPU pod with a node selector, placed again in a
    victim scenario) has a few candidates, and its request's mask was brought up to date over every node
    the scenarios changed since it was last asked, some 40% of such a pod's node choice at 5,000 nodes."""
    scores = availability_scores(nodes, task, rows.tolist())
    assert not isinstance(scores, float)  # (one score for all only while nothing is released)
    return np.array(scores, dtype=np.float64)


def availability_scores(nodes: NodeTable, task: TaskInfo, rows: list[int]) -> list[float] | float:
    """nodeavailability's scores of the candidates `rows` (`NodeAvailabilityPlugin.score`) in plain floats:
    whether the pod fits now asked of each node (`node_fits` answers as `fit` does), so the same scores."""
    if not nodes.anything_releasing():
        return AVAILABILITY
    request, fits = task.request, nodes.node_fits
    return [AVAILABILITY if fits(request, row, soon=False) else 0.0 for row in rows]


class ResourceTypePlugin(_ScoringPlugin):
    """Keep CPU-only pods on CPU-only nodes, leaving GPU nodes' CPUs to GPU pods."""

    name = "resourcetype"

    def constant_for(self, nodes: NodeTable) -> Callable[[TaskInfo], bool] | None:
        # One kind of node only: every CPU-only pod's candidates are all GPU nodes, or none is.
        one_kind = bool(nodes.has_gpus.all()) or not nodes.has_gpus.any()
        return lambda task: task.request.uses_gpu or one_kind

    def score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        if task.request.uses_gpu:
            return 0.0
        gpu_nodes = nodes.has_gpus.take(rows)
        if gpu_nodes.all():
            return 0.0  # no CPU-only node among the candidates: nothing to prefer
        return np.where(gpu_nodes, 0.0, RESOURCE_TYPE)


class GpuSharingOrderPlugin(_ScoringPlugin):
    """Prefer nodes where a fractional pod fits on a GPU that is already shared (fewer GPUs broken up)."""

    name = "gpusharingorder"

    def constant_for(self, nodes: NodeTable) -> Callable[[TaskInfo], bool] | None:
        return lambda task: not task.request.is_shared_gpu

    def sparse_on(self, nodes: NodeTable) -> ranked_nodes.SparseOn | None:
        """A shared-GPU pod scores only at nodes with a shared GPU that has room now for its portion
        (`score`), each by its own GPUs: a fraction's portion is the same on every node, a gpu-memory
        request's is not (any room then)."""
        room = ranked_nodes.Ranking(
            "shared-free-now",
            lambda: nodes.shared_free_now,
            lambda node: nodes.shared_free_now.item(node),
            scores_at_rows=partial(sharing_scores, nodes),
        )

        def sparse(task: TaskInfo) -> tuple[ranked_nodes.Ranking, float] | None:
            shared = task.request.shared_gpu
            if shared is None:
                return None
            return room, (shared.fraction - EPSILON if shared.fraction > 0 else 0.0)

        return sparse

    def score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        if not task.request.is_shared_gpu:
            return 0.0
        if rows.size <= FEW_ROWS:
            return _sharing_few(nodes, task, rows)
        shared_free = nodes.shared_free_now.take(rows)
        with_room = np.flatnonzero(shared_free > 0)  # usually a few nodes: the rest score 0
        if with_room.size == 0:
            return 0.0
        portion = nodes.portion_for(task.request, rows.take(with_room))
        scores = np.zeros(rows.size)
        scores[with_room[shared_free.take(with_room) >= portion - EPSILON]] = GPU_SHARING
        return scores


def _sharing_few(nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
    """gpusharingorder's scores of a few candidates (`GpuSharingOrderPlugin.score`) in plain Python."""
    scores = sharing_scores(nodes, task, rows.tolist())
    return scores if isinstance(scores, float) else np.array(scores)


def sharing_scores(nodes: NodeTable, task: TaskInfo, rows: list[int]) -> list[float] | float:
    """gpusharingorder's scores of the candidates `rows` of a shared-GPU pod (`GpuSharingOrderPlugin.score`)
    in plain floats: the same comparisons of the same values (the portion as
    `SharedGpuRequest.fit_portions` works it out), so the same scores. Why: the ranked index scores two to
    four candidates a shared-GPU pod."""
    shared = task.request.shared_gpu
    assert shared is not None  # a shared-GPU request
    scores, any_room = [], False
    for node in rows:
        free = nodes.shared_free_now.item(node)
        if free > 0:
            any_room = True
            if shared.fraction > 0:
                portion = shared.fraction
            else:
                memory = nodes.gpu_memory_mib.item(node)
                portion = shared.memory_mib / max(memory, 1.0) if memory > 0 else float("inf")
            if free >= portion - EPSILON:
                scores.append(GPU_SHARING)
                continue
        scores.append(0.0)
    return scores if any_room else 0.0


class NominatedNodePlugin(_ScoringPlugin):
    """A pod pipelined in an earlier cycle goes back to the node it was pipelined to, if it still fits."""

    name = "nominatednode"

    def alike_for(self) -> Callable[[TaskInfo], bool]:
        return _not_nominated  # a nominated node is told apart by its index

    def constant_for(self, nodes: NodeTable) -> Callable[[TaskInfo], bool] | None:
        return _not_nominated

    def score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        if _not_nominated(task):
            return 0.0  # every node scores 0
        return np.where(rows == task.nominated_node, NOMINATED_NODE, 0.0)


def _not_nominated(task: TaskInfo) -> bool:
    return task.nominated_node < 0


class NodePlacementPlugin(_ScoringPlugin):
    """binpack: fill the fullest nodes first (by free GPUs for GPU pods, free CPU for CPU pods; free is
    idle plus releasing); spread: the emptiest first. Arguments `gpu` and `cpu` choose per kind of pod.

    `cpuAvoidsIdleGpus: "true"` (not KAI's, off by default) ranks the nodes of a CPU-only pod first by
    their idle GPUs, fewest first, and only then by `cpu` (see `cpu_steering`)."""

    name = "nodeplacement"

    def __init__(self, arguments: dict[str, Any]) -> None:
        super().__init__(arguments)
        for kind in ("gpu", "cpu"):
            strategy = arguments.get(kind, BINPACK)
            if strategy not in (BINPACK, SPREAD):
                raise ValueError(
                    f"nodeplacement.arguments.{kind}: expected binpack or spread, got {strategy!r}"
                )
        self.gpu_strategy = arguments.get("gpu", BINPACK)
        self.cpu_strategy = arguments.get("cpu", BINPACK)
        self.cpu_avoids_idle_gpus = cpu_steering.flag(arguments)

    def ranks_by(self, nodes: NodeTable) -> ranked_nodes.RanksBy | None:
        """Binpack ranks by what is not allocated (`_score`): the less, the higher the score, scaled
        between the candidates' lowest and highest. That value is what `fit` compares a CPU-only pod's CPU
        with (free soon), so a node valued below the pod's ask less `EPSILON` cannot hold the pod. It is
        also at least the whole GPUs `fit` compares a GPU pod's with, but where a fractional pod pipelined
        onto a shared GPU's releasing part left that GPU's room now below zero (`below_floor`: the nodes
        `NodeTable.overcommitted`, asked while something is being released). While nothing is being
        released, it is also at least a node's free whole GPUs and the room of its roomiest shared GPU, one
        of which must hold a fraction's portion (`fit`)."""
        rankings = {
            gpus: ranked_nodes.Ranking(
                ("not-allocated", gpus),
                partial(nodes.not_allocated, gpus=gpus),
                nodes.gpus_not_allocated_of if gpus else nodes.cpu_not_allocated_of,
                binpack_scores,
                values_at=partial(nodes.not_allocated_at, gpus=gpus),
                below_floor=nodes.overcommitted if gpus else None,
            )
            for gpus in (False, True)
        }

        def ranks(task: TaskInfo) -> tuple[ranked_nodes.Ranking, float] | None:
            request = task.request
            gpus = request.uses_gpu
            if (self.gpu_strategy if gpus else self.cpu_strategy) != BINPACK:
                return None
            if self.cpu_avoids_idle_gpus and not gpus:
                return None  # ranked by idle GPUs first
            least = request.whole_gpus if gpus else request.cpu
            shared = request.shared_gpu
            if shared is not None and shared.fraction > 0 and not nodes.anything_releasing():
                least = shared.fraction
            return rankings[gpus], least - EPSILON

        return ranks

    def score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        if self.cpu_avoids_idle_gpus and not task.request.uses_gpu:
            return cpu_steering.avoid_idle_gpus(nodes, rows, self._score(nodes, task, rows))
        return self._score(nodes, task, rows)

    def _score(self, nodes: NodeTable, task: TaskInfo, rows: IntArray) -> FloatArray | float:
        # What is not allocated: idle plus releasing, as KAI's NonAllocatedResource (so a pod being
        # evicted frees its node for this count, and a victim placed again weighs its own node so too),
        # in a new array this method may change.
        gpus = task.request.uses_gpu
        strategy = self.gpu_strategy if gpus else self.cpu_strategy
        if strategy == BINPACK and rows.size <= FEW_ROWS:
            return _binpack_few(nodes, rows, gpus=gpus)
        free = nodes.not_allocated_at(rows, gpus=gpus)
        capacity = nodes.cap_gpus if gpus else nodes.cap_cpu
        if strategy == SPREAD:
            total = capacity.take(rows)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(total > 0, free / np.maximum(total, EPSILON), 0.0)
            return np.asarray(share, dtype=np.float64)
        # Binpack ranks against the other candidates: the fullest scores MAX_HIGH_DENSITY, the emptiest 0.
        if free.size == 0:
            return 0.0
        low, high = float(np.minimum.reduce(free)), float(np.maximum.reduce(free))  # min/max minus wrappers
        if high - low <= EPSILON:
            return MAX_HIGH_DENSITY
        # MAX_HIGH_DENSITY * (1 - (free - low) / (high - low)), step by step in place (no temporaries).
        score = np.subtract(free, low, out=free)
        score /= high - low
        np.subtract(1.0, score, out=score)
        score *= MAX_HIGH_DENSITY
        return score


def _binpack_few(nodes: NodeTable, rows: IntArray, *, gpus: bool) -> FloatArray | float:
    """Binpack's scores of a few candidates (`NodePlacementPlugin._score`), in plain Python
    (`not_allocated_of` has `not_allocated`'s bits)."""
    scores = binpack_scores([nodes.not_allocated_of(node, gpus=gpus) for node in rows.tolist()])
    return scores if isinstance(scores, float) else np.array(scores)


def binpack_scores(free: list[float]) -> list[float] | float:
    """Binpack's scores of candidates with `free` not allocated (`NodePlacementPlugin._score`), in plain
    floats: the same IEEE operations in the same order on the same values, so the same scores to the last
    bit (a float: one score for all)."""
    if not free:
        return 0.0
    low, high = min(free), max(free)
    if high - low <= EPSILON:
        return MAX_HIGH_DENSITY
    scale = high - low
    return [(1.0 - (value - low) / scale) * MAX_HIGH_DENSITY for value in free]
