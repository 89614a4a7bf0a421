"""The node scale adjuster (KAI's `nodescaleadjuster`): lets a cluster autoscaler add nodes for GPU
fractions.

A pod that asks for part of a GPU (`gpu-fraction`, `gpu-memory`) requests no `nvidia.com/gpu`, so a cluster
autoscaler never adds a GPU node for it. For this scheduler's unschedulable fractional pods the adjuster
creates *scaling pods* that request whole GPUs, one set per node shape, scheduled by the default scheduler
(which the autoscaler understands); it deletes them once a node comes up for them or they are no longer
needed. `plan_scaling_pods` is the pure plan, `ScaleAdjuster` the controller. docs/scale-adjuster.md says
which pods count, how much GPU each needs, how shapes and scaling pods look and when the plan changes.

    adjuster = ScaleAdjuster(client, informers)   # informers: pods, nodes (+ podgroups, bindrequests)
    await adjuster.run(stop)                      # until `stop` (an asyncio.Event) is set
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Final, NamedTuple

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Affinity, Taint, Toleration
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.cluster.bookkeeping import parse_rfc3339
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    NODES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    ApiStatusError,
    JsonObject,
    KubeClient,
    ResourceKind,
)
from kai_scheduler.k8s.runtime.informers import POD_INDEX, Informer, InformerSet
from kai_scheduler.k8s.runtime.kai_objects import bind_request_is_for
from kai_scheduler.k8s.runtime.objects import object_key
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.model.builder import floor_gpu_memory_mib
from kai_scheduler.model.matching import node_affinity_required_matches, untolerated_taint

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE: Final = "kai-scale-adjust"
DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO: Final = 0.1
DEFAULT_PERIOD: Final = 5.0
DEFAULT_GRACE: Final = 30.0
DEFAULT_COOLDOWN: Final = 30.0
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

GPU_COUNT_LABEL: Final = "nvidia.com/gpu.count"
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"

UNSCHEDULABLE_ON_NODE_POOL: Final = "UnschedulableOnNodePool"
NOT_CURED_BY_NODES: Final = frozenset({"OverLimit", "NonPreemptibleOverQuota", "QueueDoesNotExist"})
"""PodGroup condition reasons that more nodes do not cure: such pods never ask for nodes."""

NAMESPACES = ResourceKind("", "v1", "Namespace", "namespaces", False)
SCALE_ADJUSTER_KINDS: Final = (PODS, NODES, POD_GROUPS, BIND_REQUESTS)
"""The informers the adjuster reads (PodGroups and BindRequests are optional)."""

# The tolerations the API server's DefaultTolerationSeconds plugin gives every pod: not part of a shape.
_DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


# --- GPU Operator labels ---------------------------------------------------------------------------


class GpuFacts(NamedTuple):
    """What the GPU Operator's labels say about a node's GPUs (0 / "" when unknown)."""

    gpu_count: int
    memory_mib: int
    product: str


def _positive_int(value: Any) -> int:
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    return int(text) if text.isdigit() and int(text) > 0 else 0


def node_gpu_facts(node_labels: Mapping[str, str], allocatable: Mapping[str, Any]) -> GpuFacts:
    """`(count, memory_mib, product)` of a node, from the GPU Operator's labels:

    * count: `nvidia.com/gpu.count` (the GPUs the node has), else the allocatable `nvidia.com/gpu`;
    * memory_mib: `nvidia.com/gpu.memory` (MiB per GPU), floored to 100 MiB as KAI does;
    * product: `nvidia.com/gpu.product` (e.g. `NVIDIA-A100-SXM4-80GB`).

    Missing or malformed values give 0 (or "")."""
    count = _positive_int(node_labels.get(GPU_COUNT_LABEL))
    if not count:
        try:
            count = max(0, math.floor(parse_quantity(allocatable.get(c.GPU_RESOURCE, 0))))
        except ValueError:
            count = 0
    memory = _positive_int(node_labels.get(c.GPU_MEMORY_LABEL))
    memory = floor_gpu_memory_mib(memory)
    product = node_labels.get(GPU_PRODUCT_LABEL)
    return GpuFacts(count, memory, product if isinstance(product, str) else "")


# --- shapes ----------------------------------------------------------------------------------------


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
    labels = (pod.get("metadata") or {}).get("labels") or {}
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
    meta = node.get("metadata") or {}
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
        labels = (node.get("metadata") or {}).get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        facts = node_gpu_facts(labels, allocatable)
        if (facts.gpu_count or facts.memory_mib) and node_fits_shape(node, shape):
            found.append(facts)
    if not found:
        return None
    with_memory = [f for f in found if f.memory_mib] or found
    smallest = min(with_memory, key=lambda f: (f.memory_mib, f.product))
    return GpuFacts(max(f.gpu_count for f in found), smallest.memory_mib, smallest.product)


# --- which pods, and how much GPU ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SharedGpuRequest:
    """A pod's shared-GPU request: a fraction or an amount of memory, on `devices` GPUs."""

    fraction: Fraction | None
    memory_mib: int
    devices: int


def shared_gpu_request(pod: Mapping[str, Any]) -> SharedGpuRequest | None:
    """The pod's `gpu-fraction` / `gpu-memory` request, or None when it has none (or an invalid one,
    which admission rejects anyway)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    raw_fraction = annotations.get(c.GPU_FRACTION_ANNOTATION)
    raw_memory = annotations.get(c.GPU_MEMORY_ANNOTATION)
    if (raw_fraction is None) == (raw_memory is None):
        return None  # neither, or both (invalid)
    fraction: Fraction | None = None
    memory = 0
    if raw_fraction is not None:
        try:
            fraction = Fraction(str(raw_fraction).strip())
        except (ValueError, ZeroDivisionError):
            return None
        if not 0 < fraction < 1:
            return None
    else:
        memory = _positive_int(raw_memory)
        if not memory:
            return None
    raw_devices = annotations.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION)
    devices = 1 if raw_devices is None else _positive_int(raw_devices)
    if not devices:
        return None
    return SharedGpuRequest(fraction, memory, devices)


def shared_gpu_units(
    request: SharedGpuRequest, gpu_memory_mib: int, gpu_memory_to_fraction_ratio: Fraction
) -> Fraction:
    """GPUs' worth of the request (see the module doc): f x N for a fraction; for memory, min(1, m / M) x
    N with the GPU memory M of the shape's nodes when known, else the ratio x N."""
    if request.fraction is not None:
        return request.fraction * request.devices
    if gpu_memory_mib > 0:
        return min(Fraction(1), Fraction(request.memory_mib, gpu_memory_mib)) * request.devices
    return gpu_memory_to_fraction_ratio * request.devices


def is_scaling_pod(pod: Mapping[str, Any], namespace: str = DEFAULT_NAMESPACE) -> bool:
    meta = pod.get("metadata") or {}
    return meta.get("namespace") == namespace and (meta.get("labels") or {}).get(APP_LABEL) == APP_VALUE


def _pending(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    return (
        not spec.get("nodeName")
        and phase == "Pending"
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def _group_reason(pod: Mapping[str, Any], pod_groups: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The reason of the pod's PodGroup `UnschedulableOnNodePool` condition, if any."""
    meta = pod.get("metadata") or {}
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
    created = (pod.get("metadata") or {}).get("creationTimestamp")
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


def _ratio(value: float) -> Fraction:
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
    ratio = _ratio(gpu_memory_to_fraction_ratio)
    facts_by_shape = shape_facts or {}
    needs: dict[str, ShapeNeed] = {}
    for pod in pending_fractional_pods:
        spec = pod.get("spec") or {}
        if str(spec.get("schedulerName") or "") != scheduler_name or not _pending(pod):
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
        need.units += shared_gpu_units(request, facts.memory_mib if facts else 0, ratio)
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
        meta = pod.get("metadata") or {}
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


# --- the controller --------------------------------------------------------------------------------


@dataclass(slots=True)
class AdjusterStats:
    """What the adjuster did, for tests and diagnostics."""

    cycles: int = 0
    created: int = 0
    deleted: int = 0
    released: int = 0
    errors: list[str] = field(default_factory=list)


_UNRESOLVED: Final = object()
_WRITE_MEMORY = 30.0  # seconds (real time) a write is remembered while the informer does not show it


class ScaleAdjuster:
    """See the module doc. `informers` must include pods; nodes, PodGroups and BindRequests are used when
    present; the caller starts them.

    `namespace`: where scaling pods live; `ratio`: `gpu-memory-to-fraction-ratio`; `period`: seconds
    between plans (pod events bring the next one forward, but never closer than `min_interval` to the
    last); `grace`: seconds a fractional pod must have been pending to count (when no condition says it
    is unschedulable); `cooldown`: seconds a shape whose scaling pod got bound gets no new one;
    `max_gpus_per_pod`: see `plan_scaling_pods`; `priority_class`: the scaling pods' class (created when
    missing; None: no class)."""

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ratio: float = DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO,
        period: float = DEFAULT_PERIOD,
        grace: float = DEFAULT_GRACE,
        cooldown: float = DEFAULT_COOLDOWN,
        min_interval: float = 0.5,
        scheduler_name: str = c.SCHEDULER_NAME,
        image: str = DEFAULT_IMAGE,
        priority_class: str | None = DEFAULT_PRIORITY_CLASS,
        max_gpus_per_pod: int | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        _ratio(ratio)  # fail early on a bad flag
        self.client = client
        self.informers = informers
        self.namespace = namespace
        self.ratio = ratio
        self.period = period
        self.grace = grace
        self.cooldown = cooldown
        self.min_interval = min_interval
        self.scheduler_name = scheduler_name
        self.image = image
        self.priority_class = priority_class
        self.max_gpus_per_pod = max_gpus_per_pod
        self.wall = wall
        self.monotonic = monotonic
        self.stats = AdjusterStats()
        self.holds: dict[str, float] = {}  # shape key -> monotonic time the hold ends
        self._namespace_ready = False
        self._resolved_class: object = _UNRESOLVED
        self._created: dict[str, tuple[str, float]] = {}  # name -> (uid, time.monotonic()) not yet seen
        self._deleted: dict[str, tuple[str, float]] = {}  # name -> (uid, time.monotonic()) still seen
        self._wake = asyncio.Event()
        self._handlers_added = False

    # --- planning ----------------------------------------------------------------------------------

    @property
    def pods(self) -> Informer:
        return self.informers.pods

    def _relevant(self, pod: Mapping[str, Any]) -> bool:
        if is_scaling_pod(pod, self.namespace):
            return True
        spec = pod.get("spec") or {}
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        return str(spec.get("schedulerName") or "") == self.scheduler_name and (
            c.GPU_FRACTION_ANNOTATION in annotations or c.GPU_MEMORY_ANNOTATION in annotations
        )

    def _being_bound(self, candidates: Iterable[JsonObject]) -> set[str]:
        requests = self.informers.optional(BIND_REQUESTS)
        if requests is None:
            return set()
        bound: set[str] = set()
        for pod in candidates:
            key = object_key(pod)
            if any(bind_request_is_for(r, pod) for r in requests.by_index(POD_INDEX, key)):
                bound.add(key)
        return bound

    def _shape_facts(self, candidates: Iterable[JsonObject]) -> dict[str, GpuFacts]:
        nodes = self.informers.optional(NODES)
        if nodes is None:
            return {}
        node_objects = nodes.objects()
        shapes = {shape.key: shape for shape in map(pod_shape, candidates)}
        facts: dict[str, GpuFacts] = {}
        for key, shape in shapes.items():
            found = shape_gpu_facts(shape, node_objects)
            if found is not None:
                facts[key] = found
        return facts

    def _held(self) -> set[str]:
        now = self.monotonic()
        for key in [k for k, until in self.holds.items() if until <= now]:
            del self.holds[key]
        return set(self.holds)

    def _class_for_plan(self) -> str | None:
        resolved = self._resolved_class
        if resolved is _UNRESOLVED:
            return self.priority_class
        return resolved if isinstance(resolved, str) else None

    def plan(self) -> ScalingPlan:
        """The plan for the informers' current view (pure, apart from reading the caches)."""
        candidates: list[JsonObject] = []
        existing: list[JsonObject] = []
        for pod in self.pods.objects():
            if is_scaling_pod(pod, self.namespace):
                existing.append(pod)
            elif self._relevant(pod) and _pending(pod):
                candidates.append(pod)
        groups = self.informers.optional(POD_GROUPS)
        return plan_scaling_pods(
            candidates,
            existing,
            namespace=self.namespace,
            gpu_memory_to_fraction_ratio=self.ratio,
            scheduler_name=self.scheduler_name,
            now=self.wall(),
            grace=self.grace,
            pod_groups=groups.cache if groups is not None else None,
            being_bound=self._being_bound(candidates),
            shape_facts=self._shape_facts(candidates),
            max_gpus_per_pod=self.max_gpus_per_pod,
            held_shapes=self._held(),
            image=self.image,
            priority_class=self._class_for_plan(),
        )

    # --- acting ------------------------------------------------------------------------------------

    async def reconcile_once(self) -> ScalingPlan:
        """Plan, then delete and create scaling pods; returns the plan as carried out. API failures of
        single pods are logged and counted (the next cycle tries again); a failure to reach the API at
        all is raised.

        Writes of earlier cycles that the pods informer does not show yet (a pod created here and not yet
        seen, one deleted here and still shown) are not acted on again: that would undo them."""
        self.stats.cycles += 1
        self._forget_seen_writes()
        plan = self.plan()
        if plan.create and not self._prepared:
            await self._prepare()
            plan = self.plan()  # with the priority class as resolved
        plan.delete = [name for name in plan.delete if name not in self._created and not self._stale(name)]
        plan.create = [m for m in plan.create if m["metadata"]["name"] not in self._created]
        released = sorted({shape for name in plan.delete if (shape := self._released_shape(name))})
        plan.released_shapes = released
        now = self.monotonic()
        for key in released:
            self.holds[key] = now + self.cooldown
        if released:
            self.stats.released += len(released)
            log.info("scaling pods got nodes (shapes %s); deleting them", ", ".join(released))
        await asyncio.gather(*(self._delete(name) for name in plan.delete))
        await asyncio.gather(*(self._create(manifest) for manifest in plan.create))
        return plan

    def _cached(self, name: str) -> JsonObject | None:
        return self.pods.get(name, self.namespace)

    def _released_shape(self, name: str) -> str | None:
        """The shape of a scaling pod that got a node (or finished)."""
        pod = self._cached(name)
        if pod is None:
            return None
        phase = str((pod.get("status") or {}).get("phase") or "Pending")
        if not (pod.get("spec") or {}).get("nodeName") and phase not in ("Succeeded", "Failed"):
            return None
        shape = ((pod.get("metadata") or {}).get("labels") or {}).get(SHAPE_LABEL)
        return str(shape) if shape else None

    def _uid(self, name: str) -> str | None:
        pod = self._cached(name)
        return str((pod.get("metadata") or {}).get("uid") or "") if pod is not None else None

    def _stale(self, name: str) -> bool:
        """Deleted here, and the cache still shows that very pod."""
        deleted = self._deleted.get(name)
        return deleted is not None and deleted[0] == self._uid(name)

    def _forget_seen_writes(self) -> None:
        expired = time.monotonic() - _WRITE_MEMORY
        for name, (uid, at) in list(self._created.items()):
            if self._uid(name) == uid or at < expired:
                del self._created[name]
        for name, (uid, at) in list(self._deleted.items()):
            if self._uid(name) != uid or at < expired:
                del self._deleted[name]

    @property
    def _prepared(self) -> bool:
        return self._namespace_ready and self._resolved_class is not _UNRESOLVED

    async def _prepare(self) -> None:
        """The namespace and the priority class, before the first scaling pod."""
        if not self._namespace_ready:
            try:
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
                await self.client.create(NAMESPACES, namespace)
                log.info("created namespace %s", self.namespace)
            except ApiStatusError as error:
                if error.code != 409:
                    self._note(f"namespace {self.namespace}: {error}")
            self._namespace_ready = True  # if it is still missing, pod creation says so and we retry
        if self._resolved_class is _UNRESOLVED:
            self._resolved_class = await self._ensure_priority_class()

    async def _ensure_priority_class(self) -> str | None:
        name = self.priority_class
        if not name:
            return None
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": SCALING_PRIORITY_VALUE,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "KAI scale adjuster scaling pods: never preempt, always preemptible.",
        }
        try:
            await self.client.create(PRIORITY_CLASSES, body)
            log.info("created PriorityClass %s", name)
            return name
        except ApiStatusError as error:
            if error.code == 409:
                return name
            create_error = error
        try:
            await self.client.get(PRIORITY_CLASSES, name)
            return name
        except ApiStatusError as error:
            self._note(f"PriorityClass {name} cannot be created ({create_error}) nor read ({error})")
            log.warning("scaling pods go without a priority class: %s is not available", name)
            return None

    async def _delete(self, name: str) -> None:
        uid = self._uid(name)
        try:
            await self.client.delete(PODS, name, self.namespace)
        except ApiStatusError as error:
            if error.code != 404:
                self._note(f"delete {self.namespace}/{name}: {error}")
            return
        self.stats.deleted += 1
        if uid:
            self._deleted[name] = (uid, time.monotonic())
        log.info("deleted scaling pod %s/%s", self.namespace, name)

    async def _create(self, manifest: JsonObject) -> None:
        name = manifest["metadata"]["name"]
        try:
            created = await self.client.create(PODS, manifest)
        except ApiStatusError as error:
            if error.code == 409:
                return
            if error.code == 404:
                self._namespace_ready = False  # the namespace is gone: create it again next time
            elif error.code == 403 and "PriorityClass" in error.message:
                self._resolved_class = _UNRESOLVED  # the class is gone: look again next time
            self._note(f"create {self.namespace}/{name}: {error}")
            return
        self.stats.created += 1
        uid = str((created.get("metadata") or {}).get("uid") or "")
        if uid:
            self._created[name] = (uid, time.monotonic())
        gpus = manifest["spec"]["containers"][0]["resources"]["requests"][c.GPU_RESOURCE]
        log.info("created scaling pod %s/%s for %s GPUs", self.namespace, name, gpus)

    def _note(self, message: str) -> None:
        log.warning("scale adjuster: %s", message)
        self.stats.errors.append(message)
        del self.stats.errors[:-50]

    # --- running -----------------------------------------------------------------------------------

    def _on_pod(self, pod: JsonObject) -> None:
        if self._relevant(pod):
            self._wake.set()

    def _on_pod_update(self, old: JsonObject, new: JsonObject) -> None:
        if self._relevant(old) or self._relevant(new):
            self._wake.set()

    def _add_handlers(self) -> None:
        if not self._handlers_added:
            self._handlers_added = True
            self.pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)

    async def run(self, stop: asyncio.Event, *, sync_timeout: float | None = None) -> None:
        """Plan and act every `period` (sooner after pod events) until `stop` is set. Waits for the
        informers to sync first."""
        waits = [informer.wait_synced() for informer in self.informers]
        if not await wait_or_stop(asyncio.gather(*waits), stop, sync_timeout):
            if not stop.is_set():
                log.warning("scale adjuster: the informers did not sync in time")
            return
        self._add_handlers()
        last = -math.inf
        while not stop.is_set():
            pause = last + self.min_interval - self.monotonic()
            if pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                if stop.is_set():
                    break
            self._wake.clear()
            last = self.monotonic()
            try:
                await self.reconcile_once()
            except asyncio.CancelledError:
                raise
            except (ApiStatusError, ConnectionError, OSError, TimeoutError) as error:
                self._note(f"cycle failed: {type(error).__name__}: {error}")
            except Exception as error:
                log.exception("scale adjuster: cycle failed unexpectedly")
                self._note(f"cycle failed: {type(error).__name__}: {error}")
            await wait_or_stop(self._wake.wait(), stop, self.period)


__all__ = [
    "APP_LABEL",
    "APP_VALUE",
    "DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO",
    "DEFAULT_NAMESPACE",
    "DEFAULT_PRIORITY_CLASS",
    "DO_NOT_DISRUPT_ANNOTATION",
    "SCALE_ADJUSTER_KINDS",
    "SHAPE_LABEL",
    "AdjusterStats",
    "GpuFacts",
    "ScaleAdjuster",
    "ScalingPlan",
    "Shape",
    "ShapeNeed",
    "SharedGpuRequest",
    "is_scaling_pod",
    "is_unschedulable",
    "node_fits_shape",
    "node_gpu_facts",
    "plan_scaling_pods",
    "pod_shape",
    "requested_gpus",
    "scaling_pod_manifest",
    "scaling_pod_name",
    "shape_gpu_facts",
    "shared_gpu_request",
    "shared_gpu_units",
]
