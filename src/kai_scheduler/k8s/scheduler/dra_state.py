"""The live edge's DRA feed: ResourceClaims, ResourceSlices and DeviceClasses from the informers into the
`ClusterCache`, as KAI's scheduler cache lists them.

* A claim is handed to the cache with its status as the API server has it, except where a BindRequest
  that is not Failed (of the pod incarnation it names) carries an allocation for it: until the binder
  has written it, the claim counts as allocated so, and reserved for that pod (KAI's
  `assumePendingClaims`; one this process created is in the informer's cache from the moment it is
  written). Otherwise the devices of a pod being bound could be given to another pod. An
  `extendedResourceClaimAllocation` (KEP-5004) stands for a claim the binder is yet to make: it is assumed
  as a claim of its own (`model.dra.assumed_extended_claim`) until the pod's status names the real one
  (KAI v0.17 assumes it within a cycle only; across cycles its devices could be given twice).
* DRA counts as enabled while the server serves resource.k8s.io ResourceClaims (KAI turns its feature
  gate on when the API server has the group); a pod with claims on a server without it cannot be
  scheduled, and says so.
* Objects are parsed once per resourceVersion; one that does not parse is left out and logged once.

Nothing here runs for a cluster without DRA: the feed is marked dirty only by DRA objects and by
BindRequests that carry claim allocations (while any does, the claims are looked at every cycle; a
claim the binder has written already is handed on as the same object, which the cache skips).
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from kai_scheduler.api.objects import AllocationResult, DeviceClass, ResourceClaim, ResourceSlice
from kai_scheduler.k8s.runtime.client import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.kai_objects import pod_claim_name
from kai_scheduler.k8s.runtime.objects import metadata_of, object_key
from kai_scheduler.k8s.scheduler.parsing import by_schema
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.dra import assumed_extended_claim, reserve_claim

log = logging.getLogger(__name__)


class DraFeed:
    """See the module doc. Made once per `StateBuilder`; `update` before each cycle."""

    def __init__(self, informers: InformerSet) -> None:
        self.informers = informers
        self.watching = RESOURCE_CLAIMS in informers
        self._claims = by_schema(ResourceClaim)
        self._slices = by_schema(ResourceSlice)
        self._classes = by_schema(DeviceClass)
        self._claims_dirty = True
        self._cluster_dirty = True
        self._enabled: bool | None = None
        # BindRequests that carry claim allocations, and the pods they are for.
        self._requests: dict[str, str] = {}  # BindRequest key -> pod key
        if self.watching:
            self._watch(informers)

    def _watch(self, informers: InformerSet) -> None:
        def claims_changed(*objs: JsonObject) -> None:
            self._claims_dirty = True

        def cluster_changed(*objs: JsonObject) -> None:
            self._cluster_dirty = True

        def request_changed(*objs: JsonObject) -> None:
            for obj in objs:
                key = object_key(obj)
                spec = obj.get("spec") or {}
                if spec.get("resourceClaimAllocations") or spec.get("extendedResourceClaimAllocation"):
                    namespace = metadata_of(obj).get("namespace") or "default"
                    self._requests[key] = f"{namespace}/{spec.get('podName') or obj['metadata']['name']}"
                    self._claims_dirty = True
                elif self._requests.pop(key, None) is not None:
                    self._claims_dirty = True

        def request_gone(obj: JsonObject) -> None:
            if self._requests.pop(object_key(obj), None) is not None:
                self._claims_dirty = True

        informers[RESOURCE_CLAIMS].add_handler(claims_changed, claims_changed, claims_changed)
        for kind in (RESOURCE_SLICES, DEVICE_CLASSES):
            if kind in informers:
                informers[kind].add_handler(cluster_changed, cluster_changed, cluster_changed)
        informers.bind_requests.add_handler(request_changed, request_changed, request_gone)

    def update(self, cache: ClusterCache) -> None:
        """Hand the cache what changed since the last update."""
        if not self.watching:
            return
        enabled = self.informers[RESOURCE_CLAIMS].served
        if self._cluster_dirty or enabled != self._enabled:
            self._cluster_dirty = False
            self._enabled = enabled
            cache.set_dra(self._slices_now(), self._classes_now(), enabled=enabled)
        # While BindRequests carry claims, what they assume depends on their pods too (which incarnation,
        # finished or not): looked at every cycle then, rather than on every pod event of every cluster.
        if self._claims_dirty or self._requests:
            self._claims_dirty = False
            cache.set_claims(self._claims_now())

    def _slices_now(self) -> list[ResourceSlice]:
        informer = self.informers.optional(RESOURCE_SLICES)
        return self._slices.models(informer.cache) if informer is not None else []

    def _classes_now(self) -> list[DeviceClass]:
        informer = self.informers.optional(DEVICE_CLASSES)
        return self._classes.models(informer.cache) if informer is not None else []

    def _claims_now(self) -> list[ResourceClaim]:
        claims = {claim.key: claim for claim in self._claims.models(self.informers[RESOURCE_CLAIMS].cache)}
        pods = self.informers.pods.cache
        requests = self.informers.bind_requests.cache
        for request_key, pod_key in self._requests.items():
            request, pod = requests.get(request_key), pods.get(pod_key)
            if request is None or pod is None or not _outstanding(request, pod):
                continue
            for entry in (request.get("spec") or {}).get("resourceClaimAllocations") or []:
                claim_name = pod_claim_name(pod, str(entry.get("name") or ""))
                allocation = entry.get("allocation")
                if claim_name is None or not isinstance(allocation, dict):
                    continue
                try:
                    parsed = AllocationResult.model_validate(allocation)
                except ValidationError:
                    continue
                _assume(claims, f"{pod_key.split('/', 1)[0]}/{claim_name}", pod, parsed)
            extended = ((request.get("spec") or {}).get("extendedResourceClaimAllocation") or {}).get(
                "allocation"
            )
            if isinstance(extended, dict):
                try:
                    _assume_extended(claims, pod, AllocationResult.model_validate(extended))
                except ValidationError:
                    continue
        return list(claims.values())


def _assume(
    claims: dict[str, ResourceClaim], key: str, pod: JsonObject, allocation: AllocationResult
) -> None:
    claim = claims.get(key)
    if claim is not None:
        meta = metadata_of(pod)
        claims[key] = reserve_claim(
            claim, str(meta.get("name") or ""), str(meta.get("uid") or ""), allocation
        )


def _assume_extended(claims: dict[str, ResourceClaim], pod: JsonObject, allocation: AllocationResult) -> None:
    meta = metadata_of(pod)
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    named = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if named and f"{namespace}/{named}" in claims:
        return  # made: the real claim holds the devices
    claim = assumed_extended_claim(namespace, name, str(meta.get("uid") or ""), allocation)
    claims[claim.key] = claim


def _outstanding(request: JsonObject, pod: JsonObject) -> bool:
    """A BindRequest not Failed, for this very pod incarnation (its owner reference), pod not finished."""
    if (request.get("status") or {}).get("phase") == "Failed":
        return False
    if ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
        return False
    uid = str(metadata_of(pod).get("uid") or "")
    owners = [o for o in metadata_of(request).get("ownerReferences") or [] if o.get("kind") == "Pod"]
    return not owners or any(str(o.get("uid")) == uid for o in owners)


__all__ = ["DraFeed"]
