"""Dynamic Resource Allocation in the scheduling model: what a pod's claims ask for, the claims as a
session reads and changes them, and what a snapshot hands a session (the devices: `dra_devices.py`).

KAI's view, which this module follows (`pkg/common/resources/dra.go`,
`pkg/scheduler/cache/cluster_info/cluster_info.go`, `pkg/scheduler/api/node_info/node_info.go`):

* A device class whose name contains "gpu" is a GPU class; a claim's GPUs are the counts of its
  `exactly` requests of GPU classes (ExactCount: `count`; All: 1, as KAI cannot know more before
  allocation). A pod's DRA GPUs are the sum over its claims: they count as whole GPUs, toward its
  queue and on its node (`claim_gpus`, `with_claim_gpus`). The claim a binder made for a pod's
  DRA-backed extended resources (`model.dra_extended`) is one of the pod's claims but adds no GPUs: the
  pod's request has them already.
* A node's DRA GPUs are the devices of the ResourceSlices local to it (`spec.nodeName`) whose driver
  name contains "gpu" (`node_dra_gpus`); they join the node's GPUs, and such a node takes no pod that
  asks for a shared GPU (KAI's "DRA-only node").
* Which devices a claim gets is Kubernetes' structured allocation (KAI runs the kube-scheduler
  allocator): devices of slices that reach the node, matching the request's class and its own CEL
  selectors, not allocated to another claim (`dra_devices.py`).

Not modelled (a claim that needs them cannot be scheduled, and says so): `firstAvailable` requests,
`constraints` (matchAttribute), admin access. Device taints, consumable capacity and binding conditions
(alpha features) are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from kai_scheduler.api.objects import (
    AllocationResult,
    DeviceAllocationConfiguration,
    ObjectMeta,
    Pod,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimSpec,
    ResourceSlice,
)
from kai_scheduler.model.dra_devices import ClaimRequest, DeviceCatalog, DeviceFilter
from kai_scheduler.model.dra_extended import EXTENDED_CLAIM_ANNOTATION, SPECIAL_CLAIM_NAME, ExtendedAsk
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.resources import PodRequest

# A claim is reserved for at most this many consumers (Kubernetes' ResourceClaimReservedForMaxSize).
RESERVED_FOR_MAX: Final = 256


def is_gpu_class(device_class: str) -> bool:
    """KAI's rule (`IsGPUDeviceClass`): a class, or a driver, whose name contains "gpu"."""
    return "gpu" in device_class.lower()


def claim_gpus(spec: ResourceClaimSpec) -> int:
    """The GPUs a claim asks for, as KAI counts them for queues (`countGPUDevicesFromClaim`)."""
    total = 0
    for request in spec.devices.requests:
        exact = request.exactly
        if exact is None or not is_gpu_class(exact.device_class_name):
            continue
        total += exact.count if exact.allocation_mode == "ExactCount" else 1
    return total


def is_gpu_claim(spec: ResourceClaimSpec) -> bool:
    """Whether any `exactly` request asks for a GPU class (KAI's `IsGpuResourceClaim`)."""
    return any(
        r.exactly is not None and is_gpu_class(r.exactly.device_class_name) for r in spec.devices.requests
    )


def with_claim_gpus(request: PodRequest, gpus: int) -> PodRequest:
    """`request` plus `gpus` whole GPUs asked for through DRA claims."""
    if gpus == request.dra_gpus:
        return request
    base = request.whole_gpus - request.dra_gpus
    return replace(request, whole_gpus=base + gpus, dra_gpus=gpus)


def node_dra_gpus(slices: Iterable[ResourceSlice]) -> dict[str, int]:
    """Node name -> the GPUs its local ResourceSlices publish (KAI's `populateDRAGPUs`)."""
    counts: dict[str, int] = {}
    for slice_ in slices:
        spec = slice_.spec
        if spec.node_name and is_gpu_class(spec.driver) and spec.devices:
            counts[spec.node_name] = counts.get(spec.node_name, 0) + len(spec.devices)
    return counts


# --- a pod's claims ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    """One entry of a pod's `spec.resourceClaims`: its name in the pod, the ResourceClaim it stands for
    (namespace/name; None while a template's claim has not been made), and whether that claim is the
    pod's own (made from a template) rather than shared by name."""

    name: str
    claim: str | None
    from_template: bool

    @property
    def extended(self) -> bool:
        """The claim a binder made for the pod's DRA-backed extended resources (not in its spec)."""
        return self.name == SPECIAL_CLAIM_NAME


def pod_claim_refs(pod: Pod) -> tuple[PodClaimRef, ...]:
    """The pod's claims, resolved as Kubernetes (and KAI's `GetResourceClaimName`) resolve them; a bound
    pod's extended-resource claim (its `status.extendedResourceClaimStatus`) is one of them, its own."""
    made = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    refs = []
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name is not None:
            refs.append(PodClaimRef(entry.name, f"{pod.namespace}/{entry.resource_claim_name}", False))
        else:
            name = made.get(entry.name)
            refs.append(PodClaimRef(entry.name, f"{pod.namespace}/{name}" if name else None, True))
    extended = bound_extended_claim(pod)
    if extended is not None:
        refs.append(PodClaimRef(SPECIAL_CLAIM_NAME, extended, True))
    return tuple(refs)


def bound_extended_claim(pod: Pod) -> str | None:
    """The extended-resource claim (namespace/name) a binder made for the pod. A pending pod that names one
    has a bind that failed, whose rollback deletes the claim and clears the name: until then it waits."""
    status = pod.status.extended_resource_claim_status
    return None if status is None else f"{pod.namespace}/{status.resource_claim_name}"


def assumed_extended_claim(namespace: str, pod: str, uid: str, allocation: AllocationResult) -> ResourceClaim:
    """A pod's extended-resource claim as a bind that is on its way will make it: its devices are taken
    before the binder has created it (no real claim can have this name, nor does any pod name it)."""
    meta = ObjectMeta(
        name=f"{SPECIAL_CLAIM_NAME}{pod}",
        namespace=namespace,
        annotations={EXTENDED_CLAIM_ANNOTATION: "true"},
    )
    return reserve_claim(ResourceClaim(metadata=meta), pod, uid, allocation)


def uses_claims(pod: Pod) -> bool:
    return bool(pod.spec.resource_claims) or bound_extended_claim(pod) is not None


def missing_claim_name(pod_key: str, ref: PodClaimRef) -> str:
    """KAI's words for a template claim that has not been made yet."""
    return f"no resource claim name found for pod {pod_key} and claim reference {ref.name}"


def reserve_claim(claim: ResourceClaim, pod: str, uid: str, allocation: AllocationResult) -> ResourceClaim:
    """The claim once a bind wrote it for `pod` (KAI's binder): reserved for the pod, and allocated
    `allocation` unless it already was."""
    status = claim.status
    reserved = any(r.resource == "pods" and r.name == pod for r in status.reserved_for)
    if reserved and status.allocation is not None:
        return claim  # written already
    consumers = list(status.reserved_for)
    if not reserved:
        consumers.append(ResourceClaimConsumerReference(resource="pods", name=pod, uid=uid))
    new = status.model_copy(update={"reserved_for": consumers, "allocation": status.allocation or allocation})
    return claim.model_copy(update={"status": new})


def release_claim(claim: ResourceClaim, pod: str) -> ResourceClaim:
    """The claim once `pod` no longer uses it (finished, or gone): Kubernetes' resourceclaim controller
    takes the pod out of `reservedFor`, and deallocates a claim that nobody is reserved for."""
    status = claim.status
    consumers = [r for r in status.reserved_for if not (r.resource == "pods" and r.name == pod)]
    if len(consumers) == len(status.reserved_for):
        return claim
    allocation = status.allocation if consumers else None
    new = status.model_copy(update={"reserved_for": consumers, "allocation": allocation})
    return claim.model_copy(update={"status": new})


# --- claims ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Consumer:
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A ResourceClaim as scheduling reads it."""

    key: str
    labels: Mapping[str, str]
    requests: tuple[ClaimRequest, ...]
    config: tuple[DeviceAllocationConfiguration, ...]
    gpu: bool  # asks for a GPU class (KAI's shared-claim queue rule applies)
    reserved_for: tuple[Consumer, ...]
    allocation: AllocationResult | None
    deleting: bool = False
    problem: str | None = None  # what it asks for that the scheduler cannot allocate

    @staticmethod
    def of(claim: ResourceClaim) -> ClaimInfo:
        spec = claim.spec.devices
        requests = []
        problem = None
        for request in spec.requests:
            exact = request.exactly
            if exact is None:
                problem = f"request {request.name}: firstAvailable is not supported"
                continue
            if exact.admin_access:
                problem = f"request {request.name}: adminAccess is not supported"
            selectors = tuple(s.cel.expression for s in exact.selectors if s.cel is not None)
            requests.append(
                ClaimRequest(
                    request.name,
                    DeviceFilter(exact.device_class_name, selectors),
                    exact.allocation_mode == "All",
                    exact.count,
                )
            )
        if spec.constraints:
            problem = "spec.devices.constraints (matchAttribute) is not supported"
        config = tuple(
            DeviceAllocationConfiguration(
                source="FromClaim", requests=list(entry.requests), opaque=entry.opaque
            )
            for entry in spec.config
            if entry.opaque is not None
        )
        status = claim.status
        consumers = tuple(Consumer(r.name, r.uid) for r in status.reserved_for if r.resource == "pods")
        return ClaimInfo(
            key=claim.key,
            labels=claim.metadata.labels,
            requests=tuple(requests),
            config=config,
            gpu=is_gpu_claim(claim.spec),
            reserved_for=consumers,
            allocation=status.allocation,
            deleting=claim.metadata.deletion_timestamp is not None,
            problem=problem,
        )


@dataclass(slots=True)
class ClaimState:
    """A claim during a session: its devices (catalog indices) and the nodes that may use them (None:
    every node) while allocated, and the pods it is reserved for."""

    info: ClaimInfo
    allocation: AllocationResult | None
    devices: tuple[int, ...]
    nodes: BoolArray | None
    reserved_for: set[str] = field(default_factory=set)  # pod names (this namespace)


# --- what a snapshot hands a session -----------------------------------------------------------------


@dataclass(eq=False, slots=True)
class DraSnapshot:
    """DRA as one cycle sees it: whether the cluster serves it, the devices, every claim, and the claims of
    each of our pods that has any (pod key -> its references), and what our pods without an
    extended-resource claim ask of DRA-backed extended resources (pod key -> its ask)."""

    enabled: bool
    catalog: DeviceCatalog
    claims: dict[str, ClaimInfo]
    pod_claims: dict[str, tuple[PodClaimRef, ...]]
    extended: dict[str, ExtendedAsk] = field(default_factory=dict)
