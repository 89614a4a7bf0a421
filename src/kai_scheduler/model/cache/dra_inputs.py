"""The DRA part of the cluster cache: the claims, slices and classes it holds, which pods use which
claims, and what a snapshot hands a session (`model.dra.DraSnapshot`).

A pod's claims change what the pod asks for (its DRA GPUs, `model.dra.claim_gpus`) and where it may go,
so a claim that appears, goes or gets (or loses) its allocation makes the pods that use it be made again;
a status write that changes only who the claim is reserved for does not. Pods without claims never
reach this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace

from kai_scheduler.api.constants import GPU_RESOURCE
from kai_scheduler.api.objects import DeviceClass, Pod, ResourceClaim, ResourceSlice
from kai_scheduler.model.dra import (
    ClaimInfo,
    DraSnapshot,
    PodClaimRef,
    claim_gpus,
    node_dra_gpus,
    pod_claim_refs,
    uses_claims,
    with_claim_gpus,
)
from kai_scheduler.model.dra_devices import DeviceCatalog
from kai_scheduler.model.dra_extended import (
    ExtendedAsk,
    classes_by_resource,
    extended_ask,
    is_extended_claim,
    may_ask_extended,
)
from kai_scheduler.model.jobs import HostPort, Placement
from kai_scheduler.model.nodes import NodeSpecInfo, NodeTable
from kai_scheduler.model.resources import PodRequest

Derived = tuple[PodRequest, Placement, tuple[HostPort, ...]]


class DraInputs:
    """See the module doc. The cache tells it about pods with claims (`index_pod`), claims and the
    cluster-scoped kinds; it answers which pods a change concerns."""

    def __init__(self) -> None:
        self.enabled = True
        self.slices: list[ResourceSlice] = []
        self.classes: list[DeviceClass] = []
        self.claims: dict[str, ResourceClaim] = {}
        self.gpus_per_node: dict[str, int] = {}
        self._infos: dict[str, tuple[ResourceClaim, ClaimInfo]] = {}
        self._refs: dict[str, tuple[Pod, tuple[PodClaimRef, ...]]] = {}  # pod key -> its claims
        self._pods_by_claim: dict[str, set[str]] = {}
        self._catalog: tuple[list[NodeSpecInfo], DeviceCatalog] | None = None  # for the nodes' specs
        self._placements: dict[str, Placement] = {}
        # Pods asking for a resource a DeviceClass may back (KEP-5004), and what the classes back.
        self._extended: dict[str, Pod] = {}
        self._backing: dict[str, str] = {}
        self._asks: dict[str, tuple[Pod, ExtendedAsk | None]] = {}

    @property
    def active(self) -> bool:
        """Whether there is anything DRA in the cluster at all."""
        return bool(self.claims or self.slices or self.classes or self._refs)

    # --- inputs ------------------------------------------------------------------------------------

    def set_cluster(self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass]) -> bool:
        """New slices and classes; True when the nodes' DRA GPUs or the DRA-backed extended resources
        changed (the node table must be made again)."""
        slices, classes = list(slices), list(classes)
        if slices == self.slices and classes == self.classes:
            return False
        self.slices, self.classes = slices, classes
        self._catalog = None
        backing = classes_by_resource(classes)
        changed = backing.keys() != self._backing.keys()
        if backing != self._backing:
            self._backing = backing
            self._asks.clear()
        gpus = node_dra_gpus(slices)
        changed = changed or gpus != self.gpus_per_node
        self.gpus_per_node = gpus
        return changed

    @property
    def backed_scalars(self) -> list[str]:
        """The extended resources DeviceClasses back, other than GPUs (which the GPU columns hold)."""
        return [name for name in self._backing if name != GPU_RESOURCE]

    def upsert_claim(self, claim: ResourceClaim) -> set[str]:
        """A claim added or changed; returns the pods to make again."""
        key = claim.key
        previous = self.claims.get(key)
        if previous is claim:
            return set()
        self.claims[key] = claim
        if (
            previous is not None
            and previous.spec == claim.spec
            and ((previous.status.allocation is None) == (claim.status.allocation is None))
        ):
            return set()
        return set(self._pods_by_claim.get(key, ()))

    def remove_claim(self, key: str) -> set[str]:
        if self.claims.pop(key, None) is None:
            return set()
        self._infos.pop(key, None)
        return set(self._pods_by_claim.get(key, ()))

    def set_claims(self, claims: Iterable[ResourceClaim]) -> set[str]:
        """Every claim at once (those left out are gone); returns the pods to make again."""
        claims = list(claims)
        affected: set[str] = set()
        for key in self.claims.keys() - {claim.key for claim in claims}:
            affected |= self.remove_claim(key)
        for claim in claims:
            affected |= self.upsert_claim(claim)
        return affected

    def track(self, key: str, pod: Pod) -> None:
        """A pod came or changed: index its claims, and its extended resources a class may back."""
        if uses_claims(pod):
            self.index_pod(key, pod)
        if may_ask_extended(pod):
            self._extended[key] = pod

    def untrack(self, key: str) -> None:
        self.unindex_pod(key)
        self._extended.pop(key, None)
        self._asks.pop(key, None)

    def index_pod(self, key: str, pod: Pod) -> None:
        refs = pod_claim_refs(pod)
        self._refs[key] = (pod, refs)
        for ref in refs:
            if ref.claim is not None:
                self._pods_by_claim.setdefault(ref.claim, set()).add(key)

    def unindex_pod(self, key: str) -> None:
        entry = self._refs.pop(key, None)
        if entry is None:
            return
        for ref in entry[1]:
            if ref.claim is not None:
                users = self._pods_by_claim.get(ref.claim)
                if users is not None:
                    users.discard(key)
                    if not users:
                        del self._pods_by_claim[ref.claim]

    # --- what pods with claims ask for -----------------------------------------------------------------

    def derive(self, key: str, derived: Derived) -> Derived:
        """A pod's request with its claims' GPUs, and its placement keyed by what its claims are (pods
        alike in everything but their claims do not share scheduling signatures or explanations)."""
        entry = self._refs.get(key)
        if entry is None:
            return derived
        request, placement, ports = derived
        gpus = 0
        parts: list[object] = []
        for ref in entry[1]:
            claim = self.claims.get(ref.claim) if ref.claim is not None else None
            if claim is None:
                parts.append(["missing", ref.name, ref.claim])
                continue
            if not is_extended_claim(claim):  # its GPUs are the pod's own request already
                gpus += claim_gpus(claim.spec)
            if ref.from_template and claim.status.allocation is None:
                # A pod's own claim, still to be allocated: only what it asks for matters.
                parts.append(["asks", claim.spec.model_dump(mode="json")])
            else:
                parts.append(["claim", ref.claim])
        key_text = f"{placement.key}|claims={json.dumps(parts, sort_keys=True)}"
        claimed = self._placements.get(key_text)
        if claimed is None:
            claimed = self._placements[key_text] = replace(placement, key=key_text)
        return with_claim_gpus(request, gpus), claimed, ports

    # --- a snapshot ------------------------------------------------------------------------------------

    def claim_info(self, key: str) -> ClaimInfo | None:
        claim = self.claims.get(key)
        if claim is None:
            return None
        cached = self._infos.get(key)
        if cached is None or cached[0] is not claim:
            cached = self._infos[key] = (claim, ClaimInfo.of(claim))
        return cached[1]

    def snapshot(self, table: NodeTable, ours: Iterable[str]) -> DraSnapshot | None:
        """What a session needs (None when there is nothing DRA); `ours`: keys of our pods' tasks."""
        if not self.active:
            return None
        specs = table.specs
        if self._catalog is None or self._catalog[0] is not specs:
            self._catalog = (specs, DeviceCatalog(self.slices, self.classes, specs, self.gpus_per_node))
        claims = {key: info for key in self.claims if (info := self.claim_info(key)) is not None}
        ours = list(ours)
        pod_claims = {key: self._refs[key][1] for key in ours if key in self._refs}
        extended: dict[str, ExtendedAsk] = {}
        if self._backing:
            for key in ours:
                ask = self._ask(key)
                if ask is not None and not any(ref.extended for ref in pod_claims.get(key, ())):
                    extended[key] = ask
        return DraSnapshot(self.enabled, self._catalog[1], claims, pod_claims, extended)

    def _ask(self, key: str) -> ExtendedAsk | None:
        pod = self._extended.get(key)
        if pod is None:
            return None
        cached = self._asks.get(key)
        if cached is None or cached[0] is not pod:
            cached = self._asks[key] = (pod, extended_ask(pod, self._backing))
        return cached[1]
