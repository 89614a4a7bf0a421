"""What the API server does to an object between decoding and storing it: defaulting, and the admission
plugins a scheduler depends on (Priority, DefaultTolerationSeconds) for pods; the fields of a pod that
an update may not change; the defaults of namespaces and PriorityClasses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ApiError, invalid
from .jsoncopy import clone
from .meta import Ident, Obj, meta
from .resources import ResourceType

POD_MUTABLE_HINT = (
    "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def default_on_create(
    rt: ResourceType, obj: Obj, *, keep_status: bool, priority_classes: Mapping[Ident, Obj]
) -> None:
    """Default (and for pods, admit) a new object in place; raises the API server's error to refuse it."""
    if rt.key == "pods":
        admit_pod(obj, keep_status=keep_status, priority_classes=priority_classes)
    elif rt.key == "namespaces":
        metadata = meta(obj)
        metadata.setdefault("labels", {})["kubernetes.io/metadata.name"] = metadata["name"]
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif rt.key == "priorityclasses.scheduling.k8s.io":
        if not isinstance(obj.get("value"), int):
            raise invalid(rt.kind, meta(obj)["name"], [("value", "Required value")], rt.key)
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")


def admit_pod(pod: Obj, *, keep_status: bool, priority_classes: Mapping[Ident, Obj]) -> None:
    """Pod defaulting and the admission plugins that matter to a scheduler (Priority,
    DefaultTolerationSeconds). `keep_status`: keep a status given by a test (phase defaulted)."""
    name = str(meta(pod)["name"])
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise invalid("Pod", name, [("spec.containers", "Required value")], "pods")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise invalid("Pod", name, [("spec.containers", "Required value")], "pods")
    causes: list[tuple[str, str]] = []
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            if not isinstance(c, dict) or not c.get("name"):
                causes.append((f"spec.{group}[{i}].name", "Required value"))
                continue
            if not c.get("image"):
                causes.append((f"spec.{group}[{i}].image", "Required value"))
            _default_container(c)
    if causes:
        raise invalid("Pod", name, causes, "pods")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    _admit_priority(pod, spec, priority_classes)
    tolerations = spec.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            )
    if keep_status and isinstance(pod.get("status"), dict):
        pod["status"].setdefault("phase", "Pending")
        pod["status"].setdefault("qosClass", qos_class(spec))
    else:
        pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def _default_container(c: dict[str, Any]) -> None:
    image = str(c.get("image", ""))
    c.setdefault(
        "imagePullPolicy",
        "Always" if ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest") else "IfNotPresent",
    )
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    res = c.setdefault("resources", {})
    limits = res.get("limits") or {}
    if limits:
        requests = res.setdefault("requests", {})
        for k, v in limits.items():
            requests.setdefault(k, v)


def _admit_priority(pod: Obj, spec: dict[str, Any], priority_classes: Mapping[Ident, Obj]) -> None:
    class_name = spec.get("priorityClassName")
    if class_name:
        pc = priority_classes.get(("", str(class_name)))
        if pc is None:
            raise ApiError(
                403,
                f'pods "{meta(pod)["name"]}" is forbidden: no PriorityClass with name {class_name} was found',
                reason="Forbidden",
                details={"name": meta(pod)["name"], "kind": "pods"},
            )
    else:
        pc = next((p for p in priority_classes.values() if p.get("globalDefault")), None)
        if pc is not None:
            spec["priorityClassName"] = meta(pc)["name"]
    spec["priority"] = int(pc["value"]) if pc is not None else 0
    if pc is not None:
        spec.setdefault("preemptionPolicy", pc.get("preemptionPolicy", "PreemptLowerPriority"))


def check_pod_update(old: Obj, new: Obj) -> None:
    """Refuse an update that changes a pod's spec beyond the fields Kubernetes lets an update change."""
    if old.get("spec") == new.get("spec"):  # most updates (labels, annotations): nothing to compare
        return

    def frozen(spec: Any) -> Any:
        spec = clone(spec) if isinstance(spec, dict) else {}
        for group in ("containers", "initContainers"):
            for c in spec.get(group) or []:
                if isinstance(c, dict):
                    c.pop("image", None)
        for k in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"):
            spec.pop(k, None)
        return spec

    if frozen(old.get("spec")) != frozen(new.get("spec")):
        name = old["metadata"]["name"]
        raise invalid("Pod", name, [("spec", f"Forbidden: {POD_MUTABLE_HINT}")], "pods")


def qos_class(spec: dict[str, Any]) -> str:
    requests_any = False
    guaranteed = True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim.get(r))) != str(lim[r]):
                guaranteed = False
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
