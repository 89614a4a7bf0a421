"""The object store behind the fake API server: Kubernetes write semantics, one global resourceVersion, a
bounded event history for watches, and a Python API for tests.

Everything here is independent of HTTP: `FakeApiServer` translates requests into these calls, and tests can
seed or inspect state directly (`store.create(...)`, `store.list("pods")`, `store.wait_until(...)`).
"""

from __future__ import annotations

import base64
import json
import queue
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from . import patch as patches
from .errors import (
    STALE,
    ApiError,
    already_exists,
    bad_request,
    conflict,
    gone,
    invalid,
    not_found,
    success_status,
)
from .jsoncopy import clone
from .resources import DEFAULT_CRDS, Registry, ResourceType, types_from_crd
from .selectors import Matcher, parse_field_selector, parse_label_selector

Obj = dict[str, Any]

INITIAL_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")
PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_APPLY_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (PATCH_MERGE, PATCH_STRATEGIC, PATCH_JSON, PATCH_APPLY)
_PATCH_ALIASES = {
    "merge": PATCH_MERGE,
    "strategic": PATCH_STRATEGIC,
    "json": PATCH_JSON,
    "apply": PATCH_APPLY,
}

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_PATH_SEGMENT_GROUPS = frozenset({"rbac.authorization.k8s.io"})

POD_MUTABLE_HINT = (
    "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def format_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def parse_time(text: str) -> float:
    import calendar

    return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))


@dataclass
class Event:
    """A committed change. `prev` is the state before it (None for ADDED); for DELETED, `obj` is the last
    state with the deletion's resourceVersion."""

    type: str
    rv: int
    key: str
    obj: Obj
    prev: Obj | None


@dataclass(frozen=True)
class BindRecord:
    namespace: str
    name: str
    node: str
    resource_version: int


@dataclass(frozen=True)
class EvictionRecord:
    namespace: str
    name: str
    resource_version: int


WatchItem = tuple[str, Obj | None]
DROP = "_DROP"
CLOSE = "_CLOSE"


class Watcher:
    """One open watch: the store pushes matching, converted events into `items`."""

    def __init__(self, rt: ResourceType, namespace: str | None, labels: Matcher, fields: Matcher) -> None:
        self.rt = rt
        self.namespace = namespace
        self._labels = labels
        self._fields = fields
        self.items: queue.SimpleQueue[WatchItem] = queue.SimpleQueue()

    def matches(self, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self._labels(obj) and self._fields(obj)

    def convert(self, ev: Event) -> WatchItem | None:
        """The event as this watcher sees it: selector changes turn MODIFIED into ADDED or DELETED."""
        if ev.key != self.rt.key:
            return None
        now = self.matches(ev.obj)
        if ev.type == "MODIFIED" and ev.prev is not None:
            before = self.matches(ev.prev)
            if now and before:
                return ("MODIFIED", ev.obj)
            if now:
                return ("ADDED", ev.obj)
            if before:
                prev = clone(ev.prev)
                prev["metadata"]["resourceVersion"] = str(ev.rv)
                return ("DELETED", prev)
            return None
        return (ev.type, ev.obj) if now else None

    def offer(self, ev: Event) -> None:
        item = self.convert(ev)
        if item is not None:
            self.items.put(item)

    def drop(self) -> None:
        """End the watch abruptly (the connection is cut, as when a load balancer drops it)."""
        self.items.put((DROP, None))

    def close(self) -> None:
        """End the watch cleanly (as at a server-side timeout)."""
        self.items.put((CLOSE, None))


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _strip_meta_status(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _encode_continue(rv: int, start: tuple[str, str]) -> str:
    raw = json.dumps({"rv": rv, "start": list(start)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None


class Store:
    """Thread-safe object store with Kubernetes semantics.

    Options:
    * `history_limit`: how many events are kept for watch resumption; older resourceVersions get 410 Gone.
    * `graceful_pod_deletion`: deleting a pod that runs on a node (and is not finished) only sets
      `deletionTimestamp` (a MODIFIED event), as with a kubelet; `complete_pod_deletions()` then removes
      it. Off: pods are removed at once (one DELETED event).
    * `kubelet`: a bound pod becomes Running at once (a second write after the binding).
    * `auto_create_namespaces`: create missing namespaces instead of answering 404 like the real server.
    * `crds`: CRDs installed at start (default: KAI's and the workload kinds the pod grouper knows).
    """

    def __init__(
        self,
        *,
        history_limit: int = 4096,
        graceful_pod_deletion: bool = False,
        kubelet: bool = False,
        auto_create_namespaces: bool = False,
        crds: Iterable[Obj] = DEFAULT_CRDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = Registry.with_builtins()
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._history: deque[Event] = deque()
        self._history_limit = max(1, history_limit)
        self._compacted_rv = 0
        self._rv = 0
        self._watchers: set[Watcher] = set()
        self._applied: dict[tuple[str, str, str, str], Obj] = {}
        self.graceful_pod_deletion = graceful_pod_deletion
        self.kubelet = kubelet
        self.auto_create_namespaces = auto_create_namespaces
        self.clock = clock
        self.binds: list[BindRecord] = []
        self.evictions: list[EvictionRecord] = []
        crd_type = self.registry.resolve("customresourcedefinitions.apiextensions.k8s.io")
        ns_type = self.registry.resolve("namespaces")
        for ns in INITIAL_NAMESPACES:
            self.create_object(ns_type, {"metadata": {"name": ns}}, None)
        for crd in crds:
            self.create_object(crd_type, clone(crd), None)

    # ------------------------------------------------------------------------------------------- basics

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion (as an int; the API shows it as a string)."""
        with self.lock:
            return self._rv

    @property
    def compacted_resource_version(self) -> int:
        """Watches and list continuations from a resourceVersion below this get 410 Gone."""
        with self.lock:
            return self._compacted_rv

    def resource(self, name: str | ResourceType) -> ResourceType:
        """Resolve `pods`, `pod`, `Pod`, `po`, `podgroups.scheduling.run.ai`, `pg`, ... to a type."""
        if isinstance(name, ResourceType):
            return name
        try:
            return self.registry.resolve(name)
        except KeyError:
            raise ApiError(404, f"the server doesn't have a resource type {name!r}") from None

    def type_of(self, obj: Obj) -> ResourceType:
        rt = self.registry.by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if rt is None:
            raise ApiError(
                404, f"no matches for kind {obj.get('kind')!r} in version {obj.get('apiVersion')!r}"
            )
        return rt

    def compact(self) -> int:
        """Forget the event history: watches (and list continuations) from any earlier resourceVersion now
        get 410 Gone. Returns the new compaction point."""
        with self.lock:
            self._history.clear()
            self._compacted_rv = self._rv
            return self._rv

    def history(self) -> list[Event]:
        with self.lock:
            return list(self._history)

    def _now(self) -> str:
        return format_time(self.clock())

    def _qualified(self, rt: ResourceType) -> str:
        return rt.key

    def _commit(self, rt: ResourceType, kind: str, obj: Obj, prev: Obj | None) -> Obj:
        """Write one change (lock held): bump the resourceVersion, store, record and fan out the event."""
        self._rv += 1
        meta = _meta(obj)
        meta["resourceVersion"] = str(self._rv)
        bucket = self._objects.setdefault(rt.key, {})
        ident = (str(meta.get("namespace") or ""), str(meta["name"]))
        if kind == "DELETED":
            bucket.pop(ident, None)
            for k in [k for k in self._applied if k[:3] == (rt.key, *ident)]:
                del self._applied[k]
        else:
            bucket[ident] = obj
        ev = Event(kind, self._rv, rt.key, obj, prev)
        self._history.append(ev)
        while len(self._history) > self._history_limit:
            dropped = self._history.popleft()
            self._compacted_rv = dropped.rv
        for w in list(self._watchers):
            w.offer(ev)
        self._changed.notify_all()
        return obj

    def _find(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        return self._objects.get(rt.key, {}).get((namespace or "" if rt.namespaced else "", name))

    def _require(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._find(rt, namespace, name)
        if obj is None:
            raise not_found(self._qualified(rt), name)
        return obj

    def _versioned(self, obj: Obj, rt: ResourceType) -> Obj:
        if obj.get("apiVersion") == rt.api_version:
            return clone(obj)
        out = clone(obj)
        out["apiVersion"] = rt.api_version
        return out

    # ------------------------------------------------------------------------------------ validation

    def _validate_name(self, rt: ResourceType, name: str) -> None:
        if rt.group in _PATH_SEGMENT_GROUPS:
            ok = name not in (".", "..") and "/" not in name and "%" not in name
            msg = 'may not contain "/" or "%"'
        elif rt.plural == "namespaces":
            ok = len(name) <= 63 and bool(_LABEL.match(name))
            msg = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
        else:
            ok = len(name) <= 253 and bool(_SUBDOMAIN.match(name))
            msg = (
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                "'.', and must start and end with an alphanumeric character"
            )
        if not ok:
            raise invalid(rt.kind, name, [("metadata.name", f'Invalid value: "{name}": {msg}')], rt.key)

    def _validate_meta(self, rt: ResourceType, obj: Obj) -> None:
        meta = _meta(obj)
        name = str(meta.get("name", ""))
        causes: list[tuple[str, str]] = []
        for sub in ("labels", "annotations"):
            values = meta.get(sub)
            if values is None:
                continue
            if not isinstance(values, dict):
                causes.append((f"metadata.{sub}", "Invalid value: must be a map of strings"))
                continue
            for key, value in values.items():
                if not _valid_qualified_key(str(key)):
                    causes.append(
                        (
                            f"metadata.{sub}",
                            f'Invalid value: "{key}": name part must consist of '
                            "alphanumeric characters, '-', '_' or '.'",
                        )
                    )
                if not isinstance(value, str):
                    causes.append((f"metadata.{sub}.{key}", "Invalid value: must be a string"))
                elif sub == "labels" and (len(value) > 63 or (value and not _QUALIFIED_NAME.match(value))):
                    causes.append(
                        (
                            "metadata.labels",
                            f'Invalid value: "{value}": a valid label must be an '
                            "empty string or consist of alphanumeric characters, '-', '_' or '.'",
                        )
                    )
        if causes:
            raise invalid(rt.kind, name, causes, rt.key)

    def _check_kind(self, rt: ResourceType, obj: Obj) -> None:
        kind = obj.get("kind")
        if kind and kind != rt.kind:
            raise bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): {kind}")
        api_version = obj.get("apiVersion")
        group = str(api_version).rpartition("/")[0]
        if api_version and api_version != rt.api_version and (not rt.custom or group != rt.group):
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind

    # ----------------------------------------------------------------------------------------- create

    def create_object(
        self,
        rt: ResourceType,
        body: Obj,
        namespace: str | None,
        *,
        dry_run: bool = False,
        keep_status: bool = False,
    ) -> Obj:
        """POST: the real server's create, including defaulting and admission the scheduler relies on."""
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = clone(body)
        self._check_kind(rt, obj)
        meta = _meta(obj)
        body_ns = meta.get("namespace")
        if rt.namespaced:
            if namespace and body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns or "default"
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
            namespace = None
        with self.lock:
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise invalid(
                        rt.kind,
                        "",
                        [("metadata.name", "Required value: name or generateName is required")],
                        rt.key,
                    )
                for _ in range(100):
                    candidate = str(prefix) + "".join(random.choice(_GENERATE_CHARS) for _ in range(5))
                    if self._find(rt, namespace, candidate) is None:
                        break
                meta["name"] = candidate
            name = str(meta["name"])
            self._validate_name(rt, name)
            self._validate_meta(rt, obj)
            if rt.namespaced:
                self._ensure_namespace(str(namespace), dry_run=dry_run)
            if self._find(rt, namespace, name) is not None:
                raise already_exists(self._qualified(rt), name)
            for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = self._now()
            meta["generation"] = 1
            if rt.has_status and not keep_status and rt.plural not in ("nodes",):
                obj.pop("status", None)
            self._prepare_create(rt, obj, keep_status=keep_status)
            if dry_run:
                return self._versioned(obj, rt)
            self._commit(rt, "ADDED", obj, None)
            if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
                self._register_crd(obj)
            if rt.key == "pods" and self.kubelet and (obj.get("spec") or {}).get("nodeName"):
                self._kubelet_start(rt, obj)
            return self._versioned(self._require(rt, namespace, name), rt)

    def _ensure_namespace(self, namespace: str, *, dry_run: bool) -> None:
        ns_type = self.registry.resolve("namespaces")
        ns = self._find(ns_type, None, namespace)
        if ns is None:
            if not self.auto_create_namespaces:
                raise not_found("namespaces", namespace)
            if not dry_run:
                self.create_object(ns_type, {"metadata": {"name": namespace}}, None)
        elif (ns.get("metadata") or {}).get("deletionTimestamp"):
            raise ApiError(
                403,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                reason="Forbidden",
            )

    def _prepare_create(self, rt: ResourceType, obj: Obj, *, keep_status: bool) -> None:
        if rt.key == "pods":
            self._prepare_pod(obj, keep_status=keep_status)
        elif rt.key == "namespaces":
            meta = _meta(obj)
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        elif rt.key == "customresourcedefinitions.apiextensions.k8s.io":
            self._validate_crd(obj)
            spec = obj["spec"]
            storage = [v["name"] for v in spec["versions"] if v.get("storage")]
            obj["status"] = {
                "acceptedNames": spec["names"],
                "conditions": [
                    {
                        "type": "NamesAccepted",
                        "status": "True",
                        "reason": "NoConflicts",
                        "message": "no conflicts found",
                        "lastTransitionTime": self._now(),
                    },
                    {
                        "type": "Established",
                        "status": "True",
                        "reason": "InitialNamesAccepted",
                        "message": "the initial names have been accepted",
                        "lastTransitionTime": self._now(),
                    },
                ],
                "storedVersions": storage,
            }
        elif rt.key == "priorityclasses.scheduling.k8s.io":
            if not isinstance(obj.get("value"), int):
                raise invalid(rt.kind, _meta(obj)["name"], [("value", "Required value")], rt.key)
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def _prepare_pod(self, pod: Obj, *, keep_status: bool) -> None:
        """Pod defaulting and the admission plugins that matter to a scheduler (Priority,
        DefaultTolerationSeconds)."""
        name = str(_meta(pod)["name"])
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
                image = str(c.get("image", ""))
                c.setdefault(
                    "imagePullPolicy",
                    "Always"
                    if ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
                    else "IfNotPresent",
                )
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
                res = c.setdefault("resources", {})
                limits = res.get("limits") or {}
                if limits:
                    requests = res.setdefault("requests", {})
                    for k, v in limits.items():
                        requests.setdefault(k, v)
        if causes:
            raise invalid("Pod", name, causes, "pods")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("securityContext", {})
        spec.setdefault("enableServiceLinks", True)
        self._admit_priority(pod, spec)
        tolerations = spec.setdefault("tolerations", [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(
                t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations
            ):
                tolerations.append(
                    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                )
        if keep_status and isinstance(pod.get("status"), dict):
            pod["status"].setdefault("phase", "Pending")
            pod["status"].setdefault("qosClass", _qos_class(spec))
        else:
            pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}

    def _admit_priority(self, pod: Obj, spec: dict[str, Any]) -> None:
        pcs = self._objects.get("priorityclasses.scheduling.k8s.io", {})
        class_name = spec.get("priorityClassName")
        if class_name:
            pc = pcs.get(("", str(class_name)))
            if pc is None:
                raise ApiError(
                    403,
                    f'pods "{_meta(pod)["name"]}" is forbidden: no PriorityClass with name '
                    f"{class_name} was found",
                    reason="Forbidden",
                    details={"name": _meta(pod)["name"], "kind": "pods"},
                )
        else:
            pc = next((p for p in pcs.values() if p.get("globalDefault")), None)
            if pc is not None:
                spec["priorityClassName"] = _meta(pc)["name"]
        spec["priority"] = int(pc["value"]) if pc is not None else 0
        if pc is not None:
            spec.setdefault("preemptionPolicy", pc.get("preemptionPolicy", "PreemptLowerPriority"))

    # -------------------------------------------------------------------------------------------- CRDs

    def _validate_crd(self, crd: Obj) -> None:
        name = str(_meta(crd).get("name", ""))
        spec = crd.get("spec")
        causes: list[tuple[str, str]] = []
        if not isinstance(spec, dict):
            raise invalid(
                "CustomResourceDefinition",
                name,
                [("spec", "Required value")],
                "customresourcedefinitions.apiextensions.k8s.io",
            )
        group = str(spec.get("group", ""))
        names = spec.get("names") or {}
        plural, kind = str(names.get("plural", "")), str(names.get("kind", ""))
        if "." not in group:
            causes.append(
                ("spec.group", f'Invalid value: "{group}": should be a domain with at least one dot')
            )
        if not plural:
            causes.append(("spec.names.plural", "Required value"))
        if not kind:
            causes.append(("spec.names.kind", "Required value"))
        if name != f"{plural}.{group}":
            causes.append(
                ("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group')
            )
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            causes.append(
                (
                    "spec.scope",
                    f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
                )
            )
        versions = spec.get("versions")
        storage = (
            [v for v in versions if isinstance(v, dict) and v.get("storage")]
            if isinstance(versions, list)
            else []
        )
        if len(storage) != 1:
            causes.append(("spec.versions", "Invalid value: must have exactly one version marked as storage"))
        if causes:
            raise invalid(
                "CustomResourceDefinition", name, causes, "customresourcedefinitions.apiextensions.k8s.io"
            )
        names.setdefault("singular", kind.lower())
        names.setdefault("listKind", f"{kind}List")

    def _register_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        self.registry.replace_crd_types(str(spec["group"]), str(spec["names"]["plural"]), types_from_crd(crd))

    # -------------------------------------------------------------------------------------------- read

    def get_object(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        with self.lock:
            return self._versioned(self._require(rt, namespace, name), rt)

    def _state_at(self, rt: ResourceType, rv: int) -> dict[tuple[str, str], Obj]:
        """The objects of a type as they were at resourceVersion `rv` (which must not be compacted)."""
        state = dict(self._objects.get(rt.key, {}))
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            if ev.key != rt.key:
                continue
            meta = ev.obj["metadata"]
            ident = (str(meta.get("namespace") or ""), str(meta["name"]))
            if ev.type == "ADDED":
                state.pop(ident, None)
            elif ev.prev is not None:
                state[ident] = ev.prev
        return state

    def list_objects(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> tuple[list[Obj], int, str | None, int | None]:
        """List: (items, list resourceVersion, continue token, remaining item count)."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.selectable_fields)
        with self.lock:
            at = self._rv
            start: tuple[str, str] | None = None
            if continue_token:
                at, start = _decode_continue(continue_token)
                if at < self._compacted_rv:
                    raise gone(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter, or use the continue token "
                        "in this response to retrieve the remainder of the results. Continuing with the "
                        "provided token results in an inconsistent list - objects that were created, "
                        "modified, or deleted between the time the first chunk was returned and now may show "
                        "up in the list."
                    )
            elif resource_version not in (None, "", "0"):
                wanted = _parse_rv(resource_version)
                if resource_version_match == "Exact":
                    if wanted < self._compacted_rv:
                        raise gone(f"too old resource version: {wanted} ({self._compacted_rv + 1})")
                    if wanted > self._rv:
                        raise _too_large(wanted, self._rv)
                    at = wanted
                elif wanted > self._rv and not self._wait_for_rv(wanted, 3.0):
                    raise _too_large(wanted, self._rv)
            state = self._state_at(rt, at) if at != self._rv else self._objects.get(rt.key, {})
            keys = sorted(state)
            selected: list[tuple[tuple[str, str], Obj]] = []
            for ident in keys:
                if start is not None and ident <= start:
                    continue
                obj = state[ident]
                if rt.namespaced and namespace and ident[0] != namespace:
                    continue
                if labels(obj) and fields(obj):
                    selected.append((ident, obj))
            token: str | None = None
            remaining: int | None = None
            if limit and limit > 0 and len(selected) > limit:
                token = _encode_continue(at, selected[limit - 1][0])
                if not label_selector and not field_selector:
                    remaining = len(selected) - limit
                selected = selected[:limit]
            return [self._versioned(o, rt) for _, o in selected], at, token, remaining

    def _wait_for_rv(self, rv: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._rv < rv:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._changed.wait(left)
        return True

    # ------------------------------------------------------------------------------------------ watch

    def open_watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        send_initial_events: bool = False,
    ) -> tuple[Watcher, list[WatchItem]]:
        """Register a watcher; returns it with the events to send first (synthetic ADDED for the current
        state when no resourceVersion is given, else the history after it). Raises 410 Gone for a compacted
        resourceVersion and 504 for one in the future."""
        w = Watcher(
            rt,
            namespace,
            parse_label_selector(label_selector),
            parse_field_selector(field_selector, rt.selectable_fields),
        )
        with self.lock:
            backlog: list[WatchItem] = []
            if send_initial_events or resource_version in (None, "", "0"):
                for ident in sorted(self._objects.get(rt.key, {})):
                    obj = self._objects[rt.key][ident]
                    if w.matches(obj):
                        backlog.append(("ADDED", obj))
            else:
                since = _parse_rv(resource_version)
                if since < self._compacted_rv:
                    raise gone(
                        f"too old resource version: {since} ({self._compacted_rv + 1})", reason="Expired"
                    )
                if since > self._rv and not self._wait_for_rv(since, 3.0):
                    raise _too_large(since, self._rv)
                for ev in self._history:
                    if ev.rv > since:
                        item = w.convert(ev)
                        if item is not None:
                            backlog.append(item)
            self._watchers.add(w)
            return w, [(t, self._versioned(o, rt) if o is not None else None) for t, o in backlog]

    def close_watch(self, w: Watcher) -> None:
        with self.lock:
            self._watchers.discard(w)

    def watchers(self) -> list[Watcher]:
        with self.lock:
            return list(self._watchers)

    def bookmark_version(self, w: Watcher) -> int | None:
        """The resourceVersion a BOOKMARK may carry now: the current one, if the watcher has consumed every
        event up to it (None otherwise)."""
        with self.lock:
            return self._rv if w.items.empty() else None

    # ----------------------------------------------------------------------------------------- update

    def update_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        require_rv: bool | None = None,
        keep_status: bool = False,
    ) -> Obj:
        """PUT (also the last step of every patch): optimistic concurrency on metadata.resourceVersion."""
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        new = clone(body)
        self._check_kind(rt, new)
        meta = _meta(new)
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        with self.lock:
            old = self._require(rt, namespace, name)
            old_meta = old["metadata"]
            given_rv = meta.get("resourceVersion")
            if given_rv:
                if str(given_rv) != old_meta["resourceVersion"]:
                    raise conflict(self._qualified(rt), name, STALE)
            elif require_rv if require_rv is not None else rt.custom:
                raise invalid(
                    rt.kind,
                    name,
                    [("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")],
                    rt.key,
                )
            if subresource == "status":
                merged = clone(old)
                if "status" in new:
                    merged["status"] = new["status"]
                else:
                    merged.pop("status", None)
                new = merged
            else:
                if rt.has_status and not keep_status:
                    if "status" in old:
                        new["status"] = clone(old["status"])
                    else:
                        new.pop("status", None)
                new_meta = _meta(new)
                new_meta["name"] = name
                if rt.namespaced:
                    new_meta["namespace"] = namespace
                else:
                    new_meta.pop("namespace", None)
                for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                    if k in old_meta:
                        new_meta[k] = old_meta[k]
                    else:
                        new_meta.pop(k, None)
                new_meta.pop("selfLink", None)
                self._validate_meta(rt, new)
                if rt.key == "pods":
                    self._check_pod_update(old, new)
                elif rt.key == "customresourcedefinitions.apiextensions.k8s.io":
                    self._validate_crd(new)
                    new["status"] = old.get("status", {})
                elif rt.key == "namespaces":
                    new.setdefault("status", old.get("status"))
                new_meta["generation"] = old_meta.get("generation", 1) + (
                    1 if _strip_meta_status(new) != _strip_meta_status(old) else 0
                )
            new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
            if _same(new, old):
                return self._versioned(old, rt)
            if dry_run:
                return self._versioned(new, rt)
            if (
                new["metadata"].get("deletionTimestamp")
                and not new["metadata"].get("finalizers")
                and (rt.key != "pods" or not self._pod_is_terminating_gracefully(new))
            ):
                self._commit(rt, "DELETED", new, old)
                return self._versioned(new, rt)
            self._commit(rt, "MODIFIED", new, old)
            if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
                self._register_crd(new)
            return self._versioned(new, rt)

    def _pod_is_terminating_gracefully(self, pod: Obj) -> bool:
        return bool(pod["metadata"].get("deletionGracePeriodSeconds"))

    def _check_pod_update(self, old: Obj, new: Obj) -> None:
        def frozen(spec: Any) -> Any:
            spec = clone(spec) if isinstance(spec, dict) else {}
            for group in ("containers", "initContainers"):
                for c in spec.get(group) or []:
                    if isinstance(c, dict):
                        c.pop("image", None)
            for k in (
                "activeDeadlineSeconds",
                "tolerations",
                "schedulingGates",
                "terminationGracePeriodSeconds",
            ):
                spec.pop(k, None)
            return spec

        if frozen(old.get("spec")) != frozen(new.get("spec")):
            name = old["metadata"]["name"]
            raise invalid("Pod", name, [("spec", f"Forbidden: {POD_MUTABLE_HINT}")], "pods")

    # ------------------------------------------------------------------------------------------ patch

    def patch_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: bytes | Any,
        content_type: str,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """PATCH in any of the four flavours; returns (object, created) — apply can create."""
        del force  # apply conflicts between field managers are not modelled
        ctype = content_type.split(";")[0].strip().lower()
        ctype = _PATCH_ALIASES.get(ctype, ctype)
        if ctype not in PATCH_TYPES:
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(PATCH_TYPES)}",
            )
        if ctype == PATCH_STRATEGIC and rt.custom:
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                f"include: {PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}",
            )
        try:
            if isinstance(body, (bytes, str)):
                doc = yaml.safe_load(body) if ctype == PATCH_APPLY else json.loads(body or b"null")
            else:
                doc = body
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"error decoding patch: {exc}") from None
        with self.lock:
            old = self._find(rt, namespace, name)
            if ctype == PATCH_APPLY:
                return self._apply(rt, namespace, name, doc, old, subresource, field_manager, dry_run)
            if old is None:
                raise not_found(self._qualified(rt), name)
            current = self._versioned(old, rt)
            if ctype == PATCH_JSON:
                patched = patches.json_patch(current, doc)
            elif ctype == PATCH_STRATEGIC:
                if not isinstance(doc, dict):
                    raise bad_request("strategic merge patch must be a JSON object")
                patched = patches.strategic_merge_patch(current, doc)
            else:
                if not isinstance(doc, dict):
                    raise bad_request("merge patch must be a JSON object")
                patched = patches.merge_patch(current, doc)
            if not isinstance(patched, dict):
                raise ApiError(422, "the patched object is not a JSON object")
            return self.update_object(
                rt, namespace, name, patched, subresource=subresource, dry_run=dry_run, require_rv=False
            ), False

    def _apply(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        doc: Any,
        old: Obj | None,
        subresource: str | None,
        field_manager: str | None,
        dry_run: bool,
    ) -> tuple[Obj, bool]:
        if not field_manager:
            raise bad_request("PATCH request for server-side apply requires a fieldManager")
        if not isinstance(doc, dict):
            raise bad_request("apply patch must be an object")
        doc_meta = doc.get("metadata") or {}
        if doc_meta.get("name") and doc_meta["name"] != name:
            raise bad_request(
                f"the name of the object ({doc_meta['name']}) does not match the name on the URL ({name})"
            )
        if doc.get("kind") and doc["kind"] != rt.kind:
            raise bad_request(f"the kind of the applied object ({doc['kind']}) does not match {rt.kind}")
        key = (rt.key, namespace or "" if rt.namespaced else "", name, f"{field_manager}/{subresource or ''}")
        if old is None:
            if subresource:
                raise not_found(self._qualified(rt), name)
            body = clone(doc)
            _meta(body)["name"] = name
            created = self.create_object(rt, body, namespace, dry_run=dry_run)
            if not dry_run:
                self._applied[key] = clone(doc)
            return created, True
        current = self._versioned(old, rt)
        if subresource == "status":
            doc = {"status": doc.get("status") or {}}
        merged = patches.server_side_apply(current, doc, self._applied.get(key))
        if doc_meta.get("resourceVersion") is None:
            _meta(merged)["resourceVersion"] = old["metadata"]["resourceVersion"]
        result = self.update_object(
            rt, namespace, name, merged, subresource=subresource, dry_run=dry_run, require_rv=False
        )
        if not dry_run:
            self._applied[key] = clone(doc)
        return result, False

    # ----------------------------------------------------------------------------------------- delete

    def delete_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
    ) -> Obj:
        """DELETE: preconditions, finalizers, graceful pod termination (if enabled), namespace and CRD
        cascades. Returns the deleted (or now terminating) object."""
        options = options or {}
        with self.lock:
            old = self._require(rt, namespace, name)
            meta = old["metadata"]
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != meta.get("uid"):
                raise conflict(
                    self._qualified(rt),
                    name,
                    f"Precondition failed: UID in precondition: "
                    f"{pre['uid']}, UID in object meta: {meta.get('uid')}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
                raise conflict(
                    self._qualified(rt),
                    name,
                    f"Precondition failed: ResourceVersion in "
                    f"precondition: {pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{meta.get('resourceVersion')}",
                )
            if dry_run:
                return self._versioned(old, rt)
            grace = self._grace_period(rt, old, options)
            if meta.get("deletionTimestamp"):
                if meta.get("finalizers") or grace > 0:
                    return self._versioned(old, rt)
            elif meta.get("finalizers") or grace > 0:
                new = clone(old)
                new["metadata"]["deletionTimestamp"] = format_time(self.clock() + grace)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                self._commit(rt, "MODIFIED", new, old)
                return self._versioned(new, rt)
            if rt.key == "namespaces":
                if name in ("default", "kube-system", "kube-public"):
                    raise ApiError(
                        403,
                        f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                        reason="Forbidden",
                        details={"name": name, "kind": "namespaces"},
                    )
                self._delete_namespace_contents(name)
            elif rt.key == "customresourcedefinitions.apiextensions.k8s.io":
                self._delete_crd_objects(old)
            final = clone(self._require(rt, namespace, name))
            self._commit(rt, "DELETED", final, self._find(rt, namespace, name))
            return self._versioned(final, rt)

    def _grace_period(self, rt: ResourceType, pod: Obj, options: Obj) -> int:
        if rt.key != "pods" or not self.graceful_pod_deletion:
            return 0
        spec = pod.get("spec") or {}
        if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        value = options.get("gracePeriodSeconds")
        if value is None:
            value = spec.get("terminationGracePeriodSeconds", 30)
        return max(0, int(value))

    def _delete_namespace_contents(self, namespace: str) -> None:
        for rt in self.registry:
            if not rt.namespaced:
                continue
            for ident in [i for i in self._objects.get(rt.key, {}) if i[0] == namespace]:
                obj = self._objects[rt.key][ident]
                self._commit(rt, "DELETED", clone(obj), obj)

    def _delete_crd_objects(self, crd: Obj) -> None:
        spec = crd["spec"]
        for rt in [
            t for t in self.registry if t.custom and t.key == f"{spec['names']['plural']}.{spec['group']}"
        ]:
            for ident in list(self._objects.get(rt.key, {})):
                obj = self._objects[rt.key][ident]
                self._commit(rt, "DELETED", clone(obj), obj)
            break
        key = f"{spec['names']['plural']}.{spec['group']}"
        for w in [w for w in self._watchers if w.rt.key == key]:
            w.close()  # the resource is gone: its watches end
        self.registry.remove_crd_types(str(spec["group"]), str(spec["names"]["plural"]))

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        options: Obj | None = None,
        dry_run: bool = False,
    ) -> list[Obj]:
        with self.lock:
            items, _, _, _ = self.list_objects(
                rt, namespace, label_selector=label_selector, field_selector=field_selector
            )
            out = []
            for item in items:
                meta = item["metadata"]
                out.append(
                    self.delete_object(rt, meta.get("namespace"), meta["name"], options, dry_run=dry_run)
                )
            return out

    def complete_pod_deletions(self, namespace: str | None = None, name: str | None = None) -> int:
        """What a kubelet does after a graceful delete: remove terminating pods. Returns how many."""
        rt = self.registry.resolve("pods")
        done = 0
        with self.lock:
            for ident, pod in list(self._objects.get("pods", {}).items()):
                if namespace is not None and ident[0] != namespace:
                    continue
                if name is not None and ident[1] != name:
                    continue
                if not pod["metadata"].get("deletionTimestamp"):
                    continue
                if pod["metadata"].get("finalizers"):
                    if pod["metadata"].get("deletionGracePeriodSeconds"):
                        new = clone(pod)
                        new["metadata"]["deletionGracePeriodSeconds"] = 0
                        self._commit(rt, "MODIFIED", new, pod)
                    continue
                self._commit(rt, "DELETED", clone(pod), pod)
                done += 1
        return done

    # ------------------------------------------------------------------------------------ subresources

    def bind_pod(self, namespace: str, name: str, binding: Obj, *, dry_run: bool = False) -> Obj:
        """POST pods/binding: sets spec.nodeName once; a second bind is 409. Answers a `Status`."""
        rt = self.registry.resolve("pods")
        if not isinstance(binding, dict):
            raise bad_request("the body of the request must be a JSON object")
        meta = binding.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise bad_request("name in URL does not match name in Binding object")
        target = binding.get("target") or {}
        node = target.get("name")
        if not node:
            raise invalid("Binding", name, [("target.name", "Required value")], "pods")
        if target.get("kind") not in (None, "", "Node"):
            raise invalid("Binding", name, [("to.kind", 'Invalid value: must be empty or "Node"')], "pods")
        with self.lock:
            pod = self._require(rt, namespace, name)
            pod_meta = pod["metadata"]
            qualified = "pods/binding"
            if meta.get("uid") and meta["uid"] != pod_meta.get("uid"):
                raise conflict(
                    qualified,
                    name,
                    f"Precondition failed: UID in precondition: {meta['uid']}, UID "
                    f"in object meta: {pod_meta.get('uid')}",
                )
            if meta.get("resourceVersion") and meta["resourceVersion"] != pod_meta.get("resourceVersion"):
                raise conflict(qualified, name, STALE)
            if pod_meta.get("deletionTimestamp"):
                raise conflict(qualified, name, f"pod {name} is being deleted, cannot be assigned to a host")
            current = (pod.get("spec") or {}).get("nodeName")
            if current:
                raise conflict(qualified, name, f'pod {name} is already assigned to node "{current}"')
            if dry_run:
                return success_status(201)
            new = clone(pod)
            new["spec"]["nodeName"] = node
            if meta.get("annotations"):
                _meta(new).setdefault("annotations", {}).update(meta["annotations"])
            status = new.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": self._now(),
                }
            )
            status["conditions"] = conditions
            self._commit(rt, "MODIFIED", new, pod)
            self.binds.append(BindRecord(namespace, name, str(node), self._rv))
            if self.kubelet:
                self._kubelet_start(rt, new)
            return success_status(201)

    def _kubelet_start(self, rt: ResourceType, pod: Obj) -> None:
        new = clone(pod)
        status = new.setdefault("status", {})
        if status.get("phase") not in (None, "Pending"):
            return
        now = self._now()
        status["phase"] = "Running"
        status.setdefault("startTime", now)
        status["hostIP"] = status.get("hostIP", "10.0.0.1")
        conds = [
            c
            for c in status.get("conditions") or []
            if c.get("type") not in ("Ready", "ContainersReady", "Initialized")
        ]
        for t in ("Initialized", "Ready", "ContainersReady"):
            conds.append({"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
        status["conditions"] = conds
        status["containerStatuses"] = [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": now}},
            }
            for c in (new.get("spec") or {}).get("containers") or []
        ]
        self._commit(rt, "MODIFIED", new, pod)

    def evict_pod(self, namespace: str, name: str, eviction: Obj) -> Obj:
        """POST pods/eviction (policy/v1 Eviction): deletes the pod (PodDisruptionBudgets are not
        evaluated). Answers a `Status`."""
        if not isinstance(eviction, dict):
            raise bad_request("the body of the request must be a JSON object")
        meta = eviction.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise bad_request("name in URL does not match name in Eviction object")
        if eviction.get("kind") not in (None, "Eviction"):
            raise bad_request(
                f"the object provided is unrecognized (must be of type Eviction): {eviction.get('kind')}"
            )
        rt = self.registry.resolve("pods")
        options = dict(eviction.get("deleteOptions") or {})
        dry = bool(options.get("dryRun"))
        with self.lock:
            pod = self._require(rt, namespace, name)
            if pod["metadata"].get("deletionTimestamp"):
                return success_status(201)
            self.delete_object(rt, namespace, name, options, dry_run=dry)
            if not dry:
                self.evictions.append(EvictionRecord(namespace, name, self._rv))
            return success_status(201)

    # ---------------------------------------------------------------------------- Python API for tests

    def create(self, obj: Obj, *, namespace: str | None = None, keep_status: bool = True) -> Obj:
        """Create from a manifest (type from apiVersion/kind). Unlike POST, the status is kept as given
        (`keep_status`), so tests can seed running pods and ready nodes directly."""
        rt = self.type_of(obj)
        return self.create_object(rt, obj, namespace, keep_status=keep_status)

    def get(self, resource: str | ResourceType, name: str, namespace: str | None = None) -> Obj:
        rt = self.resource(resource)
        return self.get_object(rt, (namespace or "default") if rt.namespaced else None, name)

    def try_get(self, resource: str | ResourceType, name: str, namespace: str | None = None) -> Obj | None:
        try:
            return self.get(resource, name, namespace)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def update(self, obj: Obj, *, subresource: str | None = None) -> Obj:
        """PUT semantics; a `metadata.resourceVersion` in `obj` is checked (409 when stale)."""
        rt = self.type_of(obj)
        meta = obj.get("metadata") or {}
        ns = (meta.get("namespace") or "default") if rt.namespaced else None
        return self.update_object(
            rt, ns, str(meta.get("name", "")), obj, subresource=subresource, require_rv=False
        )

    def patch(
        self,
        resource: str | ResourceType,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
        field_manager: str | None = "test",
    ) -> Obj:
        """Patch with `patch_type` `merge` | `strategic` | `json` | `apply` (or a media type)."""
        rt = self.resource(resource)
        ns = (namespace or "default") if rt.namespaced else None
        obj, _ = self.patch_object(
            rt, ns, name, body, patch_type, subresource=subresource, field_manager=field_manager
        )
        return obj

    def set_status(
        self, resource: str | ResourceType, name: str, status: Obj, namespace: str | None = None
    ) -> Obj:
        """Merge `status` into the object's status (through the status subresource when there is one)."""
        rt = self.resource(resource)
        return self.patch(
            rt, name, {"status": status}, namespace=namespace, subresource="status" if rt.has_status else None
        )

    def delete(
        self,
        resource: str | ResourceType,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        rt = self.resource(resource)
        options: Obj = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        return self.delete_object(rt, (namespace or "default") if rt.namespaced else None, name, options)

    def apply(self, obj: Obj, *, keep_status: bool = True) -> Obj:
        """Create, or replace the existing object (no resourceVersion check); status kept as given."""
        rt = self.type_of(obj)
        meta = obj.get("metadata") or {}
        ns = (meta.get("namespace") or "default") if rt.namespaced else None
        with self.lock:
            existing = self._find(rt, ns, str(meta.get("name", "")))
            if existing is None:
                return self.create_object(rt, obj, ns, keep_status=keep_status)
            body = clone(obj)
            _meta(body).pop("resourceVersion", None)
            return self.update_object(
                rt, ns, str(meta["name"]), body, require_rv=False, keep_status=keep_status
            )

    def load(self, manifests: str | Iterable[Obj]) -> list[Obj]:
        """Apply every document of a YAML text (or every dict), `kind: List` included."""
        docs: Iterable[Any] = yaml.safe_load_all(manifests) if isinstance(manifests, str) else manifests
        out: list[Obj] = []
        for doc in docs:
            if not doc:
                continue
            if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
                out.extend(self.load(doc.get("items") or []))
            else:
                out.append(self.apply(doc))
        return out

    def bind(self, namespace: str, name: str, node: str) -> Obj:
        return self.bind_pod(
            namespace, name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
        )

    def evict(self, namespace: str, name: str) -> Obj:
        return self.evict_pod(
            namespace,
            name,
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            },
        )

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
        """Re-check `predicate` after every write until it holds (True) or `timeout` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if predicate():
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))

    def list(
        self,
        resource: str | ResourceType,
        namespace: str | None = None,
        *,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[Obj]:
        """All objects of a type (in `namespace`, or in all namespaces when None)."""
        items, _, _, _ = self.list_objects(
            self.resource(resource), namespace, label_selector=labels, field_selector=fields
        )
        return items


def _same(a: Obj, b: Obj) -> bool:
    return a == b


def _valid_qualified_key(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


def _parse_rv(value: str | None) -> int:
    try:
        rv = int(str(value))
    except ValueError:
        raise bad_request(f"invalid resource version: {value!r}") from None
    if rv < 0:
        raise bad_request(f"invalid resource version: {value!r}")
    return rv


def _too_large(wanted: int, current: int) -> ApiError:
    return ApiError(
        504,
        f"Too large resource version: {wanted}, current: {current}",
        reason="Timeout",
        details={
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )


def _qos_class(spec: dict[str, Any]) -> str:
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
