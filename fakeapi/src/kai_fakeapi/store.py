"""The fake API server's object store, with a Python API for tests: seed and inspect state directly
(`store.create(...)`, `store.list("pods")`, `store.wait_until(...)`) without HTTP.

The store is built of parts with one job each: `versioned.py` (objects, resourceVersions, history and
watches), `writes.py` (the API verbs with Kubernetes' semantics), `patching.py`, `admission.py`,
`crd_registry.py`, `kubelet.py` and `subresources.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import yaml

from .crds import DEFAULT_CRDS
from .errors import ApiError
from .jsoncopy import clone
from .meta import Obj, meta
from .resources import ResourceType
from .writes import ObjectApi


class Store(ObjectApi):
    """Thread-safe object store with Kubernetes semantics.

    Options:
    * `history_limit`: how many events are kept for watch resumption; older resourceVersions get 410 Gone.
    * `graceful_pod_deletion`: deleting a pod that runs on a node (and is not finished) only sets
      `deletionTimestamp` (a MODIFIED event), as with a kubelet; `complete_pod_deletions()` then removes
      it. Off: pods are removed at once (one DELETED event).
    * `kubelet`: a bound pod becomes Running at once (a second write after the binding); settable later.
    * `auto_create_namespaces`: create missing namespaces instead of answering 404 like the real server.
    * `crds`: CRDs installed at start (default: KAI's and the workload kinds the pod grouper knows).
    * `clock`: the time creation and deletion timestamps are taken from.
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
        super().__init__(
            history_limit=history_limit,
            graceful_pod_deletion=graceful_pod_deletion,
            kubelet=kubelet,
            auto_create_namespaces=auto_create_namespaces,
            crds=crds,
            clock=clock,
        )

    # ---------------------------------------------------------------------------- Python API for tests

    def create(
        self, obj: Obj, *, namespace: str | None = None, keep_status: bool = True, keep_uid: bool = False
    ) -> Obj:
        """Create from a manifest (type from apiVersion/kind). Unlike POST, the status is kept as given
        (`keep_status`), so tests can seed running pods and ready nodes directly."""
        rt = self.type_of(obj)
        return self.create_object(rt, obj, namespace, keep_status=keep_status, keep_uid=keep_uid)

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
        metadata = obj.get("metadata") or {}
        ns = (metadata.get("namespace") or "default") if rt.namespaced else None
        return self.update_object(
            rt, ns, str(metadata.get("name", "")), obj, subresource=subresource, require_rv=False
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
        metadata = obj.get("metadata") or {}
        ns = (metadata.get("namespace") or "default") if rt.namespaced else None
        with self.objects.lock:
            existing = self.objects.find(rt, ns, str(metadata.get("name", "")))
            if existing is None:
                return self.create_object(rt, obj, ns, keep_status=keep_status)
            body = clone(obj)
            meta(body).pop("resourceVersion", None)
            return self.update_object(
                rt, ns, str(metadata["name"]), body, require_rv=False, keep_status=keep_status
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
        return self.objects.wait_until(predicate, timeout)

    def list(
        self,
        resource: str | ResourceType,
        namespace: str | None = None,
        *,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[Obj]:
        """All objects of a type (in `namespace`, or in all namespaces when None)."""
        items, _, _, _ = self.objects.list_objects(
            self.resource(resource), namespace, label_selector=labels, field_selector=fields
        )
        return items
