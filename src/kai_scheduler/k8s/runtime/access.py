"""What a component may ask of the API server, declared next to the calls that need it.

Each module that calls the API declares those calls as `Access` records (a kind, maybe a subresource, the
verbs, and where: every namespace, or one namespace, maybe only some objects by name). `k8s/needs.py`
composes them per component; the chart grants exactly that (tests/unit/k8s/test_chart.py compares its RBAC
with it), and `AccessGuard` holds the running component to it: a call that no declaration covers is refused
before it leaves the process, so a new call without its declaration fails the first test that makes it
instead of meeting a 403 in a cluster.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kai_scheduler.k8s.runtime.client import (
    PODS,
    JsonObject,
    KubeClient,
    PatchType,
    ResourceKind,
    WatchEvent,
)
from kai_scheduler.k8s.runtime.objects import metadata_of

log = logging.getLogger(__name__)

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
# An RBAC rule's resourceNames cannot limit these: a create, list or watch request names no object.
_UNNAMED_VERBS = frozenset({"create", "list", "watch"})


class Permission(NamedTuple):
    """One verb on one resource (`pods`, `pods/status`) of an API group, in a namespace (None: every
    namespace, or a cluster-scoped resource), on one object (None: every object)."""

    group: str
    resource: str
    verb: str
    namespace: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Access:
    """Verbs on a kind (or its `subresource`), in `namespace` (None: every namespace), on the objects
    `names` (None: every object)."""

    kind: ResourceKind
    verbs: frozenset[str]
    subresource: str | None = None
    namespace: str | None = None
    names: frozenset[str] | None = None

    def __post_init__(self) -> None:
        unknown = self.verbs - VERBS
        if not self.verbs or unknown:
            raise ValueError(f"{self.resource}: unknown verbs {sorted(unknown)}")
        if self.names is not None and self.verbs & _UNNAMED_VERBS:
            raise ValueError(
                f"{self.resource}: {sorted(self.verbs & _UNNAMED_VERBS)} cannot be limited by name"
            )
        if self.namespace is not None and not self.kind.namespaced:
            raise ValueError(f"{self.resource} is cluster-scoped: it has no namespace")

    @property
    def resource(self) -> str:
        return f"{self.kind.plural}/{self.subresource}" if self.subresource else self.kind.plural

    def permissions(self) -> Iterable[Permission]:
        for verb in sorted(self.verbs):
            for name in sorted(self.names) if self.names is not None else (None,):
                yield Permission(self.kind.group, self.resource, verb, self.namespace, name)


def access(
    kind: ResourceKind,
    *verbs: str,
    subresource: str | None = None,
    namespace: str | None = None,
    names: Iterable[str] | None = None,
) -> Access:
    return Access(kind, frozenset(verbs), subresource, namespace, None if names is None else frozenset(names))


def watching(kinds: Iterable[ResourceKind]) -> tuple[Access, ...]:
    """What informers of these kinds do: list, then watch, in every namespace."""
    return tuple(access(kind, "list", "watch") for kind in kinds)


def _broader(permission: Permission) -> Iterable[Permission]:
    """The permissions that imply this one (itself included): every namespace, every object."""
    group, resource, verb, namespace, name = permission
    for where in dict.fromkeys((namespace, None)):
        for which in dict.fromkeys((name, None)):
            yield Permission(group, resource, verb, where, which)


def minimal(permissions: Iterable[Permission]) -> frozenset[Permission]:
    """The permissions without those another one implies (a namespace's when every namespace is allowed,
    an object's when every object is): two sets that allow the same calls compare equal this way."""
    given = frozenset(permissions)
    return frozenset(p for p in given if not any(b in given for b in _broader(p) if b != p))


def permissions(accesses: Iterable[Access]) -> frozenset[Permission]:
    """What the accesses allow, in the `minimal` form."""
    return minimal(p for one in accesses for p in one.permissions())


class UndeclaredAccess(Exception):
    """A call that the component's declarations do not cover: a bug to fix in the code (declare it, and
    grant it in the chart), not an API error to handle, hence no `ApiStatusError`."""


class AccessGuard:
    """A `KubeClient` that passes on to `client` only the calls `accesses` cover; any other raises
    `UndeclaredAccess` (and logs it: some loops log and retry what fails). `who` names the component."""

    def __init__(self, client: KubeClient, accesses: Iterable[Access], who: str) -> None:
        self.client = client
        self.who = who
        self.allowed = permissions(accesses)

    def allows(self, permission: Permission) -> bool:
        return any(broader in self.allowed for broader in _broader(permission))

    def _check(
        self,
        verb: str,
        kind: ResourceKind,
        namespace: str | None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> None:
        resource = f"{kind.plural}/{subresource}" if subresource else kind.plural
        wanted = Permission(kind.group, resource, verb, namespace if kind.namespaced else None, name)
        if self.allows(wanted):
            return
        where = f" in namespace {namespace}" if wanted.namespace else ""
        what = f" {name}" if name else ""
        group = f".{kind.group}" if kind.group else ""
        message = (
            f"{self.who}: {verb} {resource}{group}{what}{where} is not among its declared accesses "
            "(declare it next to the call, see runtime/access.py, and grant it in the chart)"
        )
        log.error("%s", message)
        raise UndeclaredAccess(message)

    async def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> JsonObject:
        self._check("get", kind, namespace, name)
        return await self.client.get(kind, name, namespace)

    async def list_objects(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[JsonObject], str]:
        self._check("list", kind, namespace)
        return await self.client.list_objects(
            kind, namespace, label_selector=label_selector, field_selector=field_selector
        )

    def watch(
        self,
        kind: ResourceKind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        self._check("watch", kind, namespace)
        return self.client.watch(
            kind,
            resource_version,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            bookmarks=bookmarks,
        )

    async def create(self, kind: ResourceKind, obj: JsonObject) -> JsonObject:
        self._check("create", kind, _namespace_of(obj))
        return await self.client.create(kind, obj)

    async def replace(
        self, kind: ResourceKind, obj: JsonObject, *, subresource: str | None = None
    ) -> JsonObject:
        name = str(metadata_of(obj).get("name") or "")
        self._check("update", kind, _namespace_of(obj), name, subresource)
        return await self.client.replace(kind, obj, subresource=subresource)

    async def patch(
        self,
        kind: ResourceKind,
        name: str,
        patch: Mapping[str, Any] | list[Any],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> JsonObject:
        self._check("patch", kind, namespace, name, subresource)
        return await self.client.patch(
            kind, name, patch, namespace, patch_type=patch_type, subresource=subresource
        )

    async def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        self._check("delete", kind, namespace, name)
        await self.client.delete(kind, name, namespace)

    async def bind(
        self, namespace: str, pod: str, node: str, *, annotations: Mapping[str, str] | None = None
    ) -> None:
        self._check("create", PODS, namespace, subresource="binding")
        await self.client.bind(namespace, pod, node, annotations=annotations)

    async def evict(self, namespace: str, pod: str) -> None:
        self._check("create", PODS, namespace, subresource="eviction")
        await self.client.evict(namespace, pod)


def _namespace_of(obj: JsonObject) -> str | None:
    namespace = metadata_of(obj).get("namespace")
    return str(namespace) if namespace else None


__all__ = [
    "Access",
    "AccessGuard",
    "Permission",
    "UndeclaredAccess",
    "access",
    "minimal",
    "permissions",
    "watching",
]
