"""What controllers share: reading a manifest's fields, owner references, pods from templates, names.

Controllers work on plain manifests (dicts as the API server serves them), so the simulator and the fake
API server can both drive them. Names follow Kubernetes: a controller that lets the API server pick the
name sets `metadata.generateName`; whoever stores the object (`Store`) completes it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from kai_scheduler.workloads.errors import WorkloadError

Manifest = dict[str, Any]
# The characters Kubernetes' generated names and hashes use (k8s.io/apimachinery/pkg/util/rand): no
# vowels, no look-alikes, so no words and no confusion.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX_LENGTH = 5
TERMINAL_PHASES = ("Succeeded", "Failed")


class View(Protocol):
    """The objects a controller can see: those controlled by `owner` (its controller ownerReference
    points at the owner's uid), in creation order; pods carry `status.phase`."""

    def owned(self, owner: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]: ...


@dataclass
class Reconciled:
    """What one reconcile decided: objects to create (each with its ownerReferences), objects to delete
    (with everything they control), and the reconciled object's new `status` (None: unchanged)."""

    create: list[Manifest] = field(default_factory=list)
    delete: list[Mapping[str, Any]] = field(default_factory=list)
    status: dict[str, Any] | None = None


Reconcile = Callable[[Mapping[str, Any], View, datetime], Reconciled]


# --- reading fields -----------------------------------------------------------------------------


def ref(obj: Mapping[str, Any]) -> str:
    """`Job default/train`, how errors name an object."""
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind', '?')} {meta.get('namespace') or 'default'}/{meta.get('name', '?')}"


def at(obj: Mapping[str, Any], *path: str) -> Any:
    """The value at `path` (a digit step indexes a list), or None when any step is missing."""
    value: Any = obj
    for key in path:
        if isinstance(value, list) and key.isdigit():
            value = value[int(key)] if int(key) < len(value) else None
        elif isinstance(value, Mapping):
            value = value.get(key)
        else:
            return None
    return value


def field_path(path: tuple[str, ...]) -> str:
    """`spec.workerGroupSpecs[0].replicas`, as errors name a field."""
    out = ""
    for key in path:
        out += f"[{key}]" if key.isdigit() else (f".{key}" if out else key)
    return out


def mapping(obj: Mapping[str, Any], *path: str, required: bool = False) -> Mapping[str, Any]:
    value = at(obj, *path)
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        problem = "is missing" if value is None else f"expected an object, got {type(value).__name__}"
        raise WorkloadError(problem, object_ref=ref(obj), field=field_path(path))
    return value


def items(obj: Mapping[str, Any], *path: str) -> list[Mapping[str, Any]]:
    value = at(obj, *path)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise WorkloadError("expected a list of objects", object_ref=ref(obj), field=field_path(path))
    return value


def integer(obj: Mapping[str, Any], *path: str, default: int, minimum: int = 0) -> int:
    value = at(obj, *path)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError(
            f"expected an integer, got {value!r}", object_ref=ref(obj), field=field_path(path)
        )
    if value < minimum:
        raise WorkloadError(
            f"must be at least {minimum}, got {value}", object_ref=ref(obj), field=field_path(path)
        )
    return value


def optional_integer(obj: Mapping[str, Any], *path: str, minimum: int = 0) -> int | None:
    return None if at(obj, *path) is None else integer(obj, *path, default=0, minimum=minimum)


def text(obj: Mapping[str, Any], *path: str, default: str = "", choices: Sequence[str] = ()) -> str:
    value = at(obj, *path)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise WorkloadError(f"expected a string, got {value!r}", object_ref=ref(obj), field=field_path(path))
    if choices and value not in choices:
        raise WorkloadError(
            f"must be one of {', '.join(choices)}, got {value!r}", object_ref=ref(obj), field=field_path(path)
        )
    return value


def flag(obj: Mapping[str, Any], *path: str) -> bool:
    value = at(obj, *path)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise WorkloadError(
            f"expected true or false, got {value!r}", object_ref=ref(obj), field=field_path(path)
        )
    return value


def name_of(obj: Mapping[str, Any]) -> str:
    return str(at(obj, "metadata", "name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(at(obj, "metadata", "namespace") or "default")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(at(obj, "metadata", "labels") or {})


def phase_of(pod: Mapping[str, Any]) -> str:
    return str(at(pod, "status", "phase") or "Pending")


def is_active(pod: Mapping[str, Any]) -> bool:
    """Neither finished nor being deleted: what controllers count towards their replicas."""
    return phase_of(pod) not in TERMINAL_PHASES and at(pod, "metadata", "deletionTimestamp") is None


def is_running(pod: Mapping[str, Any]) -> bool:
    return phase_of(pod) == "Running" and at(pod, "metadata", "deletionTimestamp") is None


def group_of(obj: Mapping[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "")
    return api_version.split("/")[0] if "/" in api_version else ""


# --- making objects -----------------------------------------------------------------------------


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller ownerReference to `owner`, as every controller sets on what it creates."""
    return {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": name_of(owner),
        "uid": str(at(owner, "metadata", "uid") or ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_of(obj: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    """A pod template (`metadata`, `spec` with containers) at `path`."""
    template = mapping(obj, *path, required=True)
    spec = template.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("containers"), list):
        raise WorkloadError(
            "is missing", object_ref=ref(obj), field=field_path((*path, "spec", "containers"))
        )
    return template


def pod_from_template(
    owner: Mapping[str, Any],
    template: Mapping[str, Any],
    *,
    name: str | None = None,
    generate_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Manifest:
    """A pod as `owner`'s controller creates it from `template`: the template's labels and annotations plus
    the controller's, its spec (plus `spec` fields the controller sets), owned by `owner`."""
    meta = template.get("metadata") or {}
    metadata: Manifest = {
        "namespace": namespace_of(owner),
        "labels": {**(meta.get("labels") or {}), **(labels or {})},
        "annotations": {**(meta.get("annotations") or {}), **(annotations or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if name is not None:
        metadata["name"] = name
    else:
        metadata["generateName"] = generate_name or f"{name_of(owner)}-"
    pod_spec = copy.deepcopy(dict(template.get("spec") or {}))
    pod_spec.update(spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def child_object(
    owner: Mapping[str, Any],
    api_version: str,
    kind: str,
    spec: Mapping[str, Any],
    *,
    name: str | None = None,
    generate_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Manifest:
    """A controller object (Job, ReplicaSet, StatefulSet, RayCluster, ...) that `owner` creates."""
    metadata: Manifest = {
        "namespace": namespace_of(owner),
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
        "ownerReferences": [owner_reference(owner)],
    }
    if name is not None:
        metadata["name"] = name
    else:
        metadata["generateName"] = generate_name or f"{name_of(owner)}-"
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": copy.deepcopy(dict(spec))}


def with_labels(
    template: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str] | None = None
) -> Manifest:
    """`template` with more labels (and annotations) in its metadata."""
    out = copy.deepcopy(dict(template))
    meta = dict(out.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    out["metadata"] = meta
    return out


def fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """Kubernetes' `rand.SafeEncodeString`: each character mapped into the name alphabet."""
    return "".join(NAME_ALPHABET[ord(ch) % len(NAME_ALPHABET)] for ch in text)


def template_hash(template: Mapping[str, Any]) -> str:
    """A pod template's hash as Deployments and StatefulSets label it (`pod-template-hash`): the FNV-32a
    of the template, safe-encoded. (Kubernetes hashes its Go printing of the template; the value differs,
    its form and its stability for an unchanged template do not.)"""
    return safe_encode(str(fnv32a(json.dumps(template, sort_keys=True, default=str).encode())))
