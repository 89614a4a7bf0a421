"""The PATCH verb: the media type picks the flavour (`patch.py` holds the algorithms), the patched object
is written through update, and server-side apply may create the object and remembers what each field
manager applied."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from . import patch as patches
from . import wire
from .admission_request import WriteRequest
from .errors import STALE, ApiError, bad_request, conflict, not_found
from .jsoncopy import clone
from .meta import Obj, as_served, meta
from .resources import ResourceType

if TYPE_CHECKING:
    from .writes import ObjectApi

RETRIES = 5

PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (PATCH_MERGE, PATCH_STRATEGIC, PATCH_JSON, PATCH_APPLY)
_PATCH_ALIASES = {
    "merge": PATCH_MERGE,
    "strategic": PATCH_STRATEGIC,
    "json": PATCH_JSON,
    "apply": PATCH_APPLY,
}


def patch_object(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    body: bytes | Any,
    content_type: str,
    *,
    subresource: str | None,
    field_manager: str | None,
    force: bool,
    dry_run: bool,
    request: WriteRequest | None = None,
) -> tuple[Obj, bool]:
    """PATCH in any of the four flavours (`content_type`: a media type or merge/strategic/json/apply);
    returns (object, created). With admission webhooks (`request`) the patched object is written without
    the store's lock, and patched again from the new state when that changed meanwhile (unless the patch
    named the resourceVersion it applies to)."""
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
            doc = yaml.safe_load(body) if ctype == PATCH_APPLY else wire.loads(body or b"null")
        else:
            doc = body
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"error decoding patch: {exc}") from None
    manager = f"{field_manager}/{subresource or ''}"
    for _ in range(RETRIES):
        with api.objects.lock:  # held throughout when no webhook is called
            old = api.objects.find(rt, namespace, name)
            target, create = _patched(api, rt, namespace, name, doc, ctype, old, subresource, field_manager)
            if request is None:
                return _write(
                    api, rt, namespace, name, target, create, subresource, dry_run, None, doc, manager, ctype
                )
        try:
            return _write(
                api, rt, namespace, name, target, create, subresource, dry_run, request, doc, manager, ctype
            )
        except ApiError as err:
            raced = (
                old is not None and meta(target).get("resourceVersion") == old["metadata"]["resourceVersion"]
            )
            if err.code != 409 or not raced:
                raise
    raise conflict(rt.key, name, STALE)


def _patched(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    doc: Any,
    ctype: str,
    old: Obj | None,
    subresource: str | None,
    field_manager: str | None,
) -> tuple[Obj, bool]:
    """The object the patch makes of `old` (lock held), and whether it is to be created (apply only)."""
    if ctype == PATCH_APPLY:
        return _applied(api, rt, namespace, name, doc, old, subresource, field_manager)
    if old is None:
        raise not_found(rt.key, name)
    current = as_served(old, rt)
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
    return patched, False


def _write(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    target: Obj,
    create: bool,
    subresource: str | None,
    dry_run: bool,
    request: WriteRequest | None,
    doc: Any,
    manager: str,
    ctype: str,
) -> tuple[Obj, bool]:
    if create:
        result = api.create_object(rt, target, namespace, dry_run=dry_run, request=request)
    else:
        result = api.update_object(
            rt,
            namespace,
            name,
            target,
            subresource=subresource,
            dry_run=dry_run,
            require_rv=False,
            request=request,
        )
    if ctype == PATCH_APPLY and not dry_run:
        with api.objects.lock:
            api.objects.side_data(rt, namespace, name)[manager] = clone(doc)
    return result, create


def _applied(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    doc: Any,
    old: Obj | None,
    subresource: str | None,
    field_manager: str | None,
) -> tuple[Obj, bool]:
    """Server-side apply (lock held): the object to create, or the live object with the applied fields
    merged in, pruning the fields this manager applied last time and no longer does."""
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
    if old is None:
        if subresource:
            raise not_found(rt.key, name)
        body = clone(doc)
        meta(body)["name"] = name
        return body, True
    current = as_served(old, rt)
    if subresource == "status":
        doc = {"status": doc.get("status") or {}}
    applied = api.objects.side_data(rt, namespace, name)
    merged = patches.server_side_apply(current, doc, applied.get(f"{field_manager}/{subresource or ''}"))
    if doc_meta.get("resourceVersion") is None:
        meta(merged)["resourceVersion"] = old["metadata"]["resourceVersion"]
    return merged, False
