"""The node scale adjuster (KAI's `nodescaleadjuster`): lets a cluster autoscaler add nodes for GPU
fractions.

A pod that asks for part of a GPU (`gpu-fraction`, `gpu-memory`) requests no `nvidia.com/gpu`, so a cluster
autoscaler never adds a GPU node for it. For this scheduler's unschedulable fractional pods the adjuster
creates *scaling pods* that request whole GPUs, one set per node shape, scheduled by the default scheduler
(which the autoscaler understands); it deletes them once a node comes up for them or they are no longer
needed. This module is the pure plan (`plan_scaling_pods`; node shapes: `shapes.py`), `controller.py` the
controller. docs/scale-adjuster.md says which pods count, how much GPU each needs, how shapes and scaling
pods look and when the plan changes.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.gpu_request import InvalidGpuRequest, SharedGpuRequest, read_shared_gpu_request
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.api.reasons import NOT_CURED_BY_NODES
from kai_scheduler.api.timestamps import parse_rfc3339
from kai_scheduler.k8s.runtime.client import (
    JsonObject,
)
from kai_scheduler.k8s.runtime.objects import annotations_of, metadata_of, object_key
from kai_scheduler.k8s.scaleadjuster.shapes import GpuFacts, Shape, pod_shape

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE: Final = "kai-scale-adjust"
DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO: Final = 0.1
DEFAULT_GRACE: Final = 30.0
DEFAULT_IMAGE: Final = "registry.k8s.io/pause:3.9"
DEFAULT_PRIORITY_CLASS: Final = "kai-scale-adjust"
SCALING_PRIORITY_VALUE: Final = -1

APP_LABEL: Final = "app"
APP_VALUE: Final = "kai-scale-adjust"
SHAPE_LABEL: Final = "kai.scheduler/scale-adjust-shape"
DO_NOT_DISRUPT_ANNOTATION: Final = c.DO_NOT_DISRUPT_ANNOTATION
GPU_UNITS_ANNOTATION: Final = "kai.scheduler/scale-adjust-gpu-units"
PODS_ANNOTATION: Final = "kai.scheduler/scale-adjust-pods"
NAME_PREFIX: Final = "scaling-pod-"
DEFAULT_SCHEDULER: Final = "default-scheduler"


UNSCHEDULABLE_ON_NODE_POOL: Final = "UnschedulableOnNodePool"
# NOT_CURED_BY_NODES (api.reasons): PodGroup condition reasons that more nodes do not cure, so such pods
# never ask for nodes.


# --- GPU Operator labels ---------------------------------------------------------------------------


# --- shapes ----------------------------------------------------------------------------------------


# --- which pods, and how much GPU ------------------------------------------------------------------


def shared_gpu_request(pod: Mapping[str, Any]) -> SharedGpuRequest | None:
    """The pod's `gpu-fraction` / `gpu-memory` request as `api.gpu_request` reads it, or None when it has
    none (or one admission refuses); its GPUs are `SharedGpuRequest.scaling_gpus`."""
    annotations = {key: value for key, value in annotations_of(pod).items() if isinstance(value, str)}
    try:
        return read_shared_gpu_request(annotations)
    except InvalidGpuRequest:
        return None


def is_scaling_pod(pod: Mapping[str, Any], namespace: str = DEFAULT_NAMESPACE) -> bool:
    meta = metadata_of(pod)
    return meta.get("namespace") == namespace and (meta.get("labels") or {}).get(APP_LABEL) == APP_VALUE


def is_pending(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    return not spec.get("nodeName") and phase == "Pending" and not metadata_of(pod).get("deletionTimestamp")


def _group_reason(pod: Mapping[str, Any], pod_groups: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The reason of the pod's PodGroup `UnschedulableOnNodePool` condition, if any."""
    meta = metadata_of(pod)
    name = (meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION)
    if not name:
        return None
    group = pod_groups.get(f"{meta.get('namespace') or 'default'}/{name}")
    if group is None:
        return None
    for condition in (group.get("status") or {}).get("schedulingConditions") or []:
        if condition.get("type") == UNSCHEDULABLE_ON_NODE_POOL and condition.get("status", "True") == "True":
            return str(condition.get("reason") or "Unschedulable")
    return None


def _marked_unschedulable(pod: Mapping[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return True
    return False


def is_unschedulable(
    pod: Mapping[str, Any],
    *,
    now: datetime | None,
    grace: float,
    pod_groups: Mapping[str, Mapping[str, Any]] | None = None,
) -> bool:
    """Whether a pending pod counts as unschedulable for lack of nodes (see the module doc). With `now`
    None the grace is not applied: every pending pod counts."""
    reason = _group_reason(pod, pod_groups or {})
    if reason is not None:
        return reason not in NOT_CURED_BY_NODES
    if _marked_unschedulable(pod) or now is None:
        return True
    created = metadata_of(pod).get("creationTimestamp")
    if not created:
        return True
    try:
        born = parse_rfc3339(str(created))
    except ValueError:
        return True
    return (now - born).total_seconds() >= grace


# --- the plan --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ShapeNeed:
    """What the counted pods of one shape need."""

    shape: Shape
    units: Fraction = Fraction(0)
    max_devices: int = 0
    pods: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return max(math.ceil(self.units), self.max_devices)


@dataclass(slots=True)
class ScalingPlan:
    """Scaling pods to create (manifests) and to delete (names, in the adjuster's namespace).

    `needs`: what each shape needs (by shape key); `released_shapes`: shapes whose scaling pod got bound
    (or finished) and is deleted here: the controller holds them for a cooldown."""

    create: list[JsonObject] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    needs: dict[str, ShapeNeed] = field(default_factory=dict)
    released_shapes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.create or self.delete)


def scaling_pod_name(shape: Shape, index: int) -> str:
    return f"{NAME_PREFIX}{shape.key}-{index}"


def scaling_pod_manifest(
    name: str,
    need: ShapeNeed,
    gpus: int,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    priority_class: str | None = DEFAULT_PRIORITY_CLASS,
) -> JsonObject:
    """One scaling pod asking for `gpus` whole GPUs on a node of the need's shape."""
    units = float(need.units)
    spec: JsonObject = {
        "schedulerName": DEFAULT_SCHEDULER,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "restartPolicy": "Always",
        "containers": [
            {
                "name": "scaling-pod",
                "image": image,
                "resources": {
                    "requests": {c.GPU_RESOURCE: str(gpus)},
                    "limits": {c.GPU_RESOURCE: str(gpus)},
                },
            }
        ],
    }
    spec.update(json.loads(json.dumps(dict(need.shape.spec))))  # a deep copy: manifests are mutated later
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {APP_LABEL: APP_VALUE, SHAPE_LABEL: need.shape.key},
            "annotations": {
                DO_NOT_DISRUPT_ANNOTATION: "true",
                GPU_UNITS_ANNOTATION: f"{units:.4g}",
                PODS_ANNOTATION: str(len(need.pods)),
            },
        },
        "spec": spec,
    }


def requested_gpus(pod: Mapping[str, Any]) -> int:
    """The whole GPUs a (scaling) pod asks for: the sum over its containers of the request (or limit)."""
    total = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(c.GPU_RESOURCE)
        if amount is None:
            amount = (resources.get("limits") or {}).get(c.GPU_RESOURCE)
        if amount is not None:
            try:
                total += math.floor(parse_quantity(amount))
            except ValueError:
                continue
    return total


def fraction_ratio(value: float) -> Fraction:
    ratio = Fraction(repr(float(value)))
    if not 0 < ratio <= 1:
        raise ValueError(f"gpu-memory-to-fraction-ratio must be in (0, 1], got {value}")
    return ratio


def plan_scaling_pods(
    pending_fractional_pods: Iterable[Mapping[str, Any]],
    existing_scaling_pods: Iterable[Mapping[str, Any]],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    gpu_memory_to_fraction_ratio: float = DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO,
    scheduler_name: str = c.SCHEDULER_NAME,
    now: datetime | None = None,
    grace: float = DEFAULT_GRACE,
    pod_groups: Mapping[str, Mapping[str, Any]] | None = None,
    being_bound: Collection[str] = (),
    shape_facts: Mapping[str, GpuFacts] | None = None,
    max_gpus_per_pod: int | None = None,
    held_shapes: Collection[str] = (),
    image: str = DEFAULT_IMAGE,
    priority_class: str | None = DEFAULT_PRIORITY_CLASS,
) -> ScalingPlan:
    """Pure: the scaling pods to create and delete (see the module doc).

    `pending_fractional_pods`: candidate pods (any pods may be given: those that do not count are left
    out); `existing_scaling_pods`: the scaling pods in `namespace`. `now` and `grace`: the pending time
    after which a pod counts (None: every pending pod counts). `pod_groups`: PodGroups by `namespace/name`
    (for their conditions); `being_bound`: `namespace/name` of pods with an outstanding BindRequest;
    `shape_facts`: GPU facts of the nodes of each shape (by shape key; `shape_gpu_facts`);
    `max_gpus_per_pod`: cap on one scaling pod's GPUs when no node of the shape tells its GPU count;
    `held_shapes`: shapes that get no new scaling pod (cooldown after a release)."""
    ratio = fraction_ratio(gpu_memory_to_fraction_ratio)
    facts_by_shape = shape_facts or {}
    needs: dict[str, ShapeNeed] = {}
    for pod in pending_fractional_pods:
        spec = pod.get("spec") or {}
        if str(spec.get("schedulerName") or "") != scheduler_name or not is_pending(pod):
            continue
        if object_key(pod) in being_bound:
            continue
        request = shared_gpu_request(pod)
        if request is None or requested_gpus(pod) > 0:
            continue
        if not is_unschedulable(pod, now=now, grace=grace, pod_groups=pod_groups):
            continue
        shape = pod_shape(pod)
        need = needs.get(shape.key)
        if need is None:
            need = needs[shape.key] = ShapeNeed(shape)
        facts = facts_by_shape.get(shape.key)
        need.units += request.scaling_gpus(facts.memory_mib if facts else 0, ratio)
        need.max_devices = max(need.max_devices, request.devices)
        need.pods.append(object_key(pod))

    desired: dict[str, tuple[ShapeNeed, int]] = {}
    for key, need in sorted(needs.items()):
        facts = facts_by_shape.get(key)
        cap = facts.gpu_count if facts is not None and facts.gpu_count > 0 else max_gpus_per_pod
        total = need.gpus
        chunk = max(cap, need.max_devices) if cap else total
        for index, start in enumerate(range(0, total, chunk)):
            desired[scaling_pod_name(need.shape, index)] = (need, min(chunk, total - start))

    plan = ScalingPlan(needs=needs)
    kept: set[str] = set()
    terminating: set[str] = set()
    released: set[str] = set()
    for pod in sorted(existing_scaling_pods, key=object_key):
        meta = metadata_of(pod)
        name = str(meta.get("name") or "")
        if meta.get("deletionTimestamp"):
            terminating.add(name)
            continue
        phase = str((pod.get("status") or {}).get("phase") or "Pending")
        if (pod.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
            plan.delete.append(name)  # a node came up for it: make room for the fractional pods
            shape_key = (meta.get("labels") or {}).get(SHAPE_LABEL)
            if shape_key:
                released.add(str(shape_key))
            continue
        want = desired.get(name)
        if want is not None and requested_gpus(pod) == want[1]:
            kept.add(name)
        else:
            plan.delete.append(name)
    plan.released_shapes = sorted(released)
    for name, (need, gpus) in desired.items():
        if name in kept or name in terminating:
            continue
        if need.shape.key in held_shapes or need.shape.key in released:
            continue
        plan.create.append(
            scaling_pod_manifest(
                name, need, gpus, namespace=namespace, image=image, priority_class=priority_class
            )
        )
    return plan


__all__ = [
    "APP_LABEL",
    "APP_VALUE",
    "DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO",
    "DEFAULT_NAMESPACE",
    "DEFAULT_PRIORITY_CLASS",
    "DO_NOT_DISRUPT_ANNOTATION",
    "SHAPE_LABEL",
    "ScalingPlan",
    "ShapeNeed",
    "fraction_ratio",
    "is_pending",
    "is_scaling_pod",
    "is_unschedulable",
    "plan_scaling_pods",
    "requested_gpus",
    "scaling_pod_manifest",
    "scaling_pod_name",
    "shared_gpu_request",
]
