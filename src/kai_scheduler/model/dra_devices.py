"""DRA devices: what the ResourceSlices publish, which nodes reach each device, what a device class and a
request's CEL selectors select, and how the free devices of one node meet a pod's requests, as Kubernetes'
structured allocator (which KAI runs) meets them.

* Devices come from slices at their pool's newest generation (`DeviceCatalog`), in slice order with pools
  by driver and name; a device published twice counts once. A slice's devices reach its node
  (`nodeName`), the nodes of its `nodeSelector`, or every node (`allNodes`); with
  `perDeviceNodeSelection`, each device says so itself.
* A request takes free devices that its class's and its own selectors accept (`assign_devices`):
  `ExactCount` requests are filled in order, one giving up a device another needs when it can take a
  different one; `All` takes every matching device the node reaches. A selector that fails to evaluate
  on a device the node reaches fails the node (Kubernetes aborts the allocation).
* The allocation names the devices, the configs of their classes and of the claim, and the nodes that
  reach them (`allocation_result`): node-local devices, `metadata.name In [node]`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, NamedTuple

import numpy as np

from kai_scheduler.api.cel import (
    AttributeValue,
    CelError,
    CelUnsupported,
    DeviceView,
    compile_selector,
)
from kai_scheduler.api.cel_k8s import SemVer
from kai_scheduler.api.objects import (
    AllocationResult,
    Device,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceClass,
    DeviceRequestAllocationResult,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceSlice,
)
from kai_scheduler.model.matching import node_selector_term_matches
from kai_scheduler.model.nodes import BoolArray, NodeSpecInfo

_NO_NODE: Final = -1


class DeviceId(NamedTuple):
    driver: str
    pool: str
    name: str


@dataclass(frozen=True, slots=True)
class DeviceFilter:
    """What one request accepts: a device class and the request's own selectors (CEL expressions)."""

    device_class: str
    selectors: tuple[str, ...] = ()


class ClaimRequest(NamedTuple):
    name: str
    filter: DeviceFilter
    all_devices: bool  # allocationMode All
    wanted: int  # devices (ExactCount)


@dataclass(frozen=True, slots=True)
class ClassInfo:
    """A DeviceClass: its selectors (compiled), its configs, or why it cannot be used."""

    name: str
    selectors: tuple[Callable[[DeviceView], bool], ...]
    config: tuple[DeviceAllocationConfiguration, ...]
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Matches:
    """For one filter: which devices it selects, and on which its selectors fail to evaluate."""

    selected: BoolArray
    failing: BoolArray
    problem: str | None = None  # the filter itself cannot be used (unknown class, bad selector)


def _view(driver: str, device: Device) -> DeviceView:
    attributes: dict[str, dict[str, AttributeValue]] = {}
    for key, attribute in device.attributes.items():
        domain, _, name = key.rpartition("/")
        value: AttributeValue | None
        if attribute.int_value is not None:
            value = attribute.int_value
        elif attribute.bool_value is not None:
            value = attribute.bool_value
        elif attribute.string is not None:
            value = attribute.string
        else:
            try:
                value = SemVer.parse(attribute.version or "")
            except ValueError:
                value = None  # an attribute that does not parse is one the device does not have
        if value is not None:
            attributes.setdefault(domain or driver, {})[name] = value
    capacity: dict[str, dict[str, Fraction]] = {}
    for key, amount in device.capacity.items():
        domain, _, name = key.rpartition("/")
        capacity.setdefault(domain or driver, {})[name] = amount.value
    return DeviceView(driver, attributes, capacity)


def _selector_mask(specs: Sequence[NodeSpecInfo], selector: NodeSelector) -> BoolArray:
    return np.array(
        [
            any(node_selector_term_matches(t, s.labels, s.name) for t in selector.node_selector_terms)
            for s in specs
        ],
        dtype=np.bool_,
    )


def name_selector(node: str) -> NodeSelector:
    """The node selector of an allocation made of one node's local devices."""
    requirement = NodeSelectorRequirement(key="metadata.name", operator="In", values=[node])
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_fields=[requirement])])


class DeviceCatalog:
    """Every device the ResourceSlices publish, which nodes reach it, and what each filter selects.

    Built once per set of slices, classes and nodes; a session reads it and never changes it (the
    allocated devices are the session's own state)."""

    def __init__(
        self,
        slices: Sequence[ResourceSlice],
        classes: Sequence[DeviceClass],
        specs: Sequence[NodeSpecInfo],
        dra_gpus: Mapping[str, int],
    ) -> None:
        """`dra_gpus`: node name -> the GPUs its slices publish (KAI's count, `dra.node_dra_gpus`)."""
        self.size = len(specs)
        node_index = {spec.name: i for i, spec in enumerate(specs)}
        newest: dict[tuple[str, str], int] = {}
        for slice_ in slices:
            pool = (slice_.spec.driver, slice_.spec.pool.name)
            newest[pool] = max(newest.get(pool, 0), slice_.spec.pool.generation)
        current = [s for s in slices if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)]]
        current.sort(key=lambda s: (s.spec.driver, s.spec.pool.name, s.metadata.name))
        self.ids: list[DeviceId] = []
        self.views: list[DeviceView] = []
        local: list[int] = []
        # Devices reached from several nodes (allNodes, a nodeSelector): their node masks.
        self.shared: dict[int, BoolArray] = {}
        # Per device: None (any node), or the selector of the nodes that reach it (for allocations).
        self.selectors: list[NodeSelector | None] = []
        everywhere = np.ones(self.size, dtype=np.bool_)
        seen: set[DeviceId] = set()
        for slice_ in current:
            spec = slice_.spec
            for device in spec.devices:
                device_id = DeviceId(spec.driver, spec.pool.name, device.name)
                if device_id in seen:
                    continue  # published twice: the first slice's counts
                seen.add(device_id)
                node_name = device.node_name if spec.per_device_node_selection else spec.node_name
                selector = device.node_selector if spec.per_device_node_selection else spec.node_selector
                all_nodes = device.all_nodes if spec.per_device_node_selection else spec.all_nodes
                index = len(self.ids)
                if node_name:
                    local.append(node_index.get(node_name, _NO_NODE))
                    self.selectors.append(name_selector(node_name))
                elif selector is not None:
                    local.append(_NO_NODE)
                    self.shared[index] = _selector_mask(specs, selector)
                    self.selectors.append(selector)
                elif all_nodes:
                    local.append(_NO_NODE)
                    self.shared[index] = everywhere
                    self.selectors.append(None)
                else:
                    continue
                self.ids.append(device_id)
                self.views.append(_view(spec.driver, device))
        self.count = len(self.ids)
        self.local_node = np.array(local, dtype=np.int64)
        self.index = {device_id: i for i, device_id in enumerate(self.ids)}
        # Per node, the devices it reaches, in catalog order (local and shared ones merged).
        reach: list[list[int]] = [[] for _ in range(self.size)]
        for i, node in enumerate(local):
            if node >= 0:
                reach[node].append(i)
            elif i in self.shared:
                for n in np.flatnonzero(self.shared[i]).tolist():
                    reach[n].append(i)
        self.node_devices = [sorted(devices) for devices in reach]
        # The GPUs each node's slices publish (part of the node's GPUs); nodes with any are "DRA-only",
        # which take no shared-GPU pod (KAI's rule).
        self.gpu_counts = np.array([dra_gpus.get(spec.name, 0) for spec in specs], dtype=np.float64)
        self.gpu_nodes = self.gpu_counts > 0
        self.classes = {c.metadata.name: _class_info(c) for c in classes}
        self._matches: dict[DeviceFilter, Matches] = {}

    def matches(self, device_filter: DeviceFilter) -> Matches:
        """Which devices the filter selects (kept per filter)."""
        found = self._matches.get(device_filter)
        if found is None:
            found = self._matches[device_filter] = self._evaluate(device_filter)
        return found

    def _evaluate(self, device_filter: DeviceFilter) -> Matches:
        none = np.zeros(self.count, dtype=np.bool_)
        info = self.classes.get(device_filter.device_class)
        if info is None:
            return Matches(none, none, f"device class {device_filter.device_class} does not exist")
        if info.problem is not None:
            return Matches(none, none, info.problem)
        selectors = list(info.selectors)
        for expression in device_filter.selectors:
            try:
                selectors.append(compile_selector(expression))
            except CelUnsupported as error:
                return Matches(none, none, f"selector {expression!r}: unsupported CEL expression: {error}")
        selected = np.zeros(self.count, dtype=np.bool_)
        failing = np.zeros(self.count, dtype=np.bool_)
        for i, view in enumerate(self.views):
            try:
                selected[i] = all(select(view) for select in selectors)
            except CelError:
                failing[i] = True
        return Matches(selected, failing)

    def per_node(self, devices: BoolArray) -> np.ndarray:
        """How many of `devices` each node reaches."""
        local = self.local_node[devices]
        counts = np.bincount(local[local >= 0], minlength=self.size).astype(np.int64)
        for index, mask in self.shared.items():
            if devices[index]:
                counts += mask
        return counts


def _class_info(device_class: DeviceClass) -> ClassInfo:
    name = device_class.metadata.name
    selectors = []
    for index, selector in enumerate(device_class.spec.selectors):
        expression = selector.cel.expression if selector.cel is not None else ""
        where = f"DeviceClass {name}: spec.selectors[{index}].cel.expression"
        try:
            selectors.append(compile_selector(expression))
        except CelUnsupported as error:
            return ClassInfo(name, (), (), f"{where}: unsupported CEL expression: {error}")
    config = tuple(
        DeviceAllocationConfiguration(source="FromClass", requests=[], opaque=entry.opaque)
        for entry in device_class.spec.config
        if entry.opaque is not None
    )
    return ClassInfo(name, tuple(selectors), config)


def allocated_devices(catalog: DeviceCatalog, allocation: AllocationResult) -> tuple[int, ...]:
    """The catalog devices of an allocation (devices no slice publishes any more are left out)."""
    found = []
    for result in allocation.devices.results:
        index = catalog.index.get(DeviceId(result.driver, result.pool, result.device))
        if index is not None:
            found.append(index)
    return tuple(found)


def allocation_nodes(
    specs: Sequence[NodeSpecInfo], index: Mapping[str, int], allocation: AllocationResult
) -> BoolArray | None:
    """The nodes an allocation's devices reach (None: every node). The usual selector, node-local devices'
    `metadata.name In [node]`, is read by name (every claim of a busy cluster has one, every cycle)."""
    selector = allocation.node_selector
    if selector is None:
        return None
    names = _named_nodes(selector)
    if names is None:
        return _selector_mask(specs, selector)
    mask = np.zeros(len(specs), dtype=np.bool_)
    for name in names:
        node = index.get(name)
        if node is not None:
            mask[node] = True
    return mask


def _named_nodes(selector: NodeSelector) -> list[str] | None:
    """The node names of a selector made only of `metadata.name In [...]` terms (None: any other)."""
    names: list[str] = []
    for term in selector.node_selector_terms:
        if term.match_expressions or len(term.match_fields) != 1:
            return None
        (field,) = term.match_fields
        if field.key != "metadata.name" or field.operator != "In":
            return None
        names.extend(field.values)
    return names


# --- allocating on one node ------------------------------------------------------------------------


def assign_devices(
    catalog: DeviceCatalog, requests: Sequence[ClaimRequest], node: int, free: BoolArray
) -> list[list[int]] | None:
    """Devices for each request on `node` from the `free` ones (None: they cannot all be met there).

    All-mode requests take every matching device the node reaches (there must be one, and all free);
    counted requests are filled in order, each device taken by at most one request, a request giving up
    a device to another when it can take a different one instead (augmenting paths: if an assignment
    exists, this finds it). A device on which a request's selectors fail to evaluate fails the node, as
    Kubernetes' allocator aborts."""
    reach = catalog.node_devices[node]
    taken: set[int] = set()
    chosen: list[list[int]] = [[] for _ in requests]
    candidates: list[list[int]] = []
    for position, request in enumerate(requests):
        matches = catalog.matches(request.filter)
        if matches.problem is not None:
            return None
        options = [d for d in reach if matches.selected[d]]
        if any(matches.failing[d] for d in reach):
            return None
        if request.all_devices:
            if not options or not all(free[d] and d not in taken for d in options):
                return None
            chosen[position] = options
            taken.update(options)
            candidates.append([])
        else:
            candidates.append([d for d in options if free[d]])
    slots = [
        (position, request.wanted) for position, request in enumerate(requests) if not request.all_devices
    ]
    owner: dict[int, int] = {}  # device -> slot number
    slot_request: list[int] = []
    for position, count in slots:
        slot_request.extend([position] * count)
    for slot in range(len(slot_request)):
        if not _augment(slot, slot_request, candidates, owner, taken, set()):
            return None
    for device, slot in sorted(owner.items(), key=lambda item: item[1]):
        chosen[slot_request[slot]].append(device)
    for devices in chosen:
        devices.sort()
    return chosen


def _augment(
    slot: int,
    slot_request: list[int],
    candidates: list[list[int]],
    owner: dict[int, int],
    taken: set[int],
    visited: set[int],
) -> bool:
    for device in candidates[slot_request[slot]]:
        if device in taken or device in visited:
            continue
        visited.add(device)
        holder = owner.get(device)
        if holder is None or _augment(holder, slot_request, candidates, owner, taken, visited):
            owner[device] = slot
            return True
    return False


def allocation_result(
    catalog: DeviceCatalog,
    requests: Sequence[ClaimRequest],
    claim_config: Sequence[DeviceAllocationConfiguration],
    chosen: Sequence[Sequence[int]],
    node: str,
) -> AllocationResult:
    """The AllocationResult Kubernetes' allocator would write for `chosen` devices on `node`: the
    devices per request, the configs of their classes and of the claim, and the nodes that reach them."""
    results = []
    config: list[DeviceAllocationConfiguration] = []
    for request, devices in zip(requests, chosen, strict=True):
        for device in devices:
            device_id = catalog.ids[device]
            results.append(
                DeviceRequestAllocationResult(
                    request=request.name, driver=device_id.driver, pool=device_id.pool, device=device_id.name
                )
            )
        info = catalog.classes.get(request.filter.device_class)
        if info is not None:
            config.extend(entry.model_copy(update={"requests": [request.name]}) for entry in info.config)
    config.extend(claim_config)
    devices = [d for ds in chosen for d in ds]
    selectors = [catalog.selectors[d] for d in devices]
    node_selector: NodeSelector | None
    if any(int(catalog.local_node[d]) >= 0 for d in devices):
        node_selector = name_selector(node)
    elif all(s is None for s in selectors):
        node_selector = None
    else:
        distinct = {s.model_dump_json() for s in selectors if s is not None}
        node_selector = (
            next(s for s in selectors if s is not None) if len(distinct) == 1 else name_selector(node)
        )
    return AllocationResult(
        devices=DeviceAllocationResult(results=results, config=config), node_selector=node_selector
    )
