"""The PATCH verb: the media type picks the flavour (`patch.py` holds the algorithms), the patched object
is written through update, and server-side apply may create the object and remembers what each field
manager applied."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import yaml

from . import patch as patches
from .errors import ApiError, bad_request, not_found
from .jsoncopy import clone
from .meta import Obj, as_served, meta
from .resources import ResourceType

if TYPE_CHECKING:
    from .writes import ObjectApi

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
) -> tuple[Obj, bool]:
    """PATCH in any of the four flavours (`content_type`: a media type or merge/strategic/json/apply);
    returns (object, created)."""
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
    with api.objects.lock:
        old = api.objects.find(rt, namespace, name)
        if ctype == PATCH_APPLY:
            return _apply(api, rt, namespace, name, doc, old, subresource, field_manager, dry_run)
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
        updated = api.update_object(
            rt, namespace, name, patched, subresource=subresource, dry_run=dry_run, require_rv=False
        )
        return updated, False


def _apply(
    api: ObjectApi,
    rt: ResourceType,
    namespace: str | None,
    name: str,
    doc: Any,
    old: Obj | None,
    subresource: str | None,
    field_manager: str | None,
    dry_run: bool,
) -> tuple[Obj, bool]:
    """Server-side apply (lock held): create, or merge into the live object, pruning the fields this
    manager applied last time and no longer does."""
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
    manager = f"{field_manager}/{subresource or ''}"
    if old is None:
        if subresource:
            raise not_found(rt.key, name)
        body = clone(doc)
        meta(body)["name"] = name
        created = api.create_object(rt, body, namespace, dry_run=dry_run)
        if not dry_run:
            api.objects.side_data(rt, namespace, name)[manager] = clone(doc)
        return created, True
    current = as_served(old, rt)
    if subresource == "status":
        doc = {"status": doc.get("status") or {}}
    applied = api.objects.side_data(rt, namespace, name)
    merged = patches.server_side_apply(current, doc, applied.get(manager))
    if doc_meta.get("resourceVersion") is None:
        meta(merged)["resourceVersion"] = old["metadata"]["resourceVersion"]
    result = api.update_object(
        rt, namespace, name, merged, subresource=subresource, dry_run=dry_run, require_rv=False
    )
    if not dry_run:
        applied[manager] = clone(doc)
    return result, False
