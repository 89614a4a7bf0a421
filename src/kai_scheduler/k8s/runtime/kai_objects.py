"""What KAI's components agree on about shared objects, in one place below them all: the ConfigMaps a
GPU-sharing container is wired to (the admission webhook wires them, the binder fills them), which pod
incarnation a BindRequest is for (the scheduler and the binder, the scale adjuster) and when it is done,
the reservation pods' label, and the ResourceClaim a pod's claim stands for (the scheduler's state and the
binder's PreBind)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.manifests import InvalidField, short_repr
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.objects import metadata_of

# KAI's GPU reservation pods (the binder's) carry `app=kai-resource-reservation`: utility pods left out of the
# state, as the scheduling model already accounts each shared GPU (and its reservation pod's slot).
RESERVATION_APP = "kai-resource-reservation"


def shared_gpu_config_maps(prefix: str, container_index: int) -> tuple[str, str]:
    """The two ConfigMaps of a GPU-sharing container, as KAI names them: `<prefix>-<index>` and
    `<prefix>-<index>-evar`.

    The first holds `NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` and `RUNAI_NUM_OF_GPUS`; the container's env
    entries `NVIDIA_VISIBLE_DEVICES` and `RUNAI_NUM_OF_GPUS` take their values from its keys. The second
    (KAI's "direct env vars" map) holds `GPU_PORTION` and is imported whole with `envFrom`. The reference
    names both maps and the three variables but not which map carries which; this split is KAI's
    gpusharing layout: explicit entries for the device and the count (they replace a same-named entry of
    the user's, so nothing masks the device the binder hands out), the portion through `envFrom`."""
    capabilities = f"{prefix}-{container_index}"
    return capabilities, f"{capabilities}{c.SHARED_GPU_ENV_CONFIGMAP_SUFFIX}"


def fraction_container_index(obj: Mapping[str, Any]) -> int:
    """The index in `spec.containers` of the container that receives a pod's shared GPU: the one named by
    `gpu-fraction-container-name`, else (annotation absent or empty) the first.

    Raises `InvalidField` when the annotation names no container of `spec.containers` (an init container
    included: init containers are not targets)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    wanted = annotations.get(c.GPU_FRACTION_CONTAINER_ANNOTATION) if isinstance(annotations, dict) else None
    if wanted is None or wanted == "":
        return 0
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    names = container_names(spec.get("containers"))
    if wanted in names:
        return names.index(wanted)
    field = f"metadata.annotations.{c.GPU_FRACTION_CONTAINER_ANNOTATION}"
    listed = ", ".join(repr(name) for name in names) or "none"
    if wanted in container_names(spec.get("initContainers")):
        raise InvalidField(
            field,
            f"{short_repr(wanted)} is an init container; the GPU fraction goes to one of "
            f"spec.containers ({listed})",
        )
    raise InvalidField(
        field, f"no container named {short_repr(wanted)} in spec.containers (the pod's containers: {listed})"
    )


def container_names(containers: Any) -> list[Any]:
    if not isinstance(containers, list):
        return []
    return [item.get("name") if isinstance(item, dict) else None for item in containers]


def bind_request_is_for(request: JsonObject, pod: JsonObject) -> bool:
    """A BindRequest belongs to the pod incarnation its owner reference names; one without an owner
    reference, to any incarnation not created after it."""
    pod_meta = metadata_of(pod)
    meta = metadata_of(request)
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("uid")]
    if owners:
        return any(str(o["uid"]) == str(pod_meta.get("uid") or "") for o in owners)
    made, born = meta.get("creationTimestamp"), pod_meta.get("creationTimestamp")
    if made and born:
        try:
            return parse_rfc3339(str(made)) >= parse_rfc3339(str(born))
        except ValueError:
            return True
    return True


def bind_request_stands(request: JsonObject, pod: JsonObject) -> bool:
    """Whether a BindRequest is the scheduler's standing decision for `pod`: for this incarnation of it
    (`bind_request_is_for`) and not Failed (a failed one is given up: the pod is scheduled again)."""
    return bind_request_is_for(request, pod) and (request.get("status") or {}).get("phase") != "Failed"


def bind_request_succeeded(request: JsonObject, pod: JsonObject | None) -> bool:
    """Whether a BindRequest is done: its status says Succeeded (KAI's binder writes it), or its pod (the
    incarnation it is for) is bound to its selected node. Our binder writes no Succeeded phase (issue #23:
    the pod's `spec.nodeName` already says it), so every reader asks this rather than the phase."""
    if (request.get("status") or {}).get("phase") == "Succeeded":
        return True
    if pod is None or not bind_request_is_for(request, pod):
        return False
    node = (request.get("spec") or {}).get("selectedNode")
    return bool(node) and (pod.get("spec") or {}).get("nodeName") == node


def pod_claim_name(pod: JsonObject, name: str) -> str | None:
    """The ResourceClaim a pod's claim `name` stands for (KAI's `GetResourceClaimName`): the one it names,
    or the one made from its template (`status.resourceClaimStatuses`)."""
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if entry.get("name") != name:
            continue
        if entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == name and status.get("resourceClaimName"):
                return str(status["resourceClaimName"])
        return None
    return None


__all__ = [
    "RESERVATION_APP",
    "bind_request_is_for",
    "bind_request_stands",
    "bind_request_succeeded",
    "container_names",
    "fraction_container_index",
    "pod_claim_name",
    "shared_gpu_config_maps",
]
