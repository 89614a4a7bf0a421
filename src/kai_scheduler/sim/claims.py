"""DRA claims in the simulated cluster: what Kubernetes' resourceclaim controller and KAI's binder do to
them between cycles.

* A pod that names a ResourceClaimTemplate gets its own claim, made from the template when the pod
  arrives: named `<pod>-<claim>` (with a number added if that name is taken), owned by the pod,
  annotated with the pod's claim name, and recorded in the pod's `status.resourceClaimStatuses`. A
  pod of the input that already names its claim there (a snapshot of a live cluster) keeps it. A
  template that is not in the input makes no claim: the pod waits, as it would in a cluster.
* A bind writes each claim's allocation (unless it has one) and reserves it for the pod. A pod bound
  with DRA-backed extended resources gets the claim KAI's binder creates (`<pod>-extended-resources-`
  and a five-character suffix, annotated, owned by the pod, allocated and reserved for it), named in
  its `status.extendedResourceClaimStatus`.
* A pod that stops using its claims (evicted, finished, gone) is taken out of their `reservedFor`;
  a claim nobody is reserved for is deallocated, and a pod's own claims go with the pod. Its
  extended-resource claim is deleted and its name cleared at once (the pod is over, or, evicted, a new
  pod in its place asks again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import (
    DeviceClaim,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodExtendedResourceClaimStatus,
    PodResourceClaimStatus,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
)
from kai_scheduler.framework.decisions import ClaimAllocation, ExtendedClaimAllocation
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.dra import pod_claim_refs, release_claim, reserve_claim
from kai_scheduler.model.dra_extended import EXTENDED_CLAIM_ANNOTATION


def made_claims(
    pod: Pod, templates: dict[str, ResourceClaimTemplate], taken: set[str]
) -> tuple[Pod, list[ResourceClaim]]:
    """The pod as the resourceclaim controller leaves it, and the claims it made for it (see the module
    doc); `taken` (claim keys in use) gets the new names."""
    made: list[ResourceClaim] = []
    statuses = list(pod.status.resource_claim_statuses)
    named = {status.name for status in statuses}
    for entry in pod.spec.resource_claims:
        template_name = entry.resource_claim_template_name
        if template_name is None or entry.name in named:
            continue
        template = templates.get(f"{pod.namespace}/{template_name}")
        if template is None:
            continue
        name = f"{pod.metadata.name}-{entry.name}"
        suffix = 1
        while f"{pod.namespace}/{name}" in taken:
            suffix += 1
            name = f"{pod.metadata.name}-{entry.name}-{suffix}"
        taken.add(f"{pod.namespace}/{name}")
        owner = OwnerReference(
            api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid, controller=True
        )
        meta = template.spec.metadata
        made.append(
            ResourceClaim(
                metadata=ObjectMeta(
                    name=name,
                    namespace=pod.namespace,
                    labels=dict(meta.labels),
                    annotations={**meta.annotations, c.POD_CLAIM_NAME_ANNOTATION: entry.name},
                    owner_references=[owner],
                ),
                spec=template.spec.spec,
            )
        )
        statuses.append(PodResourceClaimStatus(name=entry.name, resource_claim_name=name))
    if not made:
        return pod, made
    status = pod.status.model_copy(update={"resource_claim_statuses": statuses})
    return pod.model_copy(update={"status": status}), made


class SimClaims:
    """The claims of the simulated cluster, kept in step with its cache."""

    def __init__(self, cache: ClusterCache, claims: Sequence[ResourceClaim]) -> None:
        self.cache = cache
        self.claims = {claim.key: claim for claim in claims}
        self._arriving: dict[str, list[ResourceClaim]] = {}  # pod key -> claims made for it, not yet in
        cache.set_claims(self.claims.values())

    def expect(self, pod: str, claims: Iterable[ResourceClaim]) -> None:
        """Claims made for `pod`, to be created when it arrives."""
        self._arriving.setdefault(pod, []).extend(claims)

    def arrived(self, pod: str) -> None:
        for claim in self._arriving.pop(pod, ()):
            self._write(claim)

    def bound(
        self, pod: Pod, claims: Sequence[ClaimAllocation], extended: ExtendedClaimAllocation | None
    ) -> Pod:
        """The pod's claims written for its bind; returns the pod as its status then is."""
        for allocation in claims:
            claim = self.claims.get(allocation.claim)
            if claim is not None:
                self._write(reserve_claim(claim, pod.metadata.name, pod.metadata.uid, allocation.allocation))
        if extended is None:
            return pod
        claim = self._extended_claim(pod, extended)
        self._write(claim)
        named = PodExtendedResourceClaimStatus(
            resource_claim_name=claim.metadata.name, request_mappings=list(extended.container_mappings)
        )
        status = pod.status.model_copy(update={"extended_resource_claim_status": named})
        return pod.model_copy(update={"status": status})

    def _extended_claim(self, pod: Pod, extended: ExtendedClaimAllocation) -> ResourceClaim:
        prefix = f"{pod.metadata.name}-extended-resources-"
        number = 0
        while f"{pod.namespace}/{prefix}{_suffix(number)}" in self.claims:
            number += 1
        owner = OwnerReference(
            api_version="v1",
            kind="Pod",
            name=pod.metadata.name,
            uid=pod.metadata.uid,
            controller=True,
        )
        made = ResourceClaim(
            metadata=ObjectMeta(
                name=prefix + _suffix(number),
                namespace=pod.namespace,
                annotations={EXTENDED_CLAIM_ANNOTATION: "true"},
                owner_references=[owner],
            ),
            spec=ResourceClaimSpec(devices=DeviceClaim(requests=list(extended.device_requests))),
        )
        return reserve_claim(made, pod.metadata.name, pod.metadata.uid, extended.allocation)

    def released(self, pod: Pod, *, gone: bool = False) -> Pod:
        """`pod` no longer uses its claims; with `gone`, the claims made for it are deleted too. Returns the
        pod as its status then is."""
        for ref in pod_claim_refs(pod):
            claim = self.claims.get(ref.claim) if ref.claim is not None else None
            if claim is None:
                continue
            if ref.extended or (gone and _owned_by(claim, pod)):
                del self.claims[claim.key]
                self.cache.remove_claim(claim.key)
            else:
                self._write(release_claim(claim, pod.metadata.name))
        if pod.status.extended_resource_claim_status is None:
            return pod
        status = pod.status.model_copy(update={"extended_resource_claim_status": None})
        return pod.model_copy(update={"status": status})

    def _write(self, claim: ResourceClaim) -> None:
        if self.claims.get(claim.key) is claim:
            return
        self.claims[claim.key] = claim
        self.cache.upsert_claim(claim)


def _suffix(number: int) -> str:
    """The `number`th name suffix, five characters as the API server's generateName adds (deterministic
    here, so that runs repeat)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digits = []
    for _ in range(5):
        number, digit = divmod(number, len(alphabet))
        digits.append(alphabet[digit])
    return "".join(reversed(digits))


def _owned_by(claim: ResourceClaim, pod: Pod) -> bool:
    return any(
        owner.kind == "Pod" and owner.name == pod.metadata.name and owner.controller
        for owner in claim.metadata.owner_references
    )
