"""Node shapes for the scale adjuster: what a pending fractional pod needs of a node (selector, affinity,
tolerations) and what GPUs a node of that shape has, read from the GPU Operator's labels
(docs/scale-adjuster.md)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.gpu_request import node_gpu_memory_mib
from kai_scheduler.api.objects import Affinity, Taint, Toleration
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.objects import labels_of, metadata_of
from kai_scheduler.model.matching import node_affinity_required_matches, untolerated_taint

GPU_COUNT_LABEL: Final = "nvidia.com/gpu.count"


GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"


# The tolerations the API server's DefaultTolerationSeconds plugin gives every pod: not part of a shape.
_DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


class GpuFacts(NamedTuple):
    """What the GPU Operator's labels say about a node's GPUs (0 / "" when unknown)."""

    gpu_count: int
    memory_mib: int
    product: str


def positive_int(value: Any) -> int:
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and int(text) > 0 else 0


def node_gpu_facts(node_labels: Mapping[str, str], allocatable: Mapping[str, Any]) -> GpuFacts:
    """`(count, memory_mib, product)` of a node, from the GPU Operator's labels:

    * count: `nvidia.com/gpu.count` (the GPUs the node has), else the allocatable `nvidia.com/gpu`;
    * memory_mib: `nvidia.com/gpu.memory` (MiB per GPU), floored to 100 MiB as KAI does;
    * product: `nvidia.com/gpu.product` (e.g. `NVIDIA-A100-SXM4-80GB`).

    Missing or malformed values give 0 (or "")."""
    count = positive_int(node_labels.get(GPU_COUNT_LABEL))
    if not count:
        try:
            count = max(0, math.floor(parse_quantity(allocatable.get(c.GPU_RESOURCE, 0))))
        except ValueError:
            count = 0
    memory = node_gpu_memory_mib(node_labels.get(c.GPU_MEMORY_LABEL))
    product = node_labels.get(GPU_PRODUCT_LABEL)
    return GpuFacts(count, memory, product if isinstance(product, str) else "")


@dataclass(frozen=True, slots=True)
class Shape:
    """The node kind a pod may run on: `spec` holds `nodeSelector`, `tolerations` and `affinity` (only the
    non-empty ones) as the scaling pod carries them; `key` is a hash of it."""

    key: str
    spec: Mapping[str, Any] = field(compare=False, hash=False)


def _is_default_toleration(toleration: Mapping[str, Any]) -> bool:
    return (
        toleration.get("key") in _DEFAULT_TOLERATION_KEYS
        and toleration.get("operator") == "Exists"
        and toleration.get("effect") == "NoExecute"
        and toleration.get("tolerationSeconds") == 300
        and not toleration.get("value")
    )


def pod_shape(pod: Mapping[str, Any]) -> Shape:
    """The pod's shape (see the module doc)."""
    spec = pod.get("spec") or {}
    labels = labels_of(pod)
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    pool = labels.get(c.NODE_POOL_LABEL)
    if pool:
        selector.setdefault(c.NODE_POOL_LABEL, str(pool))
    tolerations = [
        dict(t)
        for t in spec.get("tolerations") or []
        if isinstance(t, Mapping) and not _is_default_toleration(t)
    ]
    tolerations.sort(key=lambda t: json.dumps(t, sort_keys=True))
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    fragment: dict[str, Any] = {}
    if selector:
        fragment["nodeSelector"] = dict(sorted(selector.items()))
    if tolerations:
        fragment["tolerations"] = tolerations
    if node_affinity:
        fragment["affinity"] = {"nodeAffinity": node_affinity}
    text = json.dumps(fragment, sort_keys=True, separators=(",", ":"))
    return Shape(hashlib.sha256(text.encode()).hexdigest()[:10], fragment)


def node_fits_shape(node: Mapping[str, Any], shape: Shape) -> bool:
    """The node satisfies the shape's node selector and required node affinity, and the shape tolerates
    its NoSchedule / NoExecute taints."""
    meta = metadata_of(node)
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    try:
        raw_affinity = shape.spec.get("affinity")
        affinity = Affinity.model_validate(raw_affinity) if raw_affinity else None
        taints = [Taint.model_validate(t) for t in (node.get("spec") or {}).get("taints") or []]
        tolerations = [Toleration.model_validate(t) for t in shape.spec.get("tolerations") or []]
    except ValidationError:
        return False
    selector = shape.spec.get("nodeSelector") or {}
    if not node_affinity_required_matches(affinity, selector, labels, str(meta.get("name") or "")):
        return False
    return untolerated_taint(taints, tolerations) is None


def shape_gpu_facts(shape: Shape, nodes: Iterable[Mapping[str, Any]]) -> GpuFacts | None:
    """What the GPU nodes that fit the shape say: the largest GPU count, the smallest GPU memory (the
    conservative choice when a shape spans GPU models) and that node's product. None when no GPU node
    fits."""
    found: list[GpuFacts] = []
    for node in nodes:
        labels = labels_of(node)
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        facts = node_gpu_facts(labels, allocatable)
        if (facts.gpu_count or facts.memory_mib) and node_fits_shape(node, shape):
            found.append(facts)
    if not found:
        return None
    with_memory = [f for f in found if f.memory_mib] or found
    smallest = min(with_memory, key=lambda f: (f.memory_mib, f.product))
    return GpuFacts(max(f.gpu_count for f in found), smallest.memory_mib, smallest.product)


__all__ = [
    "GPU_COUNT_LABEL",
    "GPU_PRODUCT_LABEL",
    "GpuFacts",
    "Shape",
    "node_fits_shape",
    "node_gpu_facts",
    "pod_shape",
    "positive_int",
    "shape_gpu_facts",
]
