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
* Nodes whose GPUs come from ResourceSlices take no pod that asks for device-plugin GPUs (KAI's
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
from kai_scheduler.framework.decisions import ClaimAllocation
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

            def device_plugin_nodes(task: TaskInfo) -> BoolArray:
                return not_dra_only if task.request.device_plugin_gpus else everywhere

            points.task_predicates.append(
                NamedPredicate(
                    "draonlynodes",
                    "node(s) had only DRA GPUs (device-plugin GPU requests cannot be scheduled there)",
                    device_plugin_nodes,
                )
            )
        if not dra.pod_claims:
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
        session.decisions[:] = [
            replace(d, claims=placed[d.pod]) if d.type == "bind" and d.pod in placed else d
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

    # --- before any node --------------------------------------------------------------------------

    def pre_filter(self, task: TaskInfo) -> str | None:
        refs = self.dra.pod_claims.get(task.key)
        if not refs:
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
        refs = self.dra.pod_claims.get(task.key)
        if not refs:
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
        if not pending:
            return ok
        ok &= self._enough_devices(pending)
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
        refs = self.dra.pod_claims.get(task.key)
        if not refs:
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
            if state.allocation is not None:
                allocations.append(ClaimAllocation(ref.name, ref.claim, state.allocation))
        self.placed[task.key] = tuple(allocations)

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
        refs = self.dra.pod_claims.get(task.key)
        if not refs:
            return
        self.placed.pop(task.key, None)
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
