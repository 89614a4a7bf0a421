"""A pod's runtime facts as the scheduling core sees them.

* Each pod's runtime facts: `spec.nodeName`, `status.phase`, the shared GPUs from the `runai-gpu-group`
  label(s), `deletionTimestamp` (terminating). A pod with an outstanding BindRequest (not Failed, for this
  very pod: same uid) counts as bound to the BindRequest's selected node and GPU groups, as KAI's
  scheduler cache does (one this process created is in the informer's cache from the moment it is
  written: `BindRequests`), so that no pod is ever placed twice. Pods this process evicted are terminating
  until the informer catches up (`evicting`). Pipelined pods carry their nominated node (`nominated`,
  `ClusterCache.nominate`). Pending pods with scheduling gates are left out unless one of them is the queue
  admission gate (the scheduler's to remove: `api.admission_gate`), and so are pending pods not yet
  grouped when a pod grouper runs (`require_pod_groups`).
* GPU reservation pods (label `app=kai-resource-reservation`, created by the binder) are left out
  entirely: the model already accounts each shared GPU, so they must not count again as foreign pods.
"""

from __future__ import annotations

from kai_scheduler.api import constants as c
from kai_scheduler.api.admission_gate import has_our_gate
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.controlplane.bookkeeping import scheduler_phase
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.kai_objects import RESERVATION_APP, bind_request_stands
from kai_scheduler.k8s.runtime.objects import labels_of, metadata_of
from kai_scheduler.k8s.scheduler.live_state import TERMINAL_PHASES, Placed


def pod_facts(
    obj: JsonObject,
    request: JsonObject | None,
    evicting: str | None,
    *,
    ours: bool,
    require_pod_groups: bool,
) -> tuple[str | None, str, tuple[str, ...], bool] | None:
    """(node, phase, gpu groups, terminating) as the core sees a pod (`ours`: of this scheduler), given its
    BindRequest and what the loop is evicting; None to leave the pod out."""
    meta = metadata_of(obj)
    spec = obj.get("spec") or {}
    raw_phase = str((obj.get("status") or {}).get("phase") or "Pending")
    node = spec.get("nodeName") or None
    terminating = bool(meta.get("deletionTimestamp")) or (
        evicting is not None and evicting == str(meta.get("uid") or "")
    )
    groups = pod_gpu_groups(meta.get("labels") or {})
    bound = node is not None and raw_phase not in TERMINAL_PHASES
    if node is None and raw_phase not in TERMINAL_PHASES:
        placed = outstanding_placement(request, obj)
        if placed is not None:
            node, groups, bound = placed.node, placed.gpu_groups, True
    elif bound and not groups:
        placed = outstanding_placement(request, obj)
        if placed is not None and placed.node == node:
            groups = placed.gpu_groups
    gates = spec.get("schedulingGates")
    if not bound and gates and ours and not has_our_gate(gates):
        return None  # gated: not for the scheduler yet (Kubernetes semantics)
    # Ours (queue admission gating) stays in: the `ungate` action admits it, and counts its demand.
    grouped = bool((meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION))
    if not bound and require_pod_groups and ours and not grouped:
        return None  # not grouped yet: the pod grouper has not annotated it
    node_name, phase = scheduler_phase(str(node) if bound else None, raw_phase)
    return (node_name, phase, groups if bound else (), terminating)


def is_reservation_pod(obj: JsonObject) -> bool:
    """A GPU reservation pod (label `app=kai-resource-reservation`): not part of the ClusterState."""
    return labels_of(obj).get("app") == RESERVATION_APP


def outstanding_placement(request: JsonObject | None, pod: JsonObject) -> Placed | None:
    """Where a BindRequest puts its pod: unless it Failed or belongs to another incarnation of the pod (see
    `bind_request_is_for`). A Succeeded request counts too: the cache may show it before the bound pod."""
    if request is None or not bind_request_stands(request, pod):
        return None
    spec = request.get("spec") or {}
    node = spec.get("selectedNode")
    if not node:
        return None
    return Placed(str(node), tuple(str(g) for g in spec.get("selectedGPUGroups") or ()))


__all__ = ["is_reservation_pod", "outstanding_placement", "pod_facts"]
