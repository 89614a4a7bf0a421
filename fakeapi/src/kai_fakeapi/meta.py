"""Small helpers on objects shared by the store's modules: the object type, metadata access, timestamps."""

from __future__ import annotations

import calendar
import functools
import time
from typing import Any

from .jsoncopy import clone
from .resources import ResourceType

Obj = dict[str, Any]
Ident = tuple[str, str]
"""An object's place within its type: (namespace, name); the namespace is "" for cluster-scoped ones."""


def meta(obj: Obj) -> dict[str, Any]:
    """`obj["metadata"]`, created (as an empty mapping) when missing or not a mapping."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        obj["metadata"] = metadata
    return metadata


def format_time(t: float) -> str:
    """A timestamp as Kubernetes writes it (RFC 3339, whole seconds, UTC)."""
    return _format_second(int(t // 1))


@functools.lru_cache(maxsize=4)
def _format_second(second: int) -> str:
    """One second's timestamp, made once: the writes of one second stamp the same."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def parse_time(text: str) -> float:
    """A Kubernetes timestamp (its first 19 characters: fractions and zone are ignored) as epoch seconds."""
    return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))


def as_served(obj: Obj, rt: ResourceType) -> Obj:
    """A copy of a stored object as served in `rt`'s version (a CRD's versions share one storage key)."""
    out = clone(obj)
    out["apiVersion"] = rt.api_version
    return out
