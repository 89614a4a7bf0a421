"""DRA-backed extended resources (Kubernetes' KEP-5004, as KAI v0.17 schedules them).

A DeviceClass answers to two extended resource names: `deviceclass.resource.kubernetes.io/<class>`
always, and its `spec.extendedResourceName` when set (two classes naming the same resource: the newer
one wins, as Kubernetes' extended resource cache decides). A pod asking for such a name on a node that
has no device-plugin allocatable for it gets the devices from a claim made for the pod alone: one
device request per container and resource, named `container-<i>-request-<j>` (i: the container's
index, init containers first; j: the resource's place among the container's sorted resource names).
Init containers that run before the others (not sidecars) reuse the devices of the containers still
to come where those are enough, and share one request, the largest, otherwise: the kubelet runs them
one at a time. The scheduler keeps that claim in memory; the binder creates it (`generateName:
<pod>-extended-resources-`, annotated `resource.kubernetes.io/extended-resource-claim: "true"`) and
names it in the pod's `status.extendedResourceClaimStatus`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Final

from kai_scheduler.api.objects import (
    Container,
    ContainerExtendedResourceRequest,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    Pod,
    ResourceClaim,
)

IMPLICIT_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
# The in-memory claim's name: not a valid object name, so no real claim can have it.
SPECIAL_CLAIM_NAME: Final = "<extended-resources>"

_NOT_EXTENDED: Final = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
_EPOCH: Final = datetime.min.replace(tzinfo=UTC)


def classes_by_resource(classes: Iterable[DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that backs it (see the module doc)."""
    by_name: dict[str, str] = {}
    explicit: dict[str, DeviceClass] = {}
    for device_class in classes:
        by_name[IMPLICIT_PREFIX + device_class.metadata.name] = device_class.metadata.name
        name = device_class.spec.extended_resource_name
        if not name:
            continue
        current = explicit.get(name)
        if current is None or _age_key(device_class) > _age_key(current):
            explicit[name] = device_class
    for name, device_class in explicit.items():
        by_name.setdefault(name, device_class.metadata.name)
    return by_name


def _age_key(device_class: DeviceClass) -> tuple[datetime, str]:
    return (device_class.metadata.creation_timestamp or _EPOCH, device_class.metadata.name)


def may_ask_extended(pod: Pod) -> bool:
    """Whether any container asks for a resource a DeviceClass could back (cheap: no class looked at;
    asked of every pod the cache is handed, so a container whose requests and limits name only CPU,
    memory and the like is passed over without a look at each name). (Plain loops, each API attribute
    read once: a pod's own check cost some 9,000 instructions with a generator and the builtin `any`
    per names, the pod's tuple of containers made even without init containers.)"""
    spec = pod.spec
    init_containers = spec.init_containers
    for container in (*init_containers, *spec.containers) if init_containers else spec.containers:
        resources = container.resources
        requests, limits = resources.requests, resources.limits
        if (not _NOT_EXTENDED.issuperset(requests) and _names_extended(requests)) or (
            not _NOT_EXTENDED.issuperset(limits) and _names_extended(limits)
        ):
            return True
    return False


def _names_extended(names: Iterable[str]) -> bool:
    """Whether any of `names` is a resource a DeviceClass could back."""
    for name in names:  # noqa: SIM110 - a loop: the builtin and a generator cost more
        if name not in _NOT_EXTENDED and not name.startswith("hugepages-"):
            return True
    return False


def is_extended_claim(claim: ResourceClaim) -> bool:
    return claim.metadata.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true"


@dataclass(frozen=True, slots=True)
class ExtendedAsk:
    """What a pod asks of DRA-backed extended resources: the whole-number amount per resource name (pod
    level) and the class backing each, with the pod's containers to build per-node requests from."""

    amounts: Mapping[str, int]
    classes: Mapping[str, str]
    init_containers: tuple[Container, ...]
    containers: tuple[Container, ...]


def extended_ask(pod: Pod, backing: Mapping[str, str]) -> ExtendedAsk | None:
    """The pod's ask, or None when none of its resources is DRA-backed."""
    amounts = {}
    for name, amount in _pod_amounts(pod).items():
        if name in backing and amount > 0 and amount.denominator == 1:
            amounts[name] = int(amount)
    if not amounts:
        return None
    return ExtendedAsk(
        amounts,
        {name: backing[name] for name in amounts},
        tuple(pod.spec.init_containers),
        tuple(pod.spec.containers),
    )


def _pod_amounts(pod: Pod) -> dict[str, Fraction]:
    """The pod's requests as the kubelet adds them up: its containers and sidecars together, or an init
    container with the sidecars started before it, whichever is more."""
    running: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    for container in pod.spec.init_containers:
        asked = container.resources.effective_requests()
        if container.restart_policy == "Always":
            for name, amount in asked.items():
                running[name] = running.get(name, Fraction(0)) + amount
            continue
        for name, amount in asked.items():
            peak[name] = max(peak.get(name, Fraction(0)), amount + running.get(name, Fraction(0)))
    for container in pod.spec.containers:
        for name, amount in container.resources.effective_requests().items():
            running[name] = running.get(name, Fraction(0)) + amount
    return {
        name: max(running.get(name, Fraction(0)), peak.get(name, Fraction(0))) for name in {*running, *peak}
    }


def requests_and_mappings(
    ask: ExtendedAsk, names: Iterable[str]
) -> tuple[tuple[DeviceRequest, ...], tuple[ContainerExtendedResourceRequest, ...]]:
    """The device requests of the pod's claim for the resources `names` (those its node serves through
    DRA), and which request serves which container (see the module doc)."""
    containers = (*ask.init_containers, *ask.containers)
    inits = len(ask.init_containers)
    long_lived = [i for i, ctr in enumerate(containers) if i >= inits or ctr.restart_policy == "Always"]
    short_lived = [i for i in range(inits) if containers[i].restart_policy != "Always"]
    requests: list[DeviceRequest] = []
    mappings: list[ContainerExtendedResourceRequest] = []
    for resource in sorted(set(names)):
        device_class = ask.classes.get(resource)
        if device_class is None:
            continue
        kept: dict[int, DeviceRequest] = {}
        kept_mappings: list[ContainerExtendedResourceRequest] = []
        for i in long_lived:
            request, mine = _container_request(i, containers[i], resource, device_class, [])
            if request is not None:
                kept[i] = request
            kept_mappings.extend(mine)
        largest: DeviceRequest | None = None
        short_names: set[str] = set()
        short_mappings: list[ContainerExtendedResourceRequest] = []
        for i in short_lived:
            later = [kept[j] for j in sorted(kept) if j >= i]
            request, mine = _container_request(i, containers[i], resource, device_class, later)
            if request is not None:
                short_names.add(request.name)
                if largest is None or _count(largest) < _count(request):
                    largest = request
            short_mappings.extend(mine)
        if largest is not None and len(short_names) > 1:
            short_mappings = [
                m.model_copy(update={"request_name": largest.name})
                if m.request_name in short_names and m.request_name != largest.name
                else m
                for m in short_mappings
            ]
        if largest is not None:
            requests.append(largest)
        requests.extend(kept[i] for i in sorted(kept))
        mappings.extend(kept_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: r.name)
    return tuple(requests), tuple(mappings)


def _count(request: DeviceRequest) -> int:
    return request.exactly.count if request.exactly is not None else 0


def _container_request(
    index: int, container: Container, resource: str, device_class: str, reusable: list[DeviceRequest]
) -> tuple[DeviceRequest | None, list[ContainerExtendedResourceRequest]]:
    asked = container.resources.effective_requests()
    amount = asked.get(resource)
    if amount is None or amount <= 0 or amount.denominator != 1:
        return None, []
    wanted = int(amount)
    mappings = []
    covered = 0
    for request in reusable:
        covered += _count(request)
        mappings.append(_mapping(container, resource, request.name))
        if covered >= wanted:
            return None, mappings
    position = sorted(asked).index(resource)
    name = f"container-{index}-request-{position}"
    request = DeviceRequest(
        name=name,
        exactly=ExactDeviceRequest(
            device_class_name=device_class, allocation_mode="ExactCount", count=wanted - covered
        ),
    )
    mappings.append(_mapping(container, resource, name))
    return request, mappings


def _mapping(container: Container, resource: str, request: str) -> ContainerExtendedResourceRequest:
    return ContainerExtendedResourceRequest(
        container_name=container.name, resource_name=resource, request_name=request
    )
