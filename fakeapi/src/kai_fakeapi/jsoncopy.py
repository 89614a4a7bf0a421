"""`clone`: a deep copy of a JSON document (dicts, lists, strings, numbers, booleans, None); `json_text`: its
text when it is nothing but JSON (a key for answers that depend on the value alone).

The store copies objects on every read and write so that no caller shares its dicts with another; a
request copies a pod several times (issue #23: a seventh of the server's CPU at the live benchmark's
pace). A document is copied by orjson, written and read back (C, about twice as fast as walking it in
Python), and kept only when it equals the original: orjson writes NaN and infinities as null and tuples
as arrays, which the comparison catches; types orjson does not write as JSON (datetimes from YAML,
subclasses of the builtin types, integers beyond 64 bits, ...) make it refuse. Anything it refuses or
changes is walked in Python as before, and what is not JSON within goes through `copy.deepcopy`.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar, cast

import orjson

T = TypeVar("T")

_IMMUTABLE = frozenset({str, int, float, bool, type(None)})
_ONLY_JSON = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def clone(value: T) -> T:
    kind = type(value)
    if kind is dict or kind is list:
        exact = _exact(value)
        return cast(T, exact[1]) if exact is not None else cast(T, _walk(value))
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def json_text(value: Any) -> bytes | None:
    """`value`'s JSON text when it is nothing but JSON (so that equal texts are equal values of the same
    types: 1 and 1.0 and true differ, a tuple is no list), else None."""
    exact = _exact(value)
    return exact[0] if exact is not None else None


def _exact(value: Any) -> tuple[bytes, Any] | None:
    """(JSON text, a copy read back from it) when the copy equals `value`, else None."""
    try:
        text = orjson.dumps(value, option=_ONLY_JSON)
    except TypeError:  # orjson.JSONEncodeError included
        return None
    copied = orjson.loads(text)
    return (text, copied) if copied == value else None


def _walk(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {key: _walk(item) for key, item in value.items()}
    if kind is list:
        return [_walk(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)
