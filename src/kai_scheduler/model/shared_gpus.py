"""Shared GPUs for bound fractional pods that do not name theirs.

A running pod on a shared GPU names it with its `runai-gpu-group` label. One that does not (written by
hand, or bound before the label was set) still holds a portion of some GPU of its node; both edges (the
simulator's input and live mode's state) give it one, packed as gpupack would (the fullest GPU of the
node that still has room first, else a new one), so that its portion is accounted on a definite GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kai_scheduler.api.gpu_request import (
    InvalidGpuRequest,
    SharedGpuRequest,
    asks_for_shared_gpu,
    node_gpu_memory_mib,
    read_shared_gpu_request,
)
from kai_scheduler.api.objects import Pod


@dataclass(frozen=True, slots=True)
class BoundPod:
    pod: Pod
    node: str | None
    gpu_groups: tuple[str, ...]


def is_shared_gpu_pod(pod: Pod) -> bool:
    """Whether the pod asks for part of a GPU (`gpu-fraction` or `gpu-memory`)."""
    return asks_for_shared_gpu(pod.metadata.annotations)


def assign_missing_gpu_groups(
    pods: Sequence[BoundPod], node_gpu_memory: Mapping[str, str], *, fresh_prefix: str = ""
) -> dict[int, tuple[str, ...]]:
    """For each bound pod that asks for a GPU fraction or GPU memory but names no GPU group, by its
    index in `pods`: the groups to give it. A new group is `<node>-gpu-<fresh_prefix><n>`, never the name
    of a group already in use. `node_gpu_memory` is each node's `nvidia.com/gpu.memory` label; a pod's
    part of each GPU is `SharedGpuRequest.held_portion` (a whole GPU where the node does not say)."""
    requests = [_request(bound.pod) for bound in pods]
    used: dict[str, float] = {}
    for bound, request in zip(pods, requests, strict=True):
        if bound.node is not None and request is not None:
            for group in bound.gpu_groups:
                used[group] = used.get(group, 0.0) + _held(request, node_gpu_memory.get(bound.node, ""))
    assigned: dict[int, tuple[str, ...]] = {}
    counters: dict[str, int] = {}  # per node, so that a node's names depend on its pods alone
    for index, (bound, request) in enumerate(zip(pods, requests, strict=True)):
        if bound.node is None or bound.gpu_groups or request is None:
            continue
        portion = _held(request, node_gpu_memory.get(bound.node, ""))
        prefix = f"{bound.node}-gpu-"
        chosen: list[str] = []
        for group, amount in sorted(used.items(), key=lambda item: -item[1]):
            if len(chosen) < request.devices and group.startswith(prefix) and amount + portion <= 1.0 + 1e-9:
                chosen.append(group)
        while len(chosen) < request.devices:
            counters[bound.node] = counter = counters.get(bound.node, 0) + 1
            candidate = f"{prefix}{fresh_prefix}{counter}"
            if candidate not in used:
                chosen.append(candidate)
        for group in chosen:
            used[group] = used.get(group, 0.0) + portion
        assigned[index] = tuple(chosen)
    return assigned


def _request(pod: Pod) -> SharedGpuRequest | None:
    """The pod's shared-GPU request; None for none, or for one admission refuses (given no GPU here: the
    edges report such a pod as unreadable)."""
    try:
        return read_shared_gpu_request(pod.metadata.annotations)
    except InvalidGpuRequest:
        return None


def _held(request: SharedGpuRequest, node_memory: str) -> float:
    """What the pod holds of each of its GPUs on a node whose `nvidia.com/gpu.memory` label is
    `node_memory`, read as the node table reads it (floored to 100 MiB; unreadable: a whole GPU, as its
    queue counts it), so that packing never fills a GPU past what placement would."""
    return request.held_portion(float(node_gpu_memory_mib(node_memory)))
