"""The checks every write gets, whatever the kind: the object's name, its labels and annotations, and its
apiVersion and kind against the resource it is written to."""

from __future__ import annotations

import functools
import re

from .errors import bad_request, invalid
from .meta import Obj, meta
from .resources import ResourceType

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Groups whose object names are only path segments (RBAC names such as `system:controller:x`).
_PATH_SEGMENT_GROUPS = frozenset({"rbac.authorization.k8s.io"})


def validate_name(rt: ResourceType, name: str) -> None:
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


def validate_meta(rt: ResourceType, obj: Obj) -> None:
    """Label and annotation keys are qualified names, values strings; label values valid label values."""
    metadata = meta(obj)
    name = str(metadata.get("name", ""))
    causes: list[tuple[str, str]] = []
    for sub in ("labels", "annotations"):
        values = metadata.get(sub)
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


def check_kind(rt: ResourceType, obj: Obj) -> None:
    """Refuse a body of another kind or version (a CRD's objects may name any of its versions), then set
    both to the resource's."""
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


@functools.lru_cache(maxsize=4096)
def _valid_qualified_key(key: str) -> bool:
    """Whether a label or annotation key is a qualified name (remembered: every write checks all of an
    object's keys, and a cluster's objects share a few)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))
