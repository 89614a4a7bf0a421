"""Shared GPUs for bound fractional pods that do not name theirs.

A running pod on a shared GPU names it with its `runai-gpu-group` label. One that does not (written by
hand, or bound before the label was set) still holds a portion of some GPU of its node; both edges (the
simulator's input and live mode's state) give it one, packed as gpupack would (the fullest GPU of the
node that still has room first, else a new one), so that its portion is accounted on a definite GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Pod


@dataclass(frozen=True, slots=True)
class BoundPod:
    pod: Pod
    node: str | None
    gpu_groups: tuple[str, ...]


def is_shared_gpu_pod(pod: Pod) -> bool:
    """Whether the pod asks for part of a GPU (`gpu-fraction` or `gpu-memory`)."""
    annotations = pod.metadata.annotations
    return c.GPU_FRACTION_ANNOTATION in annotations or c.GPU_MEMORY_ANNOTATION in annotations


def assign_missing_gpu_groups(
    pods: Sequence[BoundPod], node_gpu_memory: Mapping[str, str], *, fresh_prefix: str = ""
) -> dict[int, tuple[str, ...]]:
    """For each bound pod that asks for a GPU fraction or GPU memory but names no GPU group, by its
    index in `pods`: the groups to give it. A new group is `<node>-gpu-<fresh_prefix><n>`, never the name
    of a group already in use. `node_gpu_memory` is each node's `nvidia.com/gpu.memory` label."""
    used: dict[str, float] = {}
    for bound in pods:
        if bound.node is not None:
            for group in bound.gpu_groups:
                used[group] = used.get(group, 0.0) + _portion(bound.pod, node_gpu_memory.get(bound.node, ""))
    assigned: dict[int, tuple[str, ...]] = {}
    counters: dict[str, int] = {}  # per node, so that a node's names depend on its pods alone
    for index, bound in enumerate(pods):
        annotations = bound.pod.metadata.annotations
        if bound.node is None or bound.gpu_groups or not is_shared_gpu_pod(bound.pod):
            continue
        portion = _portion(bound.pod, node_gpu_memory.get(bound.node, ""))
        try:
            devices = int(annotations.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION, "1"))
        except ValueError:
            devices = 1
        prefix = f"{bound.node}-gpu-"
        chosen: list[str] = []
        for group, amount in sorted(used.items(), key=lambda item: -item[1]):
            if len(chosen) < devices and group.startswith(prefix) and amount + portion <= 1.0 + 1e-9:
                chosen.append(group)
        while len(chosen) < devices:
            counters[bound.node] = counter = counters.get(bound.node, 0) + 1
            candidate = f"{prefix}{fresh_prefix}{counter}"
            if candidate not in used:
                chosen.append(candidate)
        for group in chosen:
            used[group] = used.get(group, 0.0) + portion
        assigned[index] = tuple(chosen)
    return assigned


def _portion(pod: Pod, node_memory: str) -> float:
    annotations = pod.metadata.annotations
    try:
        if c.GPU_FRACTION_ANNOTATION in annotations:
            return float(annotations[c.GPU_FRACTION_ANNOTATION])
        if c.GPU_MEMORY_ANNOTATION in annotations and node_memory.isdigit() and int(node_memory) > 0:
            return min(1.0, int(annotations[c.GPU_MEMORY_ANNOTATION]) / int(node_memory))
    except ValueError:
        pass
    return 0.0
