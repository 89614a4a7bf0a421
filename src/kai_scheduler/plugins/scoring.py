"""Node-order plugins: each adds a score per candidate node; the session picks the highest sum.

Scores use KAI's constants so that the plugins rank against each other as they do in KAI: a nominated
node beats everything, a shared GPU with room beats an empty one, fitting now beats waiting for releasing
resources, and bin-packing or spreading decides among the rest.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import BoolArray, FloatArray, NodeTable
from kai_scheduler.model.resources import EPSILON

MAX_HIGH_DENSITY: Final = 9.0
RESOURCE_TYPE: Final = 10.0
AVAILABILITY: Final = 100.0
GPU_SHARING: Final = 1000.0
K8S_PLUGINS_SCORE: Final = 100_000.0  # Kubernetes' own scoring plugins (affinity), as KAI scales them
NOMINATED_NODE: Final = 1_000_000.0

BINPACK: Final = "binpack"
SPREAD: Final = "spread"


class _ScoringPlugin:
    name = ""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        nodes = session.snapshot.nodes
        session.points.node_scorers.append(lambda task, candidates: self.score(nodes, task, candidates))

    def on_session_close(self, session: Session) -> None:
        return None

    def score(self, nodes: NodeTable, task: TaskInfo, candidates: BoolArray) -> FloatArray:
        raise NotImplementedError


class NodeAvailabilityPlugin(_ScoringPlugin):
    """Prefer nodes where the pod fits the idle resources, so it binds now instead of being pipelined."""

    name = "nodeavailability"

    def score(self, nodes: NodeTable, task: TaskInfo, candidates: BoolArray) -> FloatArray:
        return np.where(nodes.fit(task.request, soon=False), AVAILABILITY, 0.0)


class ResourceTypePlugin(_ScoringPlugin):
    """Keep CPU-only pods on CPU-only nodes, leaving GPU nodes' CPUs to GPU pods."""

    name = "resourcetype"

    def score(self, nodes: NodeTable, task: TaskInfo, candidates: BoolArray) -> FloatArray:
        if task.request.uses_gpu:
            return np.zeros(nodes.size)
        return np.where(nodes.has_gpus, 0.0, RESOURCE_TYPE)


class GpuSharingOrderPlugin(_ScoringPlugin):
    """Prefer nodes where a fractional pod fits on a GPU that is already shared (fewer GPUs broken up)."""

    name = "gpusharingorder"

    def score(self, nodes: NodeTable, task: TaskInfo, candidates: BoolArray) -> FloatArray:
        if not task.request.is_shared_gpu:
            return np.zeros(nodes.size)
        fits_shared = nodes.shared_free_now >= nodes.portion_for(task.request) - EPSILON
        return np.where(fits_shared & (nodes.shared_free_now > 0), GPU_SHARING, 0.0)


class NominatedNodePlugin(_ScoringPlugin):
    """A pod pipelined in an earlier cycle goes back to the node it was pipelined to, if it still fits."""

    name = "nominatednode"

    def score(self, nodes: NodeTable, task: TaskInfo, candidates: BoolArray) -> FloatArray:
        scores = np.zeros(nodes.size)
        if task.nominated_node >= 0:
            scores[task.nominated_node] = NOMINATED_NODE
        return scores


class NodePlacementPlugin(_ScoringPlugin):
    """binpack: fill the fullest nodes first (by free GPUs for GPU pods, free CPU for CPU pods);
    spread: the emptiest first. Arguments `gpu` and `cpu` choose per kind of pod."""

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

    def score(self, nodes: NodeTable, task: TaskInfo, candidates: BoolArray) -> FloatArray:
        if task.request.uses_gpu:
            free, total, strategy = nodes.idle_gpus_total(), nodes.cap_gpus, self.gpu_strategy
        else:
            free, total, strategy = nodes.cap_cpu - nodes.used_cpu, nodes.cap_cpu, self.cpu_strategy
        if strategy == SPREAD:
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(total > 0, free / np.maximum(total, EPSILON), 0.0)
            return np.asarray(share, dtype=np.float64)
        considered = free[candidates]
        if considered.size == 0:
            return np.zeros(nodes.size)
        low, high = float(considered.min()), float(considered.max())
        if high - low <= EPSILON:
            return np.full(nodes.size, MAX_HIGH_DENSITY)
        return np.asarray(MAX_HIGH_DENSITY * (1.0 - (free - low) / (high - low)), dtype=np.float64)
