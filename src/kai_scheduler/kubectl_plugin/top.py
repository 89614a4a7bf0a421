"""`kubectl kai top`: GPU allocation per node, and per shared GPU (one physical GPU that fractional pods
share, KAI's GPU group), from the nodes' allocatable `nvidia.com/gpu` and the pods bound to them.

A node's allocated GPUs are its pods' whole GPUs plus their parts of shared GPUs (a `gpu-memory` part
over the node's `nvidia.com/gpu.memory`, as the scheduler counts it); a shared GPU takes a whole GPU from
the node while any pod holds part of it, so FREE counts the GPUs that neither whole-GPU pods nor shared
GPUs hold. The binder's GPU reservation pods (one per shared GPU) are the shared GPUs themselves, not
counted again. Pods that ended (Succeeded, Failed) hold nothing. GPUs that DRA hands out (ResourceClaims)
are not shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Pod
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.client import NODES, PODS, JsonObject
from kai_scheduler.k8s.runtime.kai_objects import RESERVATION_APP
from kai_scheduler.k8s.runtime.objects import gpu_memory_mib_of, labels_of
from kai_scheduler.kubectl_plugin.amounts import PodGpus, pod_gpus, show
from kai_scheduler.kubectl_plugin.api_client import Cluster
from kai_scheduler.kubectl_plugin.table import render
from kai_scheduler.model.shared_gpus import BoundPod, assign_missing_gpu_groups

ENDED = ("Succeeded", "Failed")


@dataclass(slots=True)
class SharedGpu:
    group: str
    node: str
    allocated: float = 0.0  # the parts its pods hold, in GPUs
    pods: list[str] = field(default_factory=list)


@dataclass(slots=True)
class NodeGpus:
    name: str
    gpus: float
    whole: float = 0.0  # GPUs held whole
    shared: dict[str, SharedGpu] = field(default_factory=dict)
    pods: int = 0  # pods holding GPUs

    @property
    def allocated(self) -> float:
        return self.whole + sum(gpu.allocated for gpu in self.shared.values())

    @property
    def free(self) -> float:
        return max(0.0, self.gpus - self.whole - len(self.shared))


async def fetch(cluster: Cluster) -> tuple[list[JsonObject], list[JsonObject]]:
    return await cluster.list(NODES), await cluster.list(PODS)


def _gpu_count(node: Mapping[str, Any]) -> float:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    try:
        return float(parse_quantity(allocatable.get(c.GPU_RESOURCE, 0)))
    except ValueError:
        return 0.0


def gpu_allocation(nodes: list[JsonObject], pods: list[JsonObject]) -> list[NodeGpus]:
    """Every node with GPUs (or with GPU pods), by name."""
    table = {str(n["metadata"]["name"]): NodeGpus(str(n["metadata"]["name"]), _gpu_count(n)) for n in nodes}
    memory = {str(n["metadata"]["name"]): gpu_memory_mib_of(n) for n in nodes}
    held: list[tuple[str, str, PodGpus, Pod]] = []
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        node_name = spec.get("nodeName")
        if not node_name or status.get("phase") in ENDED:
            continue
        if (meta.get("labels") or {}).get("app") == RESERVATION_APP:
            continue
        gpus = pod_gpus(pod)
        if gpus is None or not (gpus.whole or gpus.shared):
            continue
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        held.append((str(node_name), key, gpus, Pod.model_validate(pod)))
    # A shared-GPU pod that names no shared GPU (bound by hand) is on the GPUs the scheduler gives it.
    labels = {str(n["metadata"]["name"]): str(labels_of(n).get(c.GPU_MEMORY_LABEL) or "") for n in nodes}
    missing = assign_missing_gpu_groups(
        [BoundPod(model, node_name, gpus.groups) for node_name, _, gpus, model in held], labels
    )
    for index, (node_name, key, gpus, _) in enumerate(held):
        node = table.setdefault(node_name, NodeGpus(node_name, 0.0))
        node.pods += 1
        node.whole += gpus.whole
        groups = missing.get(index, gpus.groups)
        part = gpus.gpus(memory.get(node.name, 0.0)) - gpus.whole
        for group in groups:
            shared = node.shared.setdefault(group, SharedGpu(group, node.name))
            shared.allocated += part / len(groups)
            shared.pods.append(key)
    return sorted((node for node in table.values() if node.gpus or node.pods), key=lambda n: n.name)


def as_json(nodes: list[NodeGpus]) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "name": n.name,
                "gpus": n.gpus,
                "allocated": round(n.allocated, 4),
                "whole": n.whole,
                "sharedGpus": len(n.shared),
                "free": n.free,
                "pods": n.pods,
            }
            for n in nodes
        ],
        "sharedGpus": [
            {"node": g.node, "group": g.group, "allocated": round(g.allocated, 4), "pods": sorted(g.pods)}
            for n in nodes
            for g in sorted(n.shared.values(), key=lambda g: g.group)
        ],
    }


def tables(nodes: list[NodeGpus]) -> str:
    def percent(part: float, whole: float) -> str:
        return f"{round(100 * part / whole)}%" if whole else "-"

    text = render(
        ("NODE", "GPUS", "ALLOCATED", "ALLOCATED%", "WHOLE", "SHARED GPUS", "FREE", "GPU PODS"),
        [
            (
                n.name,
                show("gpu", n.gpus),
                show("gpu", n.allocated),
                percent(n.allocated, n.gpus),
                show("gpu", n.whole),
                str(len(n.shared)),
                show("gpu", n.free),
                str(n.pods),
            )
            for n in nodes
        ],
    )
    shared = [g for n in nodes for g in sorted(n.shared.values(), key=lambda g: g.group)]
    if shared:
        text += "\n" + render(
            ("NODE", "SHARED GPU", "ALLOCATED", "PODS"),
            [(g.node, g.group, show("gpu", g.allocated), ",".join(sorted(g.pods))) for g in shared],
        )
    return text


__all__ = ["NodeGpus", "SharedGpu", "as_json", "fetch", "gpu_allocation", "tables"]
