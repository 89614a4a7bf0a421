"""`clone`: a deep copy of a JSON document (dicts, lists, strings, numbers, booleans, None).

The store copies objects on every read and write so that no caller shares its dicts with another; a
request copies a pod several times. `copy.deepcopy` pays for generality (a memo of every node, the copy
protocol) that JSON trees do not need: this is about twice as fast on a pod. Anything else (a datetime
from YAML, say) still goes through `copy.deepcopy`.
"""

from __future__ import annotations

import copy
from typing import TypeVar

T = TypeVar("T")

_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def clone(value: T) -> T:
    kind = type(value)
    if kind is dict:
        return {key: clone(item) for key, item in value.items()}  # type: ignore[attr-defined,return-value]
    if kind is list:
        return [clone(item) for item in value]  # type: ignore[attr-defined,return-value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)
