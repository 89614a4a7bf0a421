"""What of a pod the kubelet's Topology Manager aligns, in the units the zones count in (`zones.amount`).

The kubelet gives hints per alignment unit: the whole pod in `pod` scope, each container in `container`
scope. In container scope the app containers and native sidecars (init containers that keep running)
share the zones' room one after the other (`concurrent`); an ordinary init container runs alone before
them and gives its resources back, so it is aligned against the zones as they are and never charged
(`serial`).

CPU is aligned only for a Guaranteed pod and only for a whole number of CPUs (the CPU manager's static
policy gives exclusive CPUs to nothing else): a container asking for 500m stays in the shared pool and
constrains no zone, so its CPU is left out, even in the pod-scope sum.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from kai_scheduler.api.objects import Container, Pod
from kai_scheduler.plugins.numa.zones import POD_SCOPE, Amounts, amount

GUARANTEED: Final = "Guaranteed"
BURSTABLE: Final = "Burstable"
BEST_EFFORT_QOS: Final = "BestEffort"
_QOS_RESOURCES: Final = ("cpu", "memory")


def qos_class(pod: Pod) -> str:
    """The pod's QoS class as the API server sets it (`status.qosClass`): Guaranteed when every container
    has CPU and memory limits and its requests equal them (a request left out takes its limit)."""
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for container in (*pod.spec.init_containers, *pod.spec.containers):
        for name, quantity in container.resources.effective_requests().items():
            if name in _QOS_RESOURCES and quantity > 0:
                requests[name] = requests.get(name, Fraction(0)) + quantity
        found = set()
        for name, quantity in container.resources.limits.items():
            if name in _QOS_RESOURCES and quantity > 0:
                limits[name] = limits.get(name, Fraction(0)) + quantity
                found.add(name)
        if len(found) < len(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT_QOS
    if guaranteed and requests == limits:
        return GUARANTEED
    return BURSTABLE


def is_qos_gated(resource: str) -> bool:
    """Resources the kubelet aligns for Guaranteed pods only (CPU and memory managers); devices are
    aligned whatever the pod's QoS."""
    return resource in _QOS_RESOURCES or resource.startswith("hugepages-")


@dataclass(frozen=True, slots=True)
class NumaRequests:
    """A pod's alignment units (see the module doc) and whether it is Guaranteed."""

    guaranteed: bool
    pod: tuple[Amounts, ...]  # pod scope: one unit
    concurrent: tuple[Amounts, ...]  # container scope: sidecars, then app containers
    serial: tuple[Amounts, ...]  # container scope: ordinary init containers
    # What the pod asks for in all (its request as the scheduler counts it), by resource.
    total: Amounts
    # Equal for pods the plugin answers alike on the same zones.
    signature: tuple[object, ...] = ()

    def for_scope(self, scope: str) -> tuple[tuple[Amounts, ...], tuple[Amounts, ...]]:
        """The units charged one after the other, and those aligned alone."""
        return (self.pod, ()) if scope == POD_SCOPE else (self.concurrent, self.serial)


def numa_requests(pod: Pod, guaranteed: bool | None = None) -> NumaRequests:
    """The pod's units; `guaranteed` None: from its QoS class."""
    if guaranteed is None:
        guaranteed = qos_class(pod) == GUARANTEED
    total = _amounts(pod.resource_requests().items())
    pod_unit = dict(total)
    _set_cpu(pod_unit, _pod_aligned_cpu(pod, guaranteed))
    concurrent: list[Amounts] = []
    serial: list[Amounts] = []
    for container in pod.spec.init_containers:
        unit = _container_unit(container, guaranteed)
        (concurrent if _is_sidecar(container) else serial).append(unit)
    concurrent.extend(_container_unit(container, guaranteed) for container in pod.spec.containers)
    signature = (
        guaranteed,
        _frozen(total),
        _frozen(pod_unit),
        tuple(_frozen(unit) for unit in concurrent),
        tuple(_frozen(unit) for unit in serial),
    )
    return NumaRequests(guaranteed, (pod_unit,), tuple(concurrent), tuple(serial), total, signature)


def _frozen(unit: Amounts) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(unit.items()))


def _amounts(items: Iterable[tuple[str, Fraction]]) -> Amounts:
    return {name: amount(name, quantity) for name, quantity in items if quantity > 0}


def _container_unit(container: Container, guaranteed: bool) -> Amounts:
    unit = _amounts(container.resources.effective_requests().items())
    _set_cpu(unit, _aligned_cpu(container, guaranteed))
    return unit


def _set_cpu(unit: Amounts, millicores: float) -> None:
    if millicores > 0:
        unit["cpu"] = millicores
    else:
        unit.pop("cpu", None)


def _is_sidecar(container: Container) -> bool:
    return container.restart_policy == "Always"


def _aligned_cpu(container: Container, guaranteed: bool) -> float:
    """The container's exclusive (aligned) CPU in millicores: its request in a Guaranteed pod when whole."""
    if not guaranteed:
        return 0.0
    cpu = container.resources.effective_requests().get("cpu", Fraction(0))
    return float(cpu * 1000) if cpu.denominator == 1 else 0.0


def _pod_aligned_cpu(pod: Pod, guaranteed: bool) -> float:
    """The pod's aligned CPU as the kubelet sums it: the long-running containers and sidecars, or the
    largest init container with the sidecars started before it, whichever is more."""
    init_peak = sidecars = 0.0
    for container in pod.spec.init_containers:
        cpu = _aligned_cpu(container, guaranteed)
        if _is_sidecar(container):
            sidecars += cpu
        else:
            init_peak = max(init_peak, sidecars + cpu)
    running = sidecars + sum(_aligned_cpu(container, guaranteed) for container in pod.spec.containers)
    return max(running, init_peak)
