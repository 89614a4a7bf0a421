"""Writes that admission webhooks see (a `WriteRequest`), in the API server's order: the object drafted as
the verb would store it (the verb's own dry run: defaulted and checked, nothing written), the mutating
webhooks, the draft again from what they made (defaulted and checked anew), the validating webhooks, then
the write itself.

The store's lock is not held while a webhook is called (a webhook may call the API server, and other
clients must not wait for it). An update that finds the object changed meanwhile starts over, as the API
server retries an update's conflict when the request named no resourceVersion.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .admission_request import Attributes, Kind, WriteRequest
from .errors import STALE, ApiError, conflict
from .jsoncopy import clone
from .meta import Obj, meta
from .resources import ResourceType

if TYPE_CHECKING:
    from .writes import ObjectApi

RETRIES = 5
_SERVER_SET = ("uid", "creationTimestamp", "generation", "resourceVersion")


def create(
    api: ObjectApi,
    rt: ResourceType,
    body: Obj,
    namespace: str | None,
    request: WriteRequest,
    *,
    dry_run: bool,
) -> Obj:
    draft = api.create_object(rt, body, namespace, dry_run=True)
    given_name = str(meta(clone(body)).get("name") or "") if isinstance(body, dict) else ""
    namespace = draft["metadata"].get("namespace")
    attrs = Attributes(
        "CREATE",
        rt,
        None,
        namespace,
        given_name,
        _unstored(draft, given_name),
        None,
        request.options("CreateOptions", dry_run),
        dry_run,
    )
    mutated = request.mutate(attrs)
    final = (
        draft if mutated == attrs.object else api.create_object(rt, _body(mutated), namespace, dry_run=True)
    )
    request.validate(replace(attrs, object=final))
    return api.create_object(rt, final, namespace, dry_run=dry_run, keep_uid=True)


def _unstored(draft: Obj, given_name: str) -> Obj:
    """The draft as mutating webhooks see it: before the server set uid, timestamps and a generated name."""
    obj = clone(draft)
    for key in _SERVER_SET:
        obj["metadata"].pop(key, None)
    if not given_name:
        obj["metadata"].pop("name", None)
    return obj


def update(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    body: Obj,
    request: WriteRequest,
    *,
    subresource: str | None,
    dry_run: bool,
    require_rv: bool | None,
) -> Obj:
    given_rv = isinstance(body, dict) and bool((body.get("metadata") or {}).get("resourceVersion"))
    options = request.options("UpdateOptions", dry_run)
    for _ in range(RETRIES):
        with api.objects.lock:
            old = api.get_object(rt, namespace, name)
            draft = api.update_object(
                rt, namespace, name, body, subresource=subresource, dry_run=True, require_rv=require_rv
            )
        seen = old["metadata"]["resourceVersion"]
        attrs = Attributes("UPDATE", rt, subresource, namespace, name, draft, old, options, dry_run)
        try:
            mutated = request.mutate(attrs)
            final = draft
            if mutated != draft:
                final = api.update_object(
                    rt, namespace, name, _at(mutated, seen), subresource=subresource, dry_run=True
                )
            request.validate(replace(attrs, object=final))
            return api.update_object(
                rt, namespace, name, _at(final, seen), subresource=subresource, dry_run=dry_run
            )
        except ApiError as err:
            if err.code != 409 or given_rv:
                raise
    raise conflict(rt.key, name, STALE)


def _at(obj: Obj | None, resource_version: str) -> Obj:
    """An update's body that holds it to the version its admission saw."""
    out = _body(obj)
    meta(out)["resourceVersion"] = resource_version
    return out


def _body(obj: Obj | None) -> Obj:
    if not isinstance(obj, dict):
        raise ApiError(
            500, "Internal error occurred: admission left no object to write", reason="InternalError"
        )
    return clone(obj)


def delete(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    options: Obj,
    request: WriteRequest,
    *,
    dry_run: bool,
) -> Obj:
    old = api.delete_object(rt, namespace, name, options, dry_run=True)  # preconditions first, as the server
    attrs = Attributes(
        "DELETE",
        rt,
        None,
        namespace,
        name,
        None,
        old,
        request.options("DeleteOptions", dry_run, options),
        dry_run,
    )
    request.mutate(attrs)
    request.validate(attrs)
    return api.delete_object(rt, namespace, name, options, dry_run=dry_run)


def subresource_create(
    rt: ResourceType,
    namespace: str,
    name: str,
    subresource: str | None,
    body: Obj,
    kind: Kind,
    request: WriteRequest,
    *,
    dry_run: bool,
) -> Obj:
    """A create on a subresource (a pod's `binding`, `eviction`): the body, admitted, to act on."""
    obj = clone(body) if isinstance(body, dict) else body
    if isinstance(obj, dict):
        obj["apiVersion"] = f"{kind[0]}/{kind[1]}" if kind[0] else kind[1]
        obj["kind"] = kind[2]
        meta(obj).setdefault("namespace", namespace)
    attrs = Attributes(
        "CREATE",
        rt,
        subresource,
        namespace,
        name,
        obj,
        None,
        request.options("CreateOptions", dry_run),
        dry_run,
        kind,
    )
    mutated = request.mutate(attrs)
    request.validate(replace(attrs, object=mutated))
    return _body(mutated)
