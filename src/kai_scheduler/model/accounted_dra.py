"""What a pod's DRA claims charge an AccountedResource's `dra` source (KAI's AccountedResource design,
phase 1), on each node.

A `dra` source counts the devices of its device class that the pod's claims hold: one a device, or, with
`quantity.dra.selectedCapacity`, the device's capacity of that name, or, with
`quantity.dra.opaqueConfigField`, a number read from the claim's (or its class's) opaque configuration
of that driver, once a device. `match.dra.deviceAttributes` narrows it to devices with those attributes
(an unqualified name is in the device's driver's domain, as Kubernetes qualifies them).

The charge is placement-derived as the other sources' are:

* a claim already allocated charges the devices its allocation names, wherever the pod goes. A claim
  shared by several pods is charged once, to the first pod it is reserved for (the design: a shared
  claim's devices count once for the queue); a pod that joins an allocated claim reserved for another
  pod charges nothing for it;
* a claim still to be allocated charges, on each node, the most its requests could take there of the
  matching devices the node reaches: the allocator picks among the request's devices in its own order,
  so a limit checked against the most a node could give never lets an allocation take a queue over it.
  On nodes whose devices of the class all match (a GB200 node: every GPU is a GB200), that is exactly
  what the allocation takes.

Usage is read again from the allocations in the next cycle, so a placement that took less than its most
frees the difference then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from kai_scheduler.api.cel import DeviceView
from kai_scheduler.api.cel_k8s import SemVer
from kai_scheduler.api.objects import AccountedResourceSource, DRAAttributeValue
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.model.dra import ClaimInfo, DraSnapshot
from kai_scheduler.model.dra_devices import ClaimRequest, DeviceId
from kai_scheduler.model.nodes import FloatArray

# An attribute's wanted value as a device view holds it (a SemVer for a version).
Wanted = str | int | bool | SemVer


@dataclass(frozen=True, slots=True)
class DraRule:
    """A `dra` source as the scheduler reads it: the class, the attributes its devices must have, and what
    one device counts (`capacity`: a capacity's name; `config_field`: (driver, dotted path, unit factor);
    neither: 1)."""

    device_class: str
    attributes: tuple[tuple[str, Wanted | None], ...]  # None: a value no device has (a bad version)
    capacity: str | None
    config_field: tuple[str, str, float] | None


def dra_rule(source: AccountedResourceSource, unit_factor: float) -> DraRule | None:
    """The rule of a `dra` source (None for any other source); `unit_factor`: its opaque field's unit."""
    if source.dra is None:
        return None
    match = source.match.dra if source.match is not None else None
    wanted = match.device_attributes if match is not None else {}
    quantity = source.quantity.dra if source.quantity is not None else None
    capacity = quantity.selected_capacity if quantity is not None else None
    field = quantity.opaque_config_field if quantity is not None else None
    return DraRule(
        device_class=source.dra.device_class_name,
        attributes=tuple((key, _wanted(wanted[key])) for key in sorted(wanted)),
        capacity=capacity.capacity_name if capacity is not None else None,
        config_field=(field.driver, field.path, unit_factor) if field is not None else None,
    )


def _wanted(value: DRAAttributeValue) -> Wanted | None:
    if value.string is not None:
        return value.string
    if value.boolean is not None:
        return value.boolean
    if value.integer is not None:
        return value.integer
    if value.version is not None:
        try:
            return SemVer.parse(value.version)
        except ValueError:
            return None  # no device has a version that is none: the source matches nothing
    return None


def _has(view: DeviceView, key: str, wanted: Wanted | None) -> bool:
    domain, _, name = key.rpartition("/")
    found = view.attributes.get(domain or view.driver, {}).get(name)
    if found is None or wanted is None or isinstance(found, bool) != isinstance(wanted, bool):
        return False  # True is no 1 here: the API's types are distinct
    if isinstance(wanted, SemVer):
        return isinstance(found, SemVer) and found.order() == wanted.order()
    return bool(found == wanted)


class DraCharges:
    """Per session: what pods' claims charge each `dra` rule, per node (see the module doc)."""

    def __init__(self, dra: DraSnapshot) -> None:
        self._dra = dra
        self.pods = dra.pod_claims  # the pods with claims
        self._values: dict[tuple[DraRule, float | None], FloatArray] = {}
        self._most_kept: dict[tuple[object, ...], FloatArray] = {}

    def charge(self, rule: DraRule, pod_key: str, pod_name: str) -> float | FloatArray:
        total: float | FloatArray = 0.0
        for ref in self._dra.pod_claims.get(pod_key, ()):
            info = self._dra.claims.get(ref.claim) if ref.claim is not None and not ref.extended else None
            if info is None:
                continue
            if info.allocation is not None:
                if not info.reserved_for or info.reserved_for[0].name == pod_name:
                    total = total + self._allocated(rule, info)
            else:
                for request in info.requests:
                    if request.filter.device_class == rule.device_class:
                        total = total + self._most(rule, info, request)
        return total

    def _allocated(self, rule: DraRule, info: ClaimInfo) -> float:
        assert info.allocation is not None
        classes = {request.name: request.filter.device_class for request in info.requests}
        index = self._dra.catalog.index
        total = 0.0
        for result in info.allocation.devices.results:
            if classes.get(result.request.split("/", 1)[0]) != rule.device_class:
                continue
            device = index.get(DeviceId(result.driver, result.pool, result.device))
            if device is not None:
                config = self._config_value(rule, info, result.request)
                total += float(self._per_device(rule, config)[device])
        return total

    def _most(self, rule: DraRule, info: ClaimInfo, request: ClaimRequest) -> FloatArray:
        """Per node, the most the request could take of the rule's devices there (kept per request shape:
        the pods of one template ask alike)."""
        catalog = self._dra.catalog
        config = self._config_value(rule, info, request.name)
        key = (rule, config, request.filter, request.all_devices, request.wanted)
        most = self._most_kept.get(key)
        if most is None:
            values = np.where(catalog.matches(request.filter).selected, self._per_device(rule, config), 0.0)
            most = np.zeros(catalog.size, dtype=np.float64)
            for node, devices in enumerate(catalog.node_devices):
                taken = sorted((float(values[d]) for d in devices if values[d] > 0.0), reverse=True)
                most[node] = sum(taken if request.all_devices else taken[: request.wanted])
            self._most_kept[key] = most
        return most

    def _per_device(self, rule: DraRule, config: float | None) -> FloatArray:
        """What each catalog device counts for the rule (0 where it is not of the rule's devices);
        `config`: the opaque configuration's number, for a rule that reads one."""
        key = (rule, config)
        values = self._values.get(key)
        if values is None:
            views = self._dra.catalog.views
            values = np.array([self._device_value(rule, view, config) for view in views], dtype=np.float64)
            self._values[key] = values
        return values

    def _device_value(self, rule: DraRule, view: DeviceView, config: float | None) -> float:
        if not all(_has(view, key, wanted) for key, wanted in rule.attributes):
            return 0.0
        if rule.capacity is not None:
            domain, _, name = rule.capacity.rpartition("/")
            amount = view.capacity.get(domain or view.driver, {}).get(name)
            return float(amount) if amount is not None else 0.0
        if rule.config_field is not None:
            return config or 0.0
        return 1.0

    def _config_value(self, rule: DraRule, info: ClaimInfo, request: str) -> float | None:
        """The opaque configuration's number for a request's devices: the claim's own, else its class's."""
        if rule.config_field is None:
            return None
        driver, path, unit = rule.config_field
        device_class = next((r.filter.device_class for r in info.requests if r.name == request), "")
        class_info = self._dra.catalog.classes.get(device_class)
        entries = list(info.config) + list(class_info.config if class_info is not None else ())
        for entry in entries:
            opaque = entry.opaque
            if (
                opaque is None
                or opaque.driver != driver
                or (entry.requests and request not in entry.requests)
            ):
                continue
            found = _field(opaque.parameters, path)
            if found is not None:
                return found * unit
        return None


def _field(parameters: Mapping[str, Any], path: str) -> float | None:
    """The number at a dotted path of an opaque configuration (None: absent, or no number)."""
    value: Any = parameters
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Fraction)):
        return None
    try:
        return float(parse_quantity(str(value)))
    except ValueError:
        return None
