"""The resource types the fake API server serves: built-in ones and those registered through CRDs."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
STATUS_VERBS: tuple[str, ...] = ("get", "patch", "update")
CREATE: tuple[str, ...] = ("create",)

POD_FIELDS: tuple[str, ...] = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
EVENT_FIELDS: tuple[str, ...] = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)


@dataclass(frozen=True)
class PrinterColumn:
    """A column of `kubectl get` output (a CRD's `additionalPrinterColumns` entry)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    """One served resource: `plural` in `group/version`, with its kind, scope and subresources.

    `custom` marks resources served from a CustomResourceDefinition: like the real server, they accept no
    strategic merge patch and need `metadata.resourceVersion` on update.
    """

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    field_selectors: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def key(self) -> str:
        """Storage key, shared by all versions of a resource: `pods`, `podgroups.scheduling.run.ai`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def selectable_fields(self) -> tuple[str, ...]:
        return ("metadata.name", "metadata.namespace", *self.field_selectors)

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The URL path of the collection (or of one object when `name` is given)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


def _rt(
    group: str,
    version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    **kw: Any,
) -> ResourceType:
    return ResourceType(group, version, kind, plural, kind.lower(), namespaced, short, subresources=sub, **kw)


ALL = ("all",)
BUILTIN: tuple[ResourceType, ...] = (
    _rt(
        "",
        "v1",
        "Pod",
        "pods",
        True,
        ("po",),
        ("status", "binding", "eviction"),
        categories=ALL,
        field_selectors=POD_FIELDS,
    ),
    _rt("", "v1", "Binding", "bindings", True, verbs=("create",)),
    _rt("", "v1", "Node", "nodes", False, ("no",), ("status",), field_selectors=("spec.unschedulable",)),
    _rt("", "v1", "Namespace", "namespaces", False, ("ns",), ("status",), field_selectors=("status.phase",)),
    _rt("", "v1", "ConfigMap", "configmaps", True, ("cm",)),
    _rt("", "v1", "Secret", "secrets", True, field_selectors=("type",)),
    _rt("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",), ("token",)),
    _rt("", "v1", "Service", "services", True, ("svc",), ("status",), categories=ALL),
    _rt("", "v1", "Endpoints", "endpoints", True, ("ep",)),
    _rt("", "v1", "Event", "events", True, ("ev",), field_selectors=EVENT_FIELDS),
    _rt("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",), ("status",)),
    _rt("", "v1", "PersistentVolume", "persistentvolumes", False, ("pv",), ("status",)),
    _rt("", "v1", "ResourceQuota", "resourcequotas", True, ("quota",), ("status",)),
    _rt("", "v1", "LimitRange", "limitranges", True, ("limits",)),
    _rt("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, ("pc",)),
    _rt("coordination.k8s.io", "v1", "Lease", "leases", True),
    _rt("events.k8s.io", "v1", "Event", "events", True, ("ev",), field_selectors=EVENT_FIELDS),
    _rt("batch", "v1", "Job", "jobs", True, (), ("status",), categories=ALL),
    _rt("batch", "v1", "CronJob", "cronjobs", True, ("cj",), ("status",), categories=ALL),
    _rt("apps", "v1", "Deployment", "deployments", True, ("deploy",), ("status",), categories=ALL),
    _rt("apps", "v1", "ReplicaSet", "replicasets", True, ("rs",), ("status",), categories=ALL),
    _rt("apps", "v1", "StatefulSet", "statefulsets", True, ("sts",), ("status",), categories=ALL),
    _rt("apps", "v1", "DaemonSet", "daemonsets", True, ("ds",), ("status",), categories=ALL),
    _rt("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), ("status",)),
    _rt("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    _rt("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _rt("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    # Answered, not stored (reviews.py).
    _rt(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        verbs=CREATE,
    ),
    _rt("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False, verbs=CREATE),
    _rt("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False, verbs=CREATE),
    _rt(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    _rt(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        ("crd", "crds"),
        ("status",),
    ),
    _rt("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False),
    # Dynamic Resource Allocation (GA in Kubernetes 1.34).
    _rt("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, (), ("status",)),
    _rt("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    _rt(
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        False,
        field_selectors=("spec.nodeName", "spec.driver"),
    ),
    _rt("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    _rt("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, ("sc",)),
)

# Preferred group order in discovery (kubectl resolves ambiguous names by it): core and built-ins first.
BUILTIN_GROUPS: tuple[str, ...] = tuple(dict.fromkeys(rt.group for rt in BUILTIN))


@dataclass
class Registry:
    """Thread-safe index of served resource types; CRDs add and remove entries at run time."""

    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    generation: int = 0
    # `resolve`'s answers, forgotten whenever the types change: the store resolves a name on every
    # create (issue #23: a scan of every type was a fifteenth of the fake server's CPU).
    _resolved: dict[str, ResourceType] = field(default_factory=dict)

    @classmethod
    def with_builtins(cls) -> Registry:
        reg = cls()
        for rt in BUILTIN:
            reg.add(rt)
        return reg

    def add(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[(rt.group, rt.version, rt.plural)] = rt
            self.generation += 1
            self._resolved.clear()

    def remove_crd_types(self, group: str, plural: str) -> None:
        with self._lock:
            for k in [k for k, rt in self._types.items() if rt.custom and k[0] == group and k[2] == plural]:
                del self._types[k]
            self.generation += 1
            self._resolved.clear()

    def replace_crd_types(self, group: str, plural: str, types: Iterable[ResourceType]) -> None:
        with self._lock:
            self.remove_crd_types(group, plural)
            for rt in types:
                self.add(rt)

    def __iter__(self) -> Iterator[ResourceType]:
        with self._lock:
            return iter(list(self._types.values()))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        with self._lock:
            for rt in self._types.values():
                if (
                    rt.group == group
                    and rt.version == version
                    and rt.kind == kind
                    and rt.plural != "bindings"
                ):
                    return rt
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """group → served versions, groups in discovery order (built-in groups first)."""
        with self._lock:
            out: dict[str, list[str]] = {}
            order = {g: i for i, g in enumerate(BUILTIN_GROUPS)}
            for rt in sorted(self._types.values(), key=lambda r: (order.get(r.group, len(order)), r.group)):
                versions = out.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
            for versions in out.values():
                versions.sort(key=_version_priority)
            return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        with self._lock:
            return sorted(
                (rt for rt in self._types.values() if rt.group == group and rt.version == version),
                key=lambda r: r.plural,
            )

    def resolve(self, name: str) -> ResourceType:
        """Find a type by plural, singular, short name, kind or `plural.group` (case-insensitive for kinds).

        Among several matches the preferred one wins: a built-in group before a custom one, then the
        preferred version.
        """
        with self._lock:
            known = self._resolved.get(name)
            if known is None:
                known = self._resolved[name] = self._resolve(name)
            return known

    def _resolve(self, name: str) -> ResourceType:
        """`resolve` without its memory (lock held)."""
        plural, _, group = name.partition(".")
        lowered = name.lower()
        candidates = [
            rt
            for rt in self._types.values()
            if rt.plural != "bindings"
            and (
                (group and rt.plural == plural and rt.group == group)
                or lowered in (rt.plural, rt.singular, rt.kind.lower())
                or lowered in rt.short_names
            )
        ]
        if not candidates:
            raise KeyError(f"unknown resource type {name!r}")
        order = {g: i for i, g in enumerate(BUILTIN_GROUPS)}
        candidates.sort(key=lambda r: (order.get(r.group, len(order)), r.group, _version_priority(r.version)))
        return candidates[0]


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version order: GA before beta before alpha, higher numbers first."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {"alpha": 2, "beta": 1, None: 0}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)
