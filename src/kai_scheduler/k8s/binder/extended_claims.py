"""The binder's part of DRA-backed extended resources (KEP-5004), as KAI v0.17's binder plugin
`dynamicresources` does it (`pkg/binder/plugins/k8s-plugins/dynamicresources/dra.go`).

Before the pod is bound, a BindRequest's `extendedResourceClaimAllocation` becomes a ResourceClaim: created
with `generateName: <pod>-extended-resources-`, annotated `resource.kubernetes.io/extended-resource-claim:
"true"`, owned by the pod (so it goes with the pod), protected by DRA's finalizer, asking for the
request's `deviceRequests`; its status then gets the allocation (unless it has one) and the pod in
`reservedFor`; and the pod's `status.extendedResourceClaimStatus` names it with the `containerMappings`
(what the kubelet reads to hand each container its devices). A claim of the pod's from an earlier attempt
(annotated and controlled by this pod, by name and uid) is taken instead of making another.

When the bind fails, the claim is deleted and the pod's status no longer names it (KAI's UnAllocate), so
the scheduler places the pod afresh; doing that twice, or with nothing to undo, changes nothing. The
finalizer goes first, as Kubernetes' resourceclaim controller lets go of a claim whose pod never ran (no
driver prepared its devices): the devices are free at once.
"""

from __future__ import annotations

from kai_scheduler.k8s.binder.claim_binding import reserve
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import PODS, RESOURCE_CLAIMS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.model.dra_extended import EXTENDED_CLAIM_ANNOTATION

ACCESS = (
    access(RESOURCE_CLAIMS, "list", "create", "patch", "delete"),
    access(PODS, "patch", subresource="status"),
)

# Kubernetes' resourceclaim controller holds the claim until the driver has let go of its devices.
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"

_ATTEMPTS = 5


def carries_extended_claim(request: JsonObject) -> bool:
    wanted = (request.get("spec") or {}).get("extendedResourceClaimAllocation") or {}
    return bool(wanted.get("allocation"))


async def bind_extended_claim(client: KubeClient, request: JsonObject, pod: JsonObject) -> str | None:
    """Make and write the pod's extended-resource claim; None when done, else why not (KAI's words).
    Connection errors are the caller's to handle."""
    wanted = (request.get("spec") or {}).get("extendedResourceClaimAllocation") or {}
    namespace, name, uid = _identity(pod)
    allocation = wanted.get("allocation")
    if not allocation:
        return f"empty allocation in extended resource bind request for pod {namespace}/{name}"
    try:
        existing = await find_extended_claim(client, pod)
    except ApiStatusError as error:
        return f"failed to check for existing extended resource claim for pod {namespace}/{name}: {error}"
    if existing is not None:
        claim_name = str(metadata_of(existing).get("name"))
    else:
        try:
            created = await client.create(
                RESOURCE_CLAIMS, _new_claim(pod, wanted.get("deviceRequests") or [])
            )
        except ApiStatusError as error:
            return f"failed to create extended resource claim for pod {namespace}/{name}: {error}"
        claim_name = str(metadata_of(created).get("name"))
    try:
        await reserve(client, namespace, claim_name, name, uid, allocation)
    except ApiStatusError as error:
        return (
            f"failed to update status of extended resource claim {claim_name} for pod {namespace}/{name}: "
            f"{error}"
        )
    named = {"resourceClaimName": claim_name, "requestMappings": wanted.get("containerMappings") or []}
    if ((pod.get("status") or {}).get("extendedResourceClaimStatus")) == named:
        return None
    try:
        await client.patch(
            PODS, name, {"status": {"extendedResourceClaimStatus": named}}, namespace, subresource="status"
        )
    except ApiStatusError as error:
        return f"failed to update pod status for extended resource claim for pod {namespace}/{name}: {error}"
    return None


async def roll_back_extended_claim(client: KubeClient, pod: JsonObject) -> None:
    """Delete the pod's extended-resource claim and clear its name from the pod's status."""
    namespace, name, _ = _identity(pod)
    claim = await find_extended_claim(client, pod)
    if claim is not None:
        meta = metadata_of(claim)
        claim_name = str(meta.get("name"))
        finalizers = [f for f in meta.get("finalizers") or [] if f != DELETE_PROTECTION_FINALIZER]
        try:
            if len(finalizers) != len(meta.get("finalizers") or []):
                await client.patch(
                    RESOURCE_CLAIMS, claim_name, {"metadata": {"finalizers": finalizers}}, namespace
                )
            await client.delete(RESOURCE_CLAIMS, claim_name, namespace)
        except ApiStatusError as error:
            if error.code != 404:
                raise
    if (pod.get("status") or {}).get("extendedResourceClaimStatus") is not None:
        patch = {"status": {"extendedResourceClaimStatus": None}}
        await client.patch(PODS, name, patch, namespace, subresource="status")


async def find_extended_claim(client: KubeClient, pod: JsonObject) -> JsonObject | None:
    """The claim made for this very pod's extended resources, if there is one."""
    namespace, name, uid = _identity(pod)
    claims, _ = await client.list_objects(RESOURCE_CLAIMS, namespace)
    for claim in claims:
        meta = metadata_of(claim)
        if (meta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
            continue
        for owner in meta.get("ownerReferences") or []:
            if owner.get("name") == name and str(owner.get("uid") or "") == uid and owner.get("controller"):
                return claim
    return None


def _new_claim(pod: JsonObject, device_requests: list[JsonObject]) -> JsonObject:
    namespace, name, uid = _identity(pod)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{name}-extended-resources-",
            "namespace": namespace,
            "finalizers": [DELETE_PROTECTION_FINALIZER],
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"devices": {"requests": device_requests}},
    }


def _identity(pod: JsonObject) -> tuple[str, str, str]:
    meta = metadata_of(pod)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(meta.get("uid") or "")
