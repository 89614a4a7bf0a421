"""What a pod is handed before its bind, and taken back when the bind fails (KAI's binder plugins: their
PreBind and rollback), and the words of its Scheduled event.

`binder.py` decides when and how often a BindRequest is tried and records the outcome; this module is
what one attempt writes on the pod's side: the annotations (`received-resource-type`, the predicted NUMA
zones), for shared GPUs the group labels, reservation pods and GPU ConfigMaps (`gpu_env.py`,
`reservations.py`), and the DRA claims (`claim_binding.py`, `extended_claims.py`).
"""

from __future__ import annotations

import json
import logging

from kai_scheduler.api import constants as c
from kai_scheduler.api.labels import gpu_group_labels
from kai_scheduler.k8s.binder import extended_claims
from kai_scheduler.k8s.binder.claim_binding import bind_claims
from kai_scheduler.k8s.binder.errors import BindFailure
from kai_scheduler.k8s.binder.gpu_env import get_pod, write_gpu_config_maps
from kai_scheduler.k8s.binder.reservations import Reservations
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.objects import metadata_of

log = logging.getLogger(__name__)


async def hand_claims(client: KubeClient, request: JsonObject, pod: JsonObject) -> None:
    """DRA: the claims' allocations are written before the pod is bound (KAI's PreBind)."""
    if (request.get("spec") or {}).get("resourceClaimAllocations"):
        failure = await bind_claims(client, request, pod)
        if failure is not None:
            raise BindFailure(failure)
    if extended_claims.carries_extended_claim(request):
        failure = await extended_claims.bind_extended_claim(client, request, pod)
        if failure is not None:
            raise BindFailure(failure)


async def hand_gpus(
    client: KubeClient,
    reservations: Reservations | None,
    request: JsonObject,
    pod: JsonObject,
    node: str,
    *,
    cdi: bool,
) -> None:
    """The pod's annotations and, for shared GPUs, its group labels, reservation pods and GPU ConfigMaps
    (`pod` is the one the request is for, as read from the API server or the cache)."""
    spec = request.get("spec") or {}
    namespace, pod_name = pod_of(request)
    groups = selected_groups(request)
    resource_type = received_type(request)
    patch: JsonObject = {"metadata": {"annotations": bind_annotations(request, resource_type)}}
    shared = shares_gpus(resource_type, groups)
    if shared:
        patch["metadata"]["labels"] = gpu_group_labels(groups)
    meta = metadata_of(pod)
    has = {
        "annotations": meta.get("annotations") or {},
        "labels": meta.get("labels") or {},
    }
    if any(has[part].get(k) != v for part, values in patch["metadata"].items() for k, v in values.items()):
        await client.patch(PODS, pod_name, patch, namespace)  # no write when the pod has it all
    if not shared:
        return
    devices = groups
    if reservations is not None:
        devices = await reservations.reserve_all(node, groups)
    received = spec.get("receivedGPU") or {}
    await write_gpu_config_maps(client, pod, namespace, pod_name, devices, received, cdi=cdi)


async def take_back(
    client: KubeClient, namespace: str, pod_name: str, request: JsonObject, node: str
) -> None:
    """Take the GPU labels and the extended-resource claim back from a pod that did not get bound (KAI's
    rollback)."""
    groups = selected_groups(request)
    extended = extended_claims.carries_extended_claim(request)
    if not groups and not extended:
        return
    try:
        pod = await get_pod(client, namespace, pod_name)
        if pod is None or (pod.get("spec") or {}).get("nodeName") == node:
            return  # gone, or bound after all (the answer was lost): what it was handed stays
        if groups:
            removal: dict[str, None] = dict.fromkeys(gpu_group_labels(groups))
            await client.patch(PODS, pod_name, {"metadata": {"labels": removal}}, namespace)
        if extended:
            await extended_claims.roll_back_extended_claim(client, pod)
    except (ApiStatusError, ConnectionError, OSError) as error:
        log.debug("binder: rollback of %s/%s: %s", namespace, pod_name, error)


def pod_of(request: JsonObject) -> tuple[str, str]:
    """The namespace and name of the pod a BindRequest is for."""
    meta = request["metadata"]
    return meta.get("namespace") or "default", str((request.get("spec") or {}).get("podName") or meta["name"])


def selected_groups(request: JsonObject) -> list[str]:
    return [str(g) for g in (request.get("spec") or {}).get("selectedGPUGroups") or []]


def received_type(request: JsonObject) -> str:
    return str((request.get("spec") or {}).get("receivedResourceType") or "Regular")


def scheduled_message(
    pod: JsonObject, node: str, resource_type: str, groups: list[str], received: JsonObject
) -> str:
    """kube-scheduler's words for a bind, and the shared GPUs a fractional pod got."""
    meta = metadata_of(pod)
    message = f"Successfully assigned {meta.get('namespace') or 'default'}/{meta.get('name')} to {node}"
    if shares_gpus(resource_type, groups):
        plural = "s" if len(groups) > 1 else ""
        portion = received.get("portion")
        message += f" on shared GPU group{plural} {', '.join(groups)}"
        if portion:
            message += f" ({portion} of {'each' if plural else 'the'} GPU)"
    return message


def bind_annotations(request: JsonObject, resource_type: str) -> dict[str, str]:
    """What the binder writes on the pod it binds: its received-resource-type and, as KAI v0.17's binder,
    the NUMA zones the scheduler predicted (`kai.scheduler/numa-placement-predicted`, from the BindRequest's
    `predictedNUMAZones`), which the scheduler reads back to know the zones the pod takes."""
    annotations = {c.RECEIVED_RESOURCE_TYPE_ANNOTATION: resource_type}
    zones = (request.get("spec") or {}).get("predictedNUMAZones")
    if zones:
        annotations[c.NUMA_PLACEMENT_PREDICTED_ANNOTATION] = json.dumps(zones, separators=(",", ":"))
    return annotations


def shares_gpus(resource_type: str, groups: list[str]) -> bool:
    """A fractional pod with GPU groups: it gets group labels (and reservation pods) before its binding."""
    return resource_type == "Fraction" and bool(groups)


__all__ = [
    "bind_annotations",
    "hand_claims",
    "hand_gpus",
    "pod_of",
    "received_type",
    "scheduled_message",
    "selected_groups",
    "shares_gpus",
    "take_back",
]
