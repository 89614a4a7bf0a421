"""The binder's DRA step, as KAI's binder plugin `dynamicresources` does it
(`pkg/binder/plugins/k8s-plugins/dynamicresources/dra.go`): before a pod is bound, each claim of its
BindRequest's `resourceClaimAllocations` is reserved for the pod (`status.reservedFor` gets the pod, once)
and, unless it is allocated already (a shared claim another pod uses), gets the allocation the scheduler
chose. The claim's status is written with its resourceVersion; a conflict (someone wrote it meanwhile)
reads it again, up to five times (client-go's `retry.DefaultRetry`).
"""

from __future__ import annotations

from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import RESOURCE_CLAIMS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.kai_objects import pod_claim_name
from kai_scheduler.k8s.runtime.objects import metadata_of

ACCESS = (access(RESOURCE_CLAIMS, "get"), access(RESOURCE_CLAIMS, "update", subresource="status"))

_ATTEMPTS = 5


async def bind_claims(client: KubeClient, request: JsonObject, pod: JsonObject) -> str | None:
    """Write the BindRequest's claim allocations for `pod`; None when done, else why not (KAI's words).
    Connection errors are the caller's to handle."""
    meta = metadata_of(pod)
    namespace, name = meta.get("namespace") or "default", str(meta.get("name") or "")
    uid = str(meta.get("uid") or "")
    for entry in (request.get("spec") or {}).get("resourceClaimAllocations") or []:
        claim = str(entry.get("name") or "")
        allocation = entry.get("allocation")
        if not allocation:
            return f"empty status for claim {claim} in bind request for pod {namespace}/{name}"
        claim_name = pod_claim_name(pod, claim)
        if claim_name is None:
            return f"claim {claim} from bind request not found in pod {namespace}/{name}"
        try:
            await reserve(client, namespace, claim_name, name, uid, allocation)
        except ApiStatusError as error:
            return f"failed to update claim {claim_name} for pod {namespace}/{name}: {error}"
    return None


async def reserve(
    client: KubeClient, namespace: str, claim_name: str, pod: str, uid: str, allocation: JsonObject
) -> None:
    """Reserve the claim for the pod and give it `allocation` unless it has one (a conflict reads it
    again)."""
    for attempt in range(_ATTEMPTS):
        claim = await client.get(RESOURCE_CLAIMS, claim_name, namespace)
        status = dict(claim.get("status") or {})
        consumers = list(status.get("reservedFor") or [])
        changed = False
        if not any(_is_pod(consumer, pod, uid) for consumer in consumers):
            consumers.append({"resource": "pods", "name": pod, "uid": uid})
            changed = True
        if not status.get("allocation"):
            status["allocation"] = allocation
            changed = True
        if not changed:
            return
        status["reservedFor"] = consumers
        try:
            await client.replace(RESOURCE_CLAIMS, {**claim, "status": status}, subresource="status")
            return
        except ApiStatusError as error:
            if error.code != 409 or attempt == _ATTEMPTS - 1:
                raise


def _is_pod(consumer: JsonObject, pod: str, uid: str) -> bool:
    return (
        consumer.get("resource") == "pods"
        and not consumer.get("apiGroup")
        and consumer.get("name") == pod
        and str(consumer.get("uid") or "") == uid
    )
