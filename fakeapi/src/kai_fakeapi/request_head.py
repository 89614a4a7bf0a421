"""A request's header fields as the handling reads them, and the limits of a request's head.

`HeaderFields` answers what the handling and its helpers ask of the fields (`get`, `get_all`, `items`,
case-insensitive names) from a dict rather than by a scan that lower-cases every name (five look-ups a
request). The HTTP side (`http_loop.py`) refuses a head with a field longer than `MAX_LINE` or more than
`MAX_FIELDS` of them with 431.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar, overload

MAX_LINE = 65536
MAX_FIELDS = 100

D = TypeVar("D")


class HeaderFields:
    """A request's header fields in the order sent; names are case-insensitive, a name sent more than once
    is answered by its first value (`get`) or all of them (`get_all`), as `HTTPMessage` answers."""

    __slots__ = ("_fields", "_first")

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields
        self._first: dict[str, str] = {}
        for name, value in fields:
            self._first.setdefault(name.lower(), value)

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: D) -> str | D: ...

    def get(self, name: str, default: object = None) -> object:
        return self._first.get(name.lower(), default)

    def get_all(self, name: str) -> list[str] | None:
        lowered = name.lower()
        return [value for key, value in self._fields if key.lower() == lowered] or None

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._first

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, _ in self._fields])

    def __len__(self) -> int:
        return len(self._fields)


__all__ = ["MAX_FIELDS", "MAX_LINE", "HeaderFields"]
