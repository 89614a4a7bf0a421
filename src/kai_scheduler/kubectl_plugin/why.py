"""`kubectl kai why POD|PODGROUP`: why a pod or pod group waits and what would let it start.

What it reads, all written by the scheduler and its components (docs/live-reasons.md): the PodGroup's
scheduling condition (`status.schedulingConditions`, KAI's reason code and message per node pool), the
pod's `PodScheduled` condition (whose own reasons, such as `InvalidPod`, come first: they are the pod's),
the Warning and Normal events about the pod and its PodGroup, a BindRequest in flight, the queue's spec
and status (quota, limit, fair share, allocated), and the free GPUs of the nodes (`top.py`). From those
it says what would let the job start, by reason: a queue to create, a limit or a quota the job does not
fit in (by how much), no node with room for a pod (the most free GPUs on one node, and whether the queue
is within its fair share, which decides if other queues' pods are reclaimed for it), or the field of the
pod or PodGroup to fix. `Estimated start` is the PodGroup's `kai.scheduler/estimated-start` annotation
(the scheduler's start-time estimates, docs/start-times.md), when it has one; `Reservation` its
`kai.scheduler/reservation` (the nodes and GPUs the scheduler holds for it and when it expects it to start
there: reservation and backfill), when it has one, its start written as the estimated start is.

Without a name, every pod group of the namespace (or all, with -A) that has a scheduling condition, i.e.
that the scheduler could not place in its last attempt, as a table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from kai_scheduler.api import constants as c
from kai_scheduler.api import reasons
from kai_scheduler.api.timestamps import format_epoch
from kai_scheduler.k8s.runtime.client import BIND_REQUESTS, EVENTS, POD_GROUPS, PODS, QUEUES, JsonObject
from kai_scheduler.k8s.runtime.kai_objects import bind_request_succeeded
from kai_scheduler.k8s.runtime.objects import gpu_memory_mib_of
from kai_scheduler.kubectl_plugin.amounts import RESOURCES, pod_gpus, resource_list, show, spec_amount
from kai_scheduler.kubectl_plugin.api_client import Cluster, PluginError
from kai_scheduler.kubectl_plugin.table import render
from kai_scheduler.kubectl_plugin.top import fetch as fetch_gpus
from kai_scheduler.kubectl_plugin.top import gpu_allocation
from kai_scheduler.model.builder import reported_gpu_memory_range
from kai_scheduler.model.reservation_annotation import parse_reservation

POD_KINDS = ("pod", "pods", "po")
POD_GROUP_KINDS = ("podgroup", "podgroups", "pg")
EVENTS_SHOWN = 8
_EPOCH = datetime.fromtimestamp(0, tz=UTC)  # reservation starts are read as seconds since it
MESSAGE_WIDTH = 100  # the table's message column is cut here (`why NAME` shows it whole)


@dataclass(slots=True)
class Explanation:
    namespace: str
    pod: str | None
    pod_group: str | None
    queue: str | None
    state: str  # Waiting, Binding, Scheduled, Running, Finished
    reason: str = ""  # KAI's code (the PodGroup's), or the pod condition's reason
    message: str = ""
    node_pool: str = ""
    since: str = ""
    pending_pods: int = 0
    estimated_start: str | None = None
    reservation: dict[str, Any] | None = None  # nodes, start, gpus; or problem (an unreadable annotation)
    events: list[dict[str, Any]] = field(default_factory=list)
    to_start: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["podGroup"] = out.pop("pod_group")
        out["nodePool"] = out.pop("node_pool")
        out["pendingPods"] = out.pop("pending_pods")
        out["estimatedStart"] = out.pop("estimated_start")
        out["toStart"] = out.pop("to_start")
        return out


# --- finding what was asked about ------------------------------------------------------------------


def _split(target: str) -> tuple[str | None, str]:
    kind, slash, name = target.partition("/")
    if not slash:
        return None, target
    kind = kind.lower().split(".")[0]
    if kind not in POD_KINDS + POD_GROUP_KINDS:
        raise PluginError(f"why {target}: a pod or a pod group (pod/NAME, podgroup/NAME or pg/NAME)")
    return ("pod" if kind in POD_KINDS else "podgroup"), name


def _group_of(pod: Mapping[str, Any]) -> str | None:
    name = ((pod.get("metadata") or {}).get("annotations") or {}).get(c.POD_GROUP_ANNOTATION)
    return str(name) if name else None


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("name"))


async def explain(cluster: Cluster, target: str) -> Explanation:
    kind, name = _split(target)
    namespace = cluster.namespace
    pod = await cluster.get(PODS, name, namespace) if kind in (None, "pod") else None
    group = None
    if pod is None:
        group = await cluster.get(POD_GROUPS, name, namespace) if kind in (None, "podgroup") else None
        if group is None:
            what = {"pod": "pod", "podgroup": "pod group"}.get(kind or "", "pod or pod group")
            raise PluginError(f"no {what} {name} in namespace {namespace}")
    elif (group_name := _group_of(pod)) is not None:
        group = await cluster.get(POD_GROUPS, group_name, namespace)
    pods = [pod] if pod is not None else []
    if group is not None:
        members = [p for p in await cluster.list(PODS, namespace) if _group_of(p) == _key(group)]
        pods = pods or members
    else:
        members = pods
    queue_name = _queue_name(group, pods)
    queue = await cluster.get(QUEUES, queue_name) if queue_name else None
    explanation = Explanation(
        namespace=namespace,
        pod=_key(pod) if pod is not None else None,
        pod_group=_key(group) if group is not None else _group_of(pod or {}),
        queue=queue_name,
        state=_state(pods),
        pending_pods=sum(1 for p in members if _pending(p)),
    )
    if group is not None:
        annotations = (group.get("metadata") or {}).get("annotations") or {}
        explanation.estimated_start = annotations.get(c.ESTIMATED_START_ANNOTATION)
        explanation.reservation = reservation_of(annotations)
    _read_conditions(explanation, group, pod)
    explanation.events = _events(await cluster.list(EVENTS, namespace), [o for o in (pod, group) if o])
    if explanation.state == "Waiting":
        if pod is not None and not explanation.reason:
            await _binding(cluster, explanation, pod)
        if explanation.state == "Waiting":
            nodes, all_pods = await fetch_gpus(cluster)
            explanation.to_start = _to_start(explanation, group, pod, members, queue, nodes, all_pods)
    return explanation


def reservation_of(annotations: Mapping[str, Any]) -> dict[str, Any] | None:
    """A PodGroup's reservation annotation (its `annotations`) as shown: nodes, start in the annotation's
    own style (RFC 3339 UTC) and GPUs, or the problem with an unreadable one; None without one."""
    raw = annotations.get(c.RESERVATION_ANNOTATION)
    if not raw:
        return None
    try:
        held = parse_reservation(str(raw), _EPOCH)
    except ValueError as error:
        return {"problem": f"{c.RESERVATION_ANNOTATION}: {error}"}
    return {"nodes": list(held.nodes), "start": format_epoch(held.start), "gpus": held.gpus}


def _queue_name(group: Mapping[str, Any] | None, pods: list[JsonObject]) -> str | None:
    if group is not None and (group.get("spec") or {}).get("queue"):
        return str(group["spec"]["queue"])
    for pod in pods:
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(c.QUEUE_LABEL)
        if label:
            return str(label)
    return None


def _pending(pod: Mapping[str, Any]) -> bool:
    return not (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase") in (
        None,
        "",
        "Pending",
    )


def _state(pods: list[JsonObject]) -> str:
    if not pods:
        return "Waiting"  # a PodGroup whose pods do not exist (yet)
    if any(_pending(p) for p in pods):
        return "Waiting"
    phases = {(p.get("status") or {}).get("phase") for p in pods}
    if phases <= {"Succeeded", "Failed"}:
        return "Finished"
    return "Running" if "Running" in phases else "Scheduled"


def _read_conditions(explanation: Explanation, group: JsonObject | None, pod: JsonObject | None) -> None:
    """The pod's own reason when it is the pod's (InvalidPod, PriorityClassNotFound, PodGroupNotFound,
    InvalidPodGroup: docs/live-reasons.md), else the PodGroup's latest scheduling condition (KAI's reason
    code), else the pod's PodScheduled=False."""
    pod_condition = next(
        (
            condition
            for condition in ((pod or {}).get("status") or {}).get("conditions") or []
            if condition.get("type") == "PodScheduled" and condition.get("status") == "False"
        ),
        None,
    )
    conditions = ((group or {}).get("status") or {}).get("schedulingConditions") or []
    own = pod_condition is not None and pod_condition.get("reason") != reasons.POD_UNSCHEDULABLE
    if conditions and not own:
        latest = max(conditions, key=lambda cond: str(cond.get("lastTransitionTime") or ""))
        explanation.reason = str(latest.get("reason") or reasons.UNSCHEDULABLE)
        explanation.message = str(latest.get("message") or "")
        explanation.node_pool = str(latest.get("nodePool") or "")
        explanation.since = str(latest.get("lastTransitionTime") or "")
    elif pod_condition is not None:
        explanation.reason = str(pod_condition.get("reason") or "")
        explanation.message = str(pod_condition.get("message") or "")
        explanation.since = str(pod_condition.get("lastTransitionTime") or "")


# What to do about the reasons that are the pod's or its PodGroup's own (their messages name the field).
_FIXES = {
    reasons.INVALID_POD: "fix the field the message names (the admission webhook refuses such pods); a pod "
    "whose annotations are fixed in place is read again and scheduled",
    reasons.PRIORITY_CLASS_NOT_FOUND: "create that PriorityClass, or recreate the pod with one that exists",
    reasons.POD_GROUP_NOT_FOUND: "create the PodGroup the pod-group-name annotation names (the pod grouper "
    "makes one for the workloads it knows: is it running?)",
    reasons.INVALID_POD_GROUP: "fix the PodGroup's field the message names",
}


def _events(events: list[JsonObject], objects: list[JsonObject]) -> list[dict[str, Any]]:
    """The latest events about the objects, oldest first (as `kubectl describe` lists them)."""
    wanted = {
        (str(o.get("kind") or "Pod"), _key(o)): str((o.get("metadata") or {}).get("uid") or "")
        for o in objects
    }
    chosen = []
    for event in events:
        involved = event.get("involvedObject") or {}
        uid = wanted.get((str(involved.get("kind")), str(involved.get("name"))))
        if uid is None or (uid and involved.get("uid") and involved.get("uid") != uid):
            continue
        chosen.append(
            {
                "type": event.get("type") or "",
                "reason": event.get("reason") or "",
                "object": f"{involved.get('kind')}/{involved.get('name')}",
                "message": event.get("message") or "",
                "count": int(event.get("count") or 1),
                "last": str(event.get("lastTimestamp") or event.get("eventTime") or ""),
            }
        )
    chosen.sort(key=lambda e: e["last"])
    return chosen[-EVENTS_SHOWN:]


async def _binding(cluster: Cluster, explanation: Explanation, pod: JsonObject) -> None:
    """A pod with no reason to wait may be on its way: a BindRequest names it."""
    meta = pod.get("metadata") or {}
    if (pod.get("spec") or {}).get("schedulerName") not in (None, c.SCHEDULER_NAME):
        explanation.to_start.append(
            f"the pod asks for scheduler {pod['spec']['schedulerName']!r}, not {c.SCHEDULER_NAME!r}"
        )
        return
    request = await cluster.get(BIND_REQUESTS, str(meta.get("name")), explanation.namespace)
    if request is not None and (request.get("status") or {}).get("phase") != "Failed":
        explanation.state = "Binding"
        node = (request.get("spec") or {}).get("selectedNode")
        # No Succeeded is written (the binder's module doc): a bound pod says it.
        done = bind_request_succeeded(request, pod)
        phase = "Succeeded" if done else (request.get("status") or {}).get("phase") or "Pending"
        detail = (request.get("status") or {}).get("reason") or ""
        explanation.message = f"BindRequest to node {node}: {phase}" + (f" ({detail})" if detail else "")


# --- what would let it start -------------------------------------------------------------------------


def _request(pods: list[JsonObject], gpu_memory_mib: float) -> tuple[dict[str, float], list[float], bool]:
    """What the pending pods ask for together (GPUs, cores, bytes; a `gpu-memory` request weighed with
    `gpu_memory_mib`, as the scheduler weighs it), the GPUs each needs on one node, and whether some pod's
    GPU request could not be read (a malformed annotation)."""
    total = dict.fromkeys(RESOURCES, 0.0)
    each: list[float] = []
    unreadable = False
    for pod in pods:
        if not _pending(pod):
            continue
        gpus = pod_gpus(pod)
        if gpus is None:
            unreadable = True
            continue
        total["gpu"] += gpus.gpus(None, gpu_memory_mib)
        total["cpu"] += gpus.cpu
        total["memory"] += gpus.memory
        # A gpu-memory part is left out here: it fits on any GPU with the memory, whatever the count.
        each.append(gpus.gpus(None))
    return total, each, unreadable


def _to_start(
    explanation: Explanation,
    group: JsonObject | None,
    pod: JsonObject | None,
    members: list[JsonObject],
    queue: JsonObject | None,
    nodes: list[JsonObject],
    all_pods: list[JsonObject],
) -> list[str]:
    hints: list[str] = []
    name = explanation.queue
    if explanation.reason in _FIXES:
        return [_FIXES[explanation.reason]]
    if pod is not None and group is None:
        hints.append("the pod has no PodGroup yet: the pod grouper makes one (is it running?)")
        return hints
    if name is None:
        return [f"the workload names no queue: label it with {c.QUEUE_LABEL}=<queue>"]
    if queue is None:
        return [f"queue {name} does not exist: create it, or label the workload with an existing queue"]
    pending = [p for p in members if _pending(p)]
    # The scheduler weighs what a job asks with the cluster's smallest GPU memory, and checks its queue's
    # quota and limit with the largest (`SharedGpuRequest.queue_gpus`).
    smallest, largest = reported_gpu_memory_range(np.array([gpu_memory_mib_of(n) for n in nodes]))
    asked, each, unreadable = _request(pending, smallest)
    asked_of_quota = _request(pending, largest)[0]
    if unreadable:
        hints.append("a pod's GPU request cannot be read: fix the annotation the message names")
    status = queue.get("status") or {}
    allocated = resource_list(status.get("allocated"))
    non_preemptible = resource_list(status.get("allocatedNonPreemptible"))
    fair_share = resource_list(status.get("fairShare"))
    code = explanation.reason
    for resource in RESOURCES:
        need = asked_of_quota[resource]
        if need <= 0:
            continue
        held = allocated.get(resource, 0.0)
        limit = spec_amount(queue, resource, "limit")
        quota = spec_amount(queue, resource, "quota")
        if code == reasons.OVER_LIMIT and limit is not None and held + need > limit:
            hints.append(
                f"queue {name} may use at most {show(resource, limit)} {resource}; it holds "
                f"{show(resource, held)} and this job asks for {show(resource, need)}: it starts when "
                f"{show(resource, held + need - limit)} {resource} of the queue's pods is freed, or with "
                f"a limit of {show(resource, held + need)}"
            )
        if code == reasons.NON_PREEMPTIBLE_OVER_QUOTA and quota is not None:
            held_np = non_preemptible.get(resource, 0.0)
            if held_np + need > quota:
                hints.append(
                    f"a non-preemptible job must fit in queue {name}'s quota: {show(resource, quota)} "
                    f"{resource}, {show(resource, held_np)} held by non-preemptible pods, this job asks "
                    f"for {show(resource, need)}: raise the quota to {show(resource, held_np + need)}, "
                    "wait for non-preemptible pods to finish, or make the job preemptible (a priority "
                    "class below 100, e.g. train)"
                )
    if code in (reasons.UNSCHEDULABLE, "") and explanation.message:
        hints.extend(_room(explanation, queue, asked, each, fair_share, allocated, nodes, all_pods))
    min_member = int(((group or {}).get("spec") or {}).get("minMember") or 1)
    if min_member > 1:
        hints.append(f"the pod group is a gang: {min_member} pods must fit at once")
    if not hints and explanation.reason:
        hints.append("see the message: the scheduler's words for what to change")
    if not explanation.reason:
        hints.append("the scheduler has not said why yet: it may not have had a cycle since the pod came")
    return hints


def _room(
    explanation: Explanation,
    queue: JsonObject,
    asked: Mapping[str, float],
    each: list[float],
    fair_share: Mapping[str, float],
    allocated: Mapping[str, float],
    nodes: list[JsonObject],
    all_pods: list[JsonObject],
) -> list[str]:
    hints: list[str] = []
    name = explanation.queue
    biggest = max(each, default=0.0)
    if biggest > 0:
        table = gpu_allocation(nodes, all_pods)
        largest = max(table, key=lambda n: (n.gpus, n.name), default=None)
        if largest is None or largest.gpus + 1e-9 < biggest:
            size = f"the largest has {show('gpu', largest.gpus)}" if largest else "there are no GPU nodes"
            return [
                f"no node has {show('gpu', biggest)} GPUs ({size}): ask for fewer GPUs per pod, or add a "
                "node that large"
            ]
        best = max(table, key=lambda n: (n.free, n.name))
        if best.free + 1e-9 < biggest:
            hints.append(
                f"no node has {show('gpu', biggest)} free GPUs for a pod (the most is "
                f"{show('gpu', best.free)} on {best.name})"
            )
    gpus = asked.get("gpu", 0.0)
    if gpus > 0 and "gpu" in fair_share:
        held, share = allocated.get("gpu", 0.0), fair_share["gpu"]
        if held + gpus <= share + 1e-9:
            hints.append(
                f"queue {name} is within its fair share ({show('gpu', held)} + {show('gpu', gpus)} of "
                f"{show('gpu', share)} GPUs): the scheduler reclaims GPUs for it from queues over their "
                "fair share, if their pods are preemptible"
            )
        else:
            hints.append(
                f"queue {name} would exceed its fair share ({show('gpu', held)} + {show('gpu', gpus)} > "
                f"{show('gpu', share)} GPUs): it starts when GPUs are free; nothing is reclaimed for it"
            )
    return hints


# --- output ---------------------------------------------------------------------------------------


def text(e: Explanation) -> str:
    header = ("POD", "PODGROUP", "QUEUE", "STATE", "REASON", "PENDING PODS")
    row = (e.pod or "-", e.pod_group or "-", e.queue or "-", e.state, e.reason or "-", str(e.pending_pods))
    lines = [render(header, [row]).rstrip("\n"), ""]
    if e.message:
        pool = f" (node pool {e.node_pool})" if e.node_pool else ""
        lines.append(f"Message{pool}: {e.message}")
    if e.since:
        lines.append(f"Since: {e.since}")
    if e.estimated_start:
        lines.append(f"Estimated start: {e.estimated_start}")
    if e.reservation is not None:
        lines.append(f"Reservation: {_reservation_text(e.reservation)}")
    if e.to_start:
        lines.append("To start:")
        lines.extend(f"  - {hint}" for hint in e.to_start)
    if e.events:
        lines.append("Events:")
        lines.append(
            "  "
            + render(
                ("TYPE", "REASON", "OBJECT", "MESSAGE"),
                [(ev["type"], ev["reason"], ev["object"], ev["message"]) for ev in e.events],
            )
            .rstrip("\n")
            .replace("\n", "\n  ")
        )
    return "\n".join(lines) + "\n"


def _reservation_text(reservation: Mapping[str, Any]) -> str:
    if "problem" in reservation:
        return f"unreadable ({reservation['problem']})"
    gpus = f"{show('gpu', reservation['gpus'])} GPUs on " if reservation["gpus"] else ""
    return f"{gpus}nodes {', '.join(reservation['nodes'])}, expected to start at {reservation['start']}"


async def waiting_groups(cluster: Cluster, all_namespaces: bool) -> list[dict[str, Any]]:
    namespace = None if all_namespaces else cluster.namespace
    rows = []
    for group in await cluster.list(POD_GROUPS, namespace):
        conditions = (group.get("status") or {}).get("schedulingConditions") or []
        if not conditions:
            continue
        latest = max(conditions, key=lambda cond: str(cond.get("lastTransitionTime") or ""))
        meta = group.get("metadata") or {}
        rows.append(
            {
                "namespace": meta.get("namespace") or "default",
                "podGroup": meta.get("name"),
                "queue": (group.get("spec") or {}).get("queue"),
                "pending": int((group.get("status") or {}).get("pending") or 0),
                "reason": latest.get("reason") or "",
                "message": latest.get("message") or "",
                "estimatedStart": (meta.get("annotations") or {}).get(c.ESTIMATED_START_ANNOTATION),
            }
        )
    rows.sort(key=lambda r: (r["namespace"], r["podGroup"]))
    return rows


def waiting_table(rows: list[dict[str, Any]], all_namespaces: bool) -> str:
    def cut(message: str) -> str:
        return message if len(message) <= MESSAGE_WIDTH else message[: MESSAGE_WIDTH - 3] + "..."

    headers: tuple[str, ...] = ("PODGROUP", "QUEUE", "PENDING", "REASON", "ESTIMATED START", "MESSAGE")
    body: list[tuple[str, ...]] = [
        (
            str(r["podGroup"]),
            str(r["queue"] or "-"),
            str(r["pending"]),
            str(r["reason"]),
            str(r["estimatedStart"] or "-"),
            cut(r["message"]),
        )
        for r in rows
    ]
    if all_namespaces:
        headers = ("NAMESPACE", *headers)
        body = [(str(r["namespace"]), *row) for r, row in zip(rows, body, strict=True)]
    return render(headers, body)


__all__ = ["Explanation", "explain", "reservation_of", "text", "waiting_groups", "waiting_table"]
