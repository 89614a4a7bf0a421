"""The API server's verbs on the versioned store, with the real server's semantics: create (generated
names, defaulting, admission), update (optimistic concurrency, status subresource, generation), patch
(merge, strategic merge, JSON patch, server-side apply), delete (preconditions, finalizers, graceful pod
termination, namespace and CRD cascades). `FakeApiServer` translates requests into these calls."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from . import admitted, cr_schema, patching
from .admission import check_pod_update, default_on_create
from .admission_request import WriteRequest
from .crd_registry import CRD_KEY, CrdRegistry
from .disruption import PDB_KEY, DisruptionBudgets, EvictionRefusal
from .errors import STALE, ApiError, already_exists, bad_request, conflict, invalid, not_found
from .jsoncopy import clone
from .kubelet import Kubelet
from .meta import Obj, as_served, format_time, meta
from .resources import Registry, ResourceType
from .subresources import BindRecord, EvictionRecord, PodSubresources
from .validation import check_kind, validate_meta, validate_name
from .versioned import Event, VersionedStore

INITIAL_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


class ObjectApi:
    """The store as the API server's verbs (see `Store` for the options)."""

    def __init__(
        self,
        *,
        history_limit: int,
        graceful_pod_deletion: bool,
        kubelet: bool,
        auto_create_namespaces: bool,
        crds: Iterable[Obj],
        clock: Callable[[], float],
    ) -> None:
        self.registry = Registry.with_builtins()
        self.objects = VersionedStore(history_limit)
        self.auto_create_namespaces = auto_create_namespaces
        self.clock = clock
        self.crds = CrdRegistry(self.registry, self.objects)
        pods = self.registry.resolve("pods")
        self._kubelet = Kubelet(
            self.objects, pods, clock, enabled=kubelet, graceful_deletion=graceful_pod_deletion
        )
        self.disruption = DisruptionBudgets(self.objects, self.registry.resolve(PDB_KEY), clock)
        self.objects.add_observer(self.disruption.observe)
        self.pod_subresources = PodSubresources(
            self.objects,
            pods,
            self._kubelet,
            lambda ns, name, options, dry: self.delete_object(pods, ns, name, options, dry_run=dry),
            self.disruption,
            clock,
        )
        ns_type = self.registry.resolve("namespaces")
        for ns in INITIAL_NAMESPACES:
            self.create_object(ns_type, {"metadata": {"name": ns}}, None)
        crd_type = self.registry.resolve(CRD_KEY)
        for crd in crds:
            self.create_object(crd_type, clone(crd), None)

    # ------------------------------------------------------------------------------------------- basics

    @property
    def kubelet(self) -> bool:
        """Whether a bound pod starts running at once (settable)."""
        return self._kubelet.enabled

    @kubelet.setter
    def kubelet(self, enabled: bool) -> None:
        self._kubelet.enabled = enabled

    @property
    def disruption_controller(self) -> bool:
        """Whether PodDisruptionBudgets' status is kept current, as by kube-controller-manager (settable;
        off, a budget keeps the status it has, and one never processed refuses evictions)."""
        return self.disruption.enabled

    @disruption_controller.setter
    def disruption_controller(self, enabled: bool) -> None:
        self.disruption.enabled = enabled

    @property
    def refused_evictions(self) -> list[EvictionRefusal]:
        """Evictions a PodDisruptionBudget refused, oldest first."""
        return self.disruption.refused

    @property
    def binds(self) -> list[BindRecord]:
        return self.pod_subresources.binds

    @property
    def evictions(self) -> list[EvictionRecord]:
        return self.pod_subresources.evictions

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion (as an int; the API shows it as a string)."""
        return self.objects.resource_version

    @property
    def compacted_resource_version(self) -> int:
        """Watches and list continuations from a resourceVersion below this get 410 Gone."""
        return self.objects.compacted_resource_version

    def compact(self) -> int:
        """Forget the event history: watches (and list continuations) from any earlier resourceVersion now
        get 410 Gone. Returns the new compaction point."""
        return self.objects.compact()

    def history(self) -> list[Event]:
        return self.objects.history()

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

    def _now(self) -> str:
        return format_time(self.clock())

    # ------------------------------------------------------------------------------------------- read
    # (lists and watches: `objects`, the versioned store)

    def get_object(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        with self.objects.lock:
            return as_served(self.objects.require(rt, namespace, name), rt)

    # ------------------------------------------------------------------------------------------ create

    def create_object(
        self,
        rt: ResourceType,
        body: Obj,
        namespace: str | None,
        *,
        dry_run: bool = False,
        keep_status: bool = False,
        keep_uid: bool = False,
        request: WriteRequest | None = None,
    ) -> Obj:
        """POST: the real server's create, including defaulting and admission the scheduler relies on.
        `keep_uid`: the object's own uid stays (the in-process controllers make objects whose owner
        references were written before the server saw them). `request`: an HTTP request the admission
        webhooks see."""
        if request is not None:
            return admitted.create(self, rt, body, namespace, request, dry_run=dry_run)
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = clone(body)
        check_kind(rt, obj)
        metadata = meta(obj)
        body_ns = metadata.get("namespace")
        if rt.namespaced:
            if namespace and body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns or "default"
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
            namespace = None
        with self.objects.lock:
            if not metadata.get("name"):
                metadata["name"] = self._generate_name(rt, namespace, metadata.get("generateName"))
            name = str(metadata["name"])
            validate_name(rt, name)
            validate_meta(rt, obj)
            if rt.namespaced:
                self._ensure_namespace(str(namespace), dry_run=dry_run)
            if self.objects.find(rt, namespace, name) is not None:
                raise already_exists(rt.key, name)
            for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                metadata.pop(k, None)
            if not (keep_uid and metadata.get("uid")):
                metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = self._now()
            metadata["generation"] = 1
            if rt.has_status and not keep_status and rt.plural not in ("nodes",):
                obj.pop("status", None)
            default_on_create(
                rt,
                obj,
                keep_status=keep_status,
                priority_classes=self.objects.of_type("priorityclasses.scheduling.k8s.io"),
            )
            if rt.key == CRD_KEY:
                self.crds.prepare_create(obj, self._now())
            if rt.custom:
                cr_schema.admit(self.objects, rt, obj)
            if dry_run:
                return as_served(obj, rt)
            self.objects.commit(rt, "ADDED", obj, None)
            if rt.key == CRD_KEY:
                self.crds.serve(obj)
            if rt.key == "pods" and (obj.get("spec") or {}).get("nodeName"):
                self._kubelet.pod_bound(obj)
            return as_served(self.objects.require(rt, namespace, name), rt)

    def _generate_name(self, rt: ResourceType, namespace: str | None, prefix: object) -> str:
        if not prefix:
            raise invalid(
                rt.kind, "", [("metadata.name", "Required value: name or generateName is required")], rt.key
            )
        for _ in range(100):
            candidate = str(prefix) + "".join(random.choice(_GENERATE_CHARS) for _ in range(5))
            if self.objects.find(rt, namespace, candidate) is None:
                break
        return candidate

    def _ensure_namespace(self, namespace: str, *, dry_run: bool) -> None:
        ns_type = self.registry.resolve("namespaces")
        ns = self.objects.find(ns_type, None, namespace)
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

    # ------------------------------------------------------------------------------------------ update

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
        request: WriteRequest | None = None,
    ) -> Obj:
        """PUT (also the last step of every patch): optimistic concurrency on metadata.resourceVersion."""
        if request is not None:
            return admitted.update(
                self,
                rt,
                namespace,
                name,
                body,
                request,
                subresource=subresource,
                dry_run=dry_run,
                require_rv=require_rv,
            )
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        new = clone(body)
        check_kind(rt, new)
        metadata = meta(new)
        if metadata.get("name") and metadata["name"] != name:
            raise bad_request(
                f"the name of the object ({metadata['name']}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and metadata.get("namespace") and metadata["namespace"] != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        with self.objects.lock:
            old = self.objects.require(rt, namespace, name)
            old_meta = old["metadata"]
            given_rv = metadata.get("resourceVersion")
            if given_rv:
                if str(given_rv) != old_meta["resourceVersion"]:
                    raise conflict(rt.key, name, STALE)
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
                self._carry_over(rt, new, old, namespace, name, keep_status=keep_status)
            new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
            if rt.custom:
                cr_schema.admit(self.objects, rt, new)
            if new == old:
                return as_served(old, rt)
            if dry_run:
                return as_served(new, rt)
            if (
                new["metadata"].get("deletionTimestamp")
                and not new["metadata"].get("finalizers")
                and (rt.key != "pods" or not self._kubelet.terminating_gracefully(new))
            ):
                self.objects.commit(rt, "DELETED", new, old)  # the last finalizer is gone
                return as_served(new, rt)
            self.objects.commit(rt, "MODIFIED", new, old)
            if rt.key == CRD_KEY:
                self.crds.serve(new)
            return as_served(new, rt)

    def _carry_over(
        self, rt: ResourceType, new: Obj, old: Obj, namespace: str | None, name: str, *, keep_status: bool
    ) -> None:
        """A main-resource update: what the server keeps from the stored object (status, identity,
        deletion state), the kind's own checks, and the generation (bumped when anything beyond metadata
        and status changes)."""
        old_meta = old["metadata"]
        if rt.has_status and not keep_status:
            if "status" in old:
                new["status"] = clone(old["status"])
            else:
                new.pop("status", None)
        new_meta = meta(new)
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
        validate_meta(rt, new)
        if rt.key == "pods":
            check_pod_update(old, new)
        elif rt.key == CRD_KEY:
            self.crds.prepare_update(new, old)
        elif rt.key == "namespaces":
            new.setdefault("status", old.get("status"))
        new_meta["generation"] = old_meta.get("generation", 1) + (1 if _spec_of(new) != _spec_of(old) else 0)

    # ------------------------------------------------------------------------------------------- patch

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
        request: WriteRequest | None = None,
    ) -> tuple[Obj, bool]:
        """PATCH in any of the four flavours; returns (object, created): apply can create. Admission
        webhooks (`request`) see the patched object, as an update (or a create, for apply)."""
        return patching.patch_object(
            self,
            rt,
            namespace,
            name,
            body,
            content_type,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
            request=request,
        )

    # ------------------------------------------------------------------------------------------ delete

    def delete_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
        request: WriteRequest | None = None,
    ) -> Obj:
        """DELETE: preconditions, finalizers, graceful pod termination (if enabled), namespace and CRD
        cascades. Returns the deleted (or now terminating) object."""
        options = options or {}
        if request is not None:
            return admitted.delete(self, rt, namespace, name, options, request, dry_run=dry_run)
        with self.objects.lock:
            old = self.objects.require(rt, namespace, name)
            metadata = old["metadata"]
            _check_preconditions(rt, name, metadata, options.get("preconditions") or {})
            if dry_run:
                return as_served(old, rt)
            grace = self._kubelet.grace_period(rt, old, options)
            if metadata.get("deletionTimestamp"):
                if metadata.get("finalizers") or grace > 0:
                    return as_served(old, rt)
            elif metadata.get("finalizers") or grace > 0:
                new = clone(old)
                new["metadata"]["deletionTimestamp"] = format_time(self.clock() + grace)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                self.objects.commit(rt, "MODIFIED", new, old)
                return as_served(new, rt)
            if rt.key == "namespaces":
                if name in ("default", "kube-system", "kube-public"):
                    raise ApiError(
                        403,
                        f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                        reason="Forbidden",
                        details={"name": name, "kind": "namespaces"},
                    )
                self._delete_namespace_contents(name)
            elif rt.key == CRD_KEY:
                self.crds.withdraw(old)
            final = clone(self.objects.require(rt, namespace, name))
            self.objects.commit(rt, "DELETED", final, self.objects.find(rt, namespace, name))
            return as_served(final, rt)

    def _delete_namespace_contents(self, namespace: str) -> None:
        for rt in self.registry:
            if not rt.namespaced:
                continue
            stored = self.objects.of_type(rt.key)
            for ident in [i for i in stored if i[0] == namespace]:
                obj = stored[ident]
                self.objects.commit(rt, "DELETED", clone(obj), obj)

    def delete_collection(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        options: Obj | None = None,
        dry_run: bool = False,
        request: WriteRequest | None = None,
    ) -> list[Obj]:
        with self.objects.lock:
            items, _, _, _ = self.objects.list_objects(
                rt, namespace, label_selector=label_selector, field_selector=field_selector
            )
            if request is None:
                return [
                    self.delete_object(
                        rt,
                        item["metadata"].get("namespace"),
                        item["metadata"]["name"],
                        options,
                        dry_run=dry_run,
                    )
                    for item in items
                ]
        # Each item is admitted on its own, without the lock (webhooks are called); one gone meanwhile is
        # skipped, as the API server's deletecollection skips it.
        deleted = []
        for item in items:
            try:
                deleted.append(
                    self.delete_object(
                        rt,
                        item["metadata"].get("namespace"),
                        item["metadata"]["name"],
                        options,
                        dry_run=dry_run,
                        request=request,
                    )
                )
            except ApiError as err:
                if err.code != 404:
                    raise
        return deleted

    # ------------------------------------------------------------------------------- pods' lifecycle

    def bind_pod(
        self,
        namespace: str,
        name: str,
        binding: Obj,
        *,
        dry_run: bool = False,
        request: WriteRequest | None = None,
        collection: bool = False,
    ) -> Obj:
        """POST pods/binding (see `PodSubresources.bind`); `collection`: through the `bindings` resource."""
        if request is not None:
            rt = self.registry.resolve("bindings") if collection else self.pod_subresources.pods
            binding = admitted.subresource_create(
                rt,
                namespace,
                name,
                None if collection else "binding",
                binding,
                ("", "v1", "Binding"),
                request,
                dry_run=dry_run,
            )
        return self.pod_subresources.bind(namespace, name, binding, dry_run=dry_run)

    def evict_pod(
        self,
        namespace: str,
        name: str,
        eviction: Obj,
        *,
        dry_run: bool = False,
        request: WriteRequest | None = None,
    ) -> Obj:
        """POST pods/eviction (see `PodSubresources.evict`)."""
        if request is not None:
            eviction = admitted.subresource_create(
                self.pod_subresources.pods,
                namespace,
                name,
                "eviction",
                eviction,
                ("policy", "v1", "Eviction"),
                request,
                dry_run=dry_run,
            )
        return self.pod_subresources.evict(namespace, name, eviction, dry_run=dry_run)

    def complete_pod_deletions(self, namespace: str | None = None, name: str | None = None) -> int:
        """What a kubelet does after a graceful delete: remove terminating pods. Returns how many."""
        return self._kubelet.complete_pod_deletions(namespace, name)


def _check_preconditions(rt: ResourceType, name: str, metadata: Obj, pre: Obj) -> None:
    if pre.get("uid") and pre["uid"] != metadata.get("uid"):
        raise conflict(
            rt.key,
            name,
            f"Precondition failed: UID in precondition: {pre['uid']}, "
            f"UID in object meta: {metadata.get('uid')}",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != metadata.get("resourceVersion"):
        raise conflict(
            rt.key,
            name,
            f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
            f"ResourceVersion in object meta: {metadata.get('resourceVersion')}",
        )


def _spec_of(obj: Obj) -> Obj:
    """Everything but metadata, status and type: what a change of bumps the generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}
