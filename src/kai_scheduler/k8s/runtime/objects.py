"""Small typed accessors of Kubernetes objects as the API server sends them (JSON dicts): one place that
knows that `metadata`, its maps and its lists may be absent or null."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.gpu_request import node_gpu_memory_mib


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's `metadata` ({} when absent or null)."""
    return obj.get("metadata") or {}


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return metadata_of(obj).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return metadata_of(obj).get("annotations") or {}


def owner_references_of(obj: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return metadata_of(obj).get("ownerReferences") or ()


def uid_of(obj: Mapping[str, Any]) -> str:
    """An object's uid ("" when it has none yet)."""
    return str(metadata_of(obj).get("uid") or "")


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object carries a deletionTimestamp (it is being deleted)."""
    return bool(metadata_of(obj).get("deletionTimestamp"))


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    metadata = metadata_of(obj)
    namespace = metadata.get("namespace")
    name = str(metadata.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def resource_version(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("resourceVersion") or "")


def gpu_memory_mib_of(node: Mapping[str, Any]) -> float:
    """A node's per-GPU memory (MiB) from the GPU Operator's label (`api.gpu_request.node_gpu_memory_mib`:
    floored to 100 MiB as KAI does; 0 when unknown)."""
    return float(node_gpu_memory_mib(labels_of(node).get(c.GPU_MEMORY_LABEL)))


__all__ = [
    "annotations_of",
    "gpu_memory_mib_of",
    "is_deleting",
    "labels_of",
    "metadata_of",
    "object_key",
    "owner_references_of",
    "resource_version",
    "uid_of",
]
