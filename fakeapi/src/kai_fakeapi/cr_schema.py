"""Custom objects held to their CRD's schema on every write, as the API server holds them: fields the
schema does not declare are pruned (unless it preserves unknown fields), and what is left must validate
(`crd_validation.validate_object`: types, enums, bounds, patterns, required fields), else 422 Invalid.

Limits: only structural schemas are checked, and CEL rules (`x-kubernetes-validations`) only those
`crd_validation` knows (KAI's); unknown fields are pruned silently (the API server's default field
validation would also warn of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .crd_registry import CRD_KEY
from .crd_validation import structural_errors, validate_object
from .errors import ApiError
from .jsoncopy import clone, json_text
from .meta import Obj
from .resources import ResourceType
from .versioned import VersionedStore

_ROOT = ("apiVersion", "kind", "metadata")


# The schema last found for each custom type and version, with the CRD object it was read from. A stored
# object is never changed in place (a write stores a new one), so the same object gives the same answer:
# `structural_errors` walks the whole schema, and custom objects are written several times a pod (issue
# #23: a thirtieth of the fake server's CPU). Shared by every store: an entry of another store's CRD is
# simply not the object asked about.
_FOUND: dict[tuple[str, str], tuple[Obj, Mapping[str, Any] | None]] = {}


def schema_of(objects: VersionedStore, rt: ResourceType) -> Mapping[str, Any] | None:
    """The served version's openAPIV3Schema (lock held), when it is structural; None otherwise."""
    crd = objects.of_type(CRD_KEY).get(("", f"{rt.plural}.{rt.group}"))
    if crd is None:
        return None
    key = (rt.key, rt.version)
    found = _FOUND.get(key)
    if found is not None and found[0] is crd:
        return found[1]
    schema = _structural_schema(crd, rt.version)
    _FOUND[key] = (crd, schema)
    return schema


def _structural_schema(crd: Obj, version_name: str) -> Mapping[str, Any] | None:
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == version_name:
            schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or None
            if isinstance(schema, dict) and not structural_errors(schema):
                return schema
    return None


# What a custom object's content (all but its metadata) came to when last admitted: the fields pruning
# kept and the validation's causes, by the content's JSON text, with the schema they were found under.
# Both are the content's alone, and the objects of one kind repeat theirs (issue #23: a PodGroup's
# pruning and validation cost a fifth of a millisecond, more than the rest of its write).
_ADMITTED: dict[tuple[str, str, bytes], tuple[Mapping[str, Any], Obj, list[tuple[str, str]]]] = {}
_ADMITTED_LIMIT = 4096


def admit(objects: VersionedStore, rt: ResourceType, obj: Obj) -> None:
    """Prune `obj` in place to its schema and validate it (lock held); raises 422 Invalid."""
    schema = schema_of(objects, rt)
    if schema is None:
        return
    content = json_text({k: v for k, v in obj.items() if k != "metadata"})
    key = (rt.key, rt.version, content) if content is not None else None
    found = _ADMITTED.get(key) if key is not None else None
    if found is not None and found[0] is schema:
        kept, causes = found[1], found[2]
        for name in [k for k in obj if k not in _ROOT]:
            if name in kept:
                obj[name] = clone(kept[name])
            else:
                del obj[name]
    else:
        causes = _pruned_and_checked(schema, obj)
        if key is not None:
            if len(_ADMITTED) >= _ADMITTED_LIMIT:
                _ADMITTED.clear()
            _ADMITTED[key] = (schema, clone({k: v for k, v in obj.items() if k not in _ROOT}), causes)
    if causes:
        name = str(obj["metadata"].get("name", ""))
        text = ", ".join(f"{field}: {message}" for field, message in causes)
        raise ApiError(
            422,
            f'{rt.kind}.{rt.group} "{name}" is invalid: {text}',
            details={
                "name": name,
                "group": rt.group,
                "kind": rt.kind,
                "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
            },
        )


def _pruned_and_checked(schema: Mapping[str, Any], obj: Obj) -> list[tuple[str, str]]:
    """Prune `obj` in place; the validation's causes (field, message)."""
    for key in [k for k in obj if k not in _ROOT]:
        prop = (schema.get("properties") or {}).get(key)
        if prop is None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            del obj[key]
        elif prop is not None:
            obj[key] = prune(prop, obj[key])
            if obj[key] is None:
                del obj[key]
    declared = schema.get("properties") or {}
    body = {k: v for k, v in obj.items() if k not in _ROOT or (k != "metadata" and k in declared)}
    return [
        _cause(error)
        for error in validate_object({**schema, "required": _required(schema)}, body)
        if "the validator does not know the CEL rule" not in error
    ]


def prune(schema: Mapping[str, Any], value: Any) -> Any:
    """`value` without the fields `schema` does not declare (and without nulls it does not allow)."""
    if value is None:
        return None
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [prune(schema["items"], item) for item in value]
    if not isinstance(value, dict) or schema.get("x-kubernetes-int-or-string"):
        return value
    properties = schema.get("properties")
    additional = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(properties, Mapping) and key in properties:
            sub: Mapping[str, Any] | None = properties[key]
        elif isinstance(additional, Mapping):
            sub = additional
        elif schema.get("x-kubernetes-preserve-unknown-fields"):
            out[key] = item
            continue
        else:
            continue
        assert sub is not None
        if item is None and not sub.get("nullable"):
            continue
        out[key] = prune(sub, item)
    return out


def _required(schema: Mapping[str, Any]) -> list[str]:
    """The root's required fields other than the ones the server itself fills in."""
    return [name for name in schema.get("required") or [] if name not in _ROOT]


def _cause(error: str) -> tuple[str, str]:
    field, _, message = error.partition(": ")
    return (field, message) if message else ("", error)
