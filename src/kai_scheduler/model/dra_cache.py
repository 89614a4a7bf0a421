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

from kai_scheduler.api.objects import DeviceClass, Pod, ResourceClaim, ResourceSlice
from kai_scheduler.model.dra import (
    ClaimInfo,
    DraSnapshot,
    PodClaimRef,
    claim_gpus,
    node_dra_gpus,
    pod_claim_refs,
    with_claim_gpus,
)
from kai_scheduler.model.dra_devices import DeviceCatalog
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

    @property
    def active(self) -> bool:
        """Whether there is anything DRA in the cluster at all."""
        return bool(self.claims or self.slices or self.classes or self._refs)

    # --- inputs ------------------------------------------------------------------------------------

    def set_cluster(self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass]) -> bool:
        """New slices and classes; True when the nodes' DRA GPUs changed (the node table must be made
        again)."""
        slices, classes = list(slices), list(classes)
        if slices == self.slices and classes == self.classes:
            return False
        self.slices, self.classes = slices, classes
        self._catalog = None
        gpus = node_dra_gpus(slices)
        changed = gpus != self.gpus_per_node
        self.gpus_per_node = gpus
        return changed

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
        pod_claims = {key: self._refs[key][1] for key in ours if key in self._refs}
        return DraSnapshot(self.enabled, self._catalog[1], claims, pod_claims)
