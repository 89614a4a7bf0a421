"""dynamicresources: pods that ask for devices through DRA claims, as KAI's plugin of that name and the
kube-scheduler DynamicResources filter it runs (`pkg/scheduler/plugins/dynamicresources/`).

* Before any node (KAI's PreFilter): the cluster serves DRA; every claim of the pod exists (a template's
  claim has been made); none is reserved for the maximum of 256 consumers; a shared GPU claim (named
  by the pod, not made from a template) carries the queue label of the pod's queue; the claim asks
  for nothing the scheduler cannot allocate, of device classes that exist.
* Per node (kube-scheduler's Filter): an allocated claim only on the nodes its devices reach; the
  unallocated ones only where free devices meet all their requests (`model.dra.assign_devices`).
* Placing a pod (allocate or pipeline) allocates its unallocated claims on its node and reserves every
  claim for it; taking it off (a rollback, an eviction) takes the reservation back, and a claim left
  with no consumer gives its devices back. A pod put back where it was gets the same devices again.
* A bound pod's decision carries its claims' allocations, which the edges write into the claims (the
  BindRequest's `resourceClaimAllocations`, as KAI's binder writes them).
* DRA-backed extended resources (KEP-5004, `model.dra_extended`): a pod asking for a resource a
  DeviceClass backs, on a node without device-plugin allocatable for it, needs a claim of its own there;
  the filter asks the node's free devices for that claim's requests alongside the pod's other claims,
  placing the pod allocates it (in memory: its bind decision carries it as `extended_claim`, the binder
  creates it), taking the pod off gives its devices back. A bound pod's claim (named in its status) is
  one of its claims, so an evicted victim frees its devices.
* Nodes whose GPUs come from ResourceSlices take no shared-GPU pod (fraction or GPU memory; KAI's
  "DRA-only" rule in `node_info.go`).

A session without any DRA object or pod with claims registers nothing: other pods pay nothing for it.
The argument `maxCelCacheEntries` (KAI's CEL cache size) is accepted; compiled selectors are kept per
device class and request for the life of the device catalog.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import AllocationResult
from kai_scheduler.framework.decisions import ClaimAllocation, ExtendedClaimAllocation
from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.dra import RESERVED_FOR_MAX, ClaimState, DraSnapshot, missing_claim_name
from kai_scheduler.model.dra_devices import (
    ClaimRequest,
    DeviceFilter,
    allocated_devices,
    allocation_nodes,
    allocation_result,
    assign_devices,
)
from kai_scheduler.model.dra_extended import SPECIAL_CLAIM_NAME, ExtendedAsk, requests_and_mappings
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import BoolArray


class DynamicResourcesPlugin:
    name = "dynamicresources"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.state: DraSession | None = None

    def on_session_open(self, session: Session) -> None:
        dra = session.snapshot.dra
        if dra is None:
            return
        points = session.points
        catalog = dra.catalog
        if catalog.gpu_nodes.any():
            not_dra_only = ~catalog.gpu_nodes
            not_dra_only.flags.writeable = False
            everywhere = _everywhere(catalog.size)

            def not_shared_there(task: TaskInfo) -> BoolArray:
                return not_dra_only if task.request.is_shared_gpu else everywhere

            points.task_predicates.append(
                NamedPredicate(
                    "draonlynodes",
                    "fractional/shared GPU pods are not yet supported on DRA-only nodes",
                    not_shared_there,
                )
            )
        if not dra.pod_claims and not dra.extended:
            return
        state = self.state = DraSession(session, dra)
        points.pre_predicates.append(state.pre_filter)
        points.task_predicates.append(
            NamedPredicate("dynamicresources", "node(s) cannot allocate all claims", state.nodes_passing)
        )
        points.on_allocate.append(state.allocated)
        points.on_deallocate.append(state.deallocated)

    def on_session_close(self, session: Session) -> None:
        """Bind decisions carry the allocations of their pods' claims."""
        if self.state is None or not self.state.placed:
            return
        placed = self.state.placed
        extended = self.state.extended_placed
        session.decisions[:] = [
            replace(d, claims=placed[d.pod], extended_claim=extended.get(d.pod))
            if d.type == "bind" and d.pod in placed
            else d
            for d in session.decisions
        ]


def _everywhere(size: int) -> BoolArray:
    mask = np.ones(size, dtype=np.bool_)
    mask.flags.writeable = False
    return mask


class DraSession:
    """The devices and claims as one session changes them (see the module doc)."""

    def __init__(self, session: Session, dra: DraSnapshot) -> None:
        # The node table, not the session: the session holds this object's methods (no reference cycle).
        self.nodes = session.snapshot.nodes
        self.dra = dra
        catalog = dra.catalog
        specs = self.nodes.specs
        self.free = np.ones(catalog.count, dtype=np.bool_)
        self.claims: dict[str, ClaimState] = {}
        for key, info in dra.claims.items():
            allocation = info.allocation
            devices = allocated_devices(catalog, allocation) if allocation is not None else ()
            nodes = allocation_nodes(specs, self.nodes.index, allocation) if allocation is not None else None
            self.claims[key] = ClaimState(
                info, allocation, devices, nodes, {c.name for c in info.reserved_for}
            )
            self.free[list(devices)] = False
        self.everywhere = _everywhere(catalog.size)
        # Bumped whenever a device is taken or given back (per-filter counts are kept per version).
        self.version = 0
        self._counts: dict[tuple[DeviceFilter, bool], tuple[int, np.ndarray]] = {}
        # (pod, claim) -> the allocation a pod's claim had when it was taken off, to give it back.
        self._remembered: dict[
            tuple[str, str], tuple[AllocationResult, tuple[int, ...], BoolArray | None]
        ] = {}
        # Pod key -> its claims' allocations as it was placed (for its bind decision).
        self.placed: dict[str, tuple[ClaimAllocation, ...]] = {}
        self.extended_placed: dict[str, ExtendedClaimAllocation] = {}
        # Pod key -> its extended-resource claim's devices while placed.
        self._extended_devices: dict[str, tuple[int, ...]] = {}
        # Resource name -> nodes with no device-plugin allocatable for it (DRA serves it there).
        self._dra_served: dict[str, BoolArray] = {}

    # --- before any node --------------------------------------------------------------------------

    def pre_filter(self, task: TaskInfo) -> str | None:
        refs = self.dra.pod_claims.get(task.key, ())
        if not refs and task.key not in self.dra.extended:
            return None
        if not self.dra.enabled:
            names = ", ".join(ref.name for ref in refs)
            return (
                f"pod {task.key} cannot be scheduled, it references resource claims <{names}> "
                "while dynamic resource allocation feature is not enabled in cluster"
            )
        for ref in refs:
            if ref.claim is None:
                return missing_claim_name(task.key, ref)
            state = self.claims.get(ref.claim)
            if state is None:
                return f'failed to get resource claim {ref.claim}: could not find ResourceClaim "{ref.claim}"'
            if len(state.reserved_for) >= RESERVED_FOR_MAX:
                return (
                    f"resource claim {ref.claim} has reached its maximum number of consumers "
                    f"({RESERVED_FOR_MAX})"
                )
            info = state.info
            if not ref.from_template and info.gpu:
                problem = _queue_label_problem(ref.claim, info.labels.get(c.QUEUE_LABEL, ""), task.job.queue)
                if problem is not None:
                    return f"pod {task.key} cannot be scheduled: {problem}"
            if info.deleting:
                return f"resource claim {ref.claim} is being deleted"
            if state.allocation is None:
                if info.problem is not None:
                    return f"resource claim {ref.claim}: {info.problem}"
                for request in info.requests:
                    problem = self.dra.catalog.matches(request.filter).problem
                    if problem is not None:
                        return f"resource claim {ref.claim}: request {request.name}: {problem}"
        return None

    # --- per node -----------------------------------------------------------------------------------

    def nodes_passing(self, task: TaskInfo) -> BoolArray:
        refs = self.dra.pod_claims.get(task.key, ())
        ask = self.dra.extended.get(task.key)
        if not refs and ask is None:
            return self.everywhere
        catalog = self.dra.catalog
        ok = np.ones(catalog.size, dtype=np.bool_)
        pending: list[ClaimRequest] = []
        seen: set[str] = set()
        for ref in refs:
            state = self.claims.get(ref.claim) if ref.claim is not None else None
            if state is None or ref.claim is None:
                return np.zeros(catalog.size, dtype=np.bool_)
            if state.allocation is not None:
                if state.nodes is not None:
                    ok &= state.nodes
            elif ref.claim not in seen:
                seen.add(ref.claim)
                pending.extend(state.info.requests)
        if ask is None:
            return self._meet(pending, ok)
        # Nodes alike in which of the pod's resources DRA serves there meet the same requests.
        served = [self._served(name) for name in sorted(ask.amounts)]
        result = np.zeros(catalog.size, dtype=np.bool_)
        kinds = np.stack(served, axis=1) if served else np.zeros((catalog.size, 0), dtype=np.bool_)
        for kind in {tuple(row) for row in kinds[ok].tolist()}:
            group = ok & np.all(kinds == np.array(kind, dtype=np.bool_), axis=1)
            names = [name for name, on in zip(sorted(ask.amounts), kind, strict=True) if on]
            result |= self._meet(pending + _claim_requests(ask, names), group)
        return result

    def _served(self, resource: str) -> BoolArray:
        """Nodes that serve `resource` through DRA: no device-plugin allocatable for it."""
        found = self._dra_served.get(resource)
        if found is None:
            nodes = self.nodes
            if resource == c.GPU_RESOURCE:
                device_plugin = nodes.cap_gpus - self.dra.catalog.gpu_counts
            else:
                column = nodes.scalar_index.get(resource)
                device_plugin = np.zeros(nodes.size) if column is None else nodes.cap_scalars[:, column]
                # (the node table's unbounded room stands for "no allocatable, a class backs it")
                device_plugin = np.where(np.isinf(device_plugin), 0.0, device_plugin)
            found = self._dra_served[resource] = device_plugin <= 0
        return found

    def _meet(self, pending: list[ClaimRequest], ok: BoolArray) -> BoolArray:
        """`ok` narrowed to the nodes whose free devices meet all of `pending`."""
        if not pending or not ok.any():
            return ok
        catalog = self.dra.catalog
        ok = ok & self._enough_devices(pending)
        filters = {request.filter for request in pending}
        if len(pending) == 1 or (len(filters) == 1 and not any(r.all_devices for r in pending)):
            return ok  # one kind of device: the counts are the whole answer
        for node in np.flatnonzero(ok).tolist():
            ok[node] = assign_devices(catalog, pending, node, self.free) is not None
        return ok

    def _enough_devices(self, requests: list[ClaimRequest]) -> BoolArray:
        """Per node, whether each kind of device has enough free ones for the requests asking for it
        (and every matching one is free for an All request); no evaluation error among them."""
        ok = np.ones(self.dra.catalog.size, dtype=np.bool_)
        needed: dict[DeviceFilter, int] = {}
        for request in requests:
            if request.all_devices:
                total = self._per_node(request.filter, free_only=False)
                ok &= (total >= 1) & (self._per_node(request.filter, free_only=True) == total)
            else:
                needed[request.filter] = needed.get(request.filter, 0) + request.wanted
        for device_filter, count in needed.items():
            ok &= self._per_node(device_filter, free_only=True) >= count
        return ok

    def _per_node(self, device_filter: DeviceFilter, *, free_only: bool) -> np.ndarray:
        """How many devices of the filter each node reaches (free ones only, or all); nodes that reach a
        device on which the filter fails to evaluate count -1."""
        key = (device_filter, free_only)
        cached = self._counts.get(key)
        if cached is None or cached[0] != self.version:
            catalog = self.dra.catalog
            matches = catalog.matches(device_filter)
            devices = matches.selected & self.free if free_only else matches.selected
            counts = catalog.per_node(devices)
            if matches.failing.any():
                counts = np.where(catalog.per_node(matches.failing) > 0, -1, counts)
            cached = self._counts[key] = (self.version, counts)
        return cached[1]

    # --- placing and taking off ---------------------------------------------------------------------

    def allocated(self, task: TaskInfo) -> None:
        refs = self.dra.pod_claims.get(task.key, ())
        ask = self.dra.extended.get(task.key)
        if not refs and ask is None:
            return
        node = task.node
        unallocated: list[ClaimState] = []
        for ref in refs:
            state = self.claims.get(ref.claim) if ref.claim is not None else None
            if state is None or ref.claim is None or state.allocation is not None or state in unallocated:
                continue
            if not self._restore(task.key, ref.claim, state, node):
                unallocated.append(state)
        if unallocated:
            self._allocate(unallocated, node)
        allocations = []
        for ref in refs:
            state = self.claims.get(ref.claim) if ref.claim is not None else None
            if state is None or ref.claim is None:
                continue
            state.reserved_for.add(task.name)
            if state.allocation is not None and not ref.extended:
                allocations.append(ClaimAllocation(ref.name, ref.claim, state.allocation))
        self.placed[task.key] = tuple(allocations)
        if ask is not None:
            self._allocate_extended(task.key, ask, node)

    def _allocate_extended(self, pod: str, ask: ExtendedAsk, node: int) -> None:
        """The pod's extended-resource claim on `node`, where DRA serves any of its resources: the
        devices it had there before it was taken off if they are still free, else the first that fit."""
        names = [name for name in sorted(ask.amounts) if self._served(name)[node]]
        if not names:
            return  # the device plugin serves them all here: no claim
        device_requests, mappings = requests_and_mappings(ask, names)
        requests = _claim_requests(ask, names)
        remembered = self._remembered.pop((pod, SPECIAL_CLAIM_NAME), None)
        if (
            remembered is not None
            and (remembered[2] is None or remembered[2][node])
            and all(self.free[d] for d in remembered[1])
        ):
            allocation, devices = remembered[0], remembered[1]
        else:
            chosen = assign_devices(self.dra.catalog, requests, node, self.free)
            if chosen is None:
                return  # the filter let the node through, so this is not expected
            allocation = allocation_result(self.dra.catalog, requests, (), chosen, self.nodes.names[node])
            devices = tuple(d for ds in chosen for d in ds)
        self.free[list(devices)] = False
        self.version += 1
        self._extended_devices[pod] = devices
        self.extended_placed[pod] = ExtendedClaimAllocation(allocation, device_requests, mappings)

    def _restore(self, pod: str, claim: str, state: ClaimState, node: int) -> bool:
        """Give a claim back the devices it had when its pod was taken off, if the pod is back on a node
        they reach and they are still free (a rollback, an eviction taken back)."""
        remembered = self._remembered.pop((pod, claim), None)
        if remembered is None:
            return False
        allocation, devices, nodes = remembered
        if (nodes is not None and not nodes[node]) or not all(self.free[d] for d in devices):
            return False
        self._take(state, allocation, devices, nodes)
        return True

    def _allocate(self, claims: list[ClaimState], node: int) -> None:
        catalog = self.dra.catalog
        requests = [request for state in claims for request in state.info.requests]
        chosen = assign_devices(catalog, requests, node, self.free)
        if chosen is None:
            return  # the filter let the node through, so this is not expected; the claims stay as they are
        name = self.nodes.names[node]
        start = 0
        for state in claims:
            mine = chosen[start : start + len(state.info.requests)]
            start += len(state.info.requests)
            allocation = allocation_result(catalog, state.info.requests, state.info.config, mine, name)
            nodes = allocation_nodes(self.nodes.specs, self.nodes.index, allocation)
            self._take(state, allocation, tuple(d for ds in mine for d in ds), nodes)

    def _take(
        self,
        state: ClaimState,
        allocation: AllocationResult,
        devices: tuple[int, ...],
        nodes: BoolArray | None,
    ) -> None:
        state.allocation, state.devices, state.nodes = allocation, devices, nodes
        self.free[list(devices)] = False
        self.version += 1

    def deallocated(self, task: TaskInfo) -> None:
        refs = self.dra.pod_claims.get(task.key, ())
        self.placed.pop(task.key, None)
        extended = self.extended_placed.pop(task.key, None)
        if extended is not None:
            devices = self._extended_devices.pop(task.key)
            nodes = allocation_nodes(self.nodes.specs, self.nodes.index, extended.allocation)
            self._remembered[(task.key, SPECIAL_CLAIM_NAME)] = (extended.allocation, devices, nodes)
            self.free[list(devices)] = True
            self.version += 1
        for ref in refs:
            state = self.claims.get(ref.claim) if ref.claim is not None else None
            if state is None or ref.claim is None:
                continue
            state.reserved_for.discard(task.name)
            if not state.reserved_for and state.allocation is not None:
                self._remembered[(task.key, ref.claim)] = (state.allocation, state.devices, state.nodes)
                self.free[list(state.devices)] = True
                state.allocation, state.devices, state.nodes = None, (), None
                self.version += 1


def _claim_requests(ask: ExtendedAsk, names: list[str]) -> list[ClaimRequest]:
    """What the pod's extended-resource claim asks of a node serving `names` through DRA."""
    requests, _ = requests_and_mappings(ask, names)
    return [
        ClaimRequest(r.name, DeviceFilter(r.exactly.device_class_name, ()), False, r.exactly.count)
        for r in requests
        if r.exactly is not None
    ]


def _queue_label_problem(claim: str, label: str, queue: str) -> str | None:
    """KAI's rule for shared GPU claims: they carry the queue label of the pods' queue."""
    name = claim.split("/", 1)[1]
    if not label:
        return f"DRA claim {name} is a shared GPU claim but does not have a queue label ({c.QUEUE_LABEL})"
    if label != queue:
        return (
            f"DRA claim {name} is a shared GPU claim with wrong queue label "
            f"(expected queue: {queue}, claim queue label: {label})"
        )
    return None
