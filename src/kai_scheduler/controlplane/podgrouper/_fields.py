"""Typed, located access to fields of plain Kubernetes dicts.

A `Node` is a value inside an object together with where it is (`PyTorchJob ns/name` and the dotted
path). Missing values read as `None`; a value of the wrong type raises `GroupingError` naming the object
and the path, so no grouping code ever meets a bare `KeyError` or `TypeError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kai_scheduler.controlplane.podgrouper.errors import GroupingError

_INTEGER = re.compile(r"[+-]?[0-9]+")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    return _show(value)


class Node:
    """A (possibly missing) value at `path` inside the object `ref`."""

    __slots__ = ("path", "ref", "value")

    def __init__(self, value: Any, ref: str, path: str = "") -> None:
        self.value = value
        self.ref = ref
        self.path = path

    def error(self, message: str) -> GroupingError:
        return GroupingError(message, object_ref=self.ref, field=self.path or None)

    @property
    def missing(self) -> bool:
        return self.value is None

    def at(self, *keys: str) -> Node:
        """The value under `keys` (missing when any step is missing); a non-object on the way is an error."""
        node = self
        for key in keys:
            path = f"{node.path}.{key}" if node.path else key
            if node.value is None:
                node = Node(None, node.ref, path)
                continue
            if not isinstance(node.value, Mapping):
                raise node.error(f"expected an object, got {_type_name(node.value)}")
            node = Node(node.value.get(key), node.ref, path)
        return node

    def mapping(self) -> Mapping[str, Any]:
        """The object here; missing reads as empty."""
        if self.value is None:
            return {}
        if not isinstance(self.value, Mapping):
            raise self.error(f"expected an object, got {_type_name(self.value)}")
        return self.value

    def required_mapping(self) -> Mapping[str, Any]:
        if self.value is None:
            raise self.error("is missing")
        return self.mapping()

    def items(self) -> list[Node]:
        """The list here, one node per item; missing reads as empty."""
        if self.value is None:
            return []
        if not isinstance(self.value, list | tuple):
            raise self.error(f"expected a list, got {_type_name(self.value)}")
        return [Node(item, self.ref, f"{self.path}[{i}]") for i, item in enumerate(self.value)]

    def opt_int(self, *, minimum: int | None = 0) -> int | None:
        """An integer field (JSON number without a fraction), at least `minimum`; `None` when missing."""
        value = self.value
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"expected an integer, got {_type_name(value)}")
        if isinstance(value, float):
            if not value.is_integer():
                raise self.error(f"expected an integer, got {_show(value)}")
            value = int(value)
        if minimum is not None and value < minimum:
            raise self.error(f"must be at least {minimum}, got {value}")
        return int(value)

    def int_or(self, default: int, *, minimum: int | None = 0) -> int:
        found = self.opt_int(minimum=minimum)
        return default if found is None else found

    def opt_str(self) -> str | None:
        """A string field; `None` when missing or empty."""
        if self.value is None:
            return None
        if not isinstance(self.value, str):
            raise self.error(f"expected a string, got {_type_name(self.value)}")
        return self.value or None

    def required_str(self) -> str:
        found = self.opt_str()
        if found is None:
            raise self.error("is missing")
        return found

    def string_map(self) -> dict[str, str]:
        """A `map[string]string` (labels, annotations); missing reads as empty."""
        result: dict[str, str] = {}
        for key, value in self.mapping().items():
            if not isinstance(key, str) or not isinstance(value, str):
                at = Node(value, self.ref, f'{self.path}["{key}"]')
                raise at.error(f"expected a string value, got {_type_name(value)}")
            result[key] = value
        return result


def int_text(text: str, node: Node, *, minimum: int = 0) -> int:
    """An integer written in a label or annotation value (`"4"`), at least `minimum`."""
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        raise node.error(f"expected an integer, got {_show(text)}")
    value = int(stripped)
    if value < minimum:
        raise node.error(f"must be at least {minimum}, got {value}")
    return value
