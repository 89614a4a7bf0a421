"""The head of an HTTP/1.x request, its request line and header fields, read without the email package.

`http.server` reads a request's header fields with `email.parser`, a parser of mail messages: at the live
benchmark's pace (issue #23) that was an eighth of the server's CPU. A request head is a request line
(`METHOD target HTTP/x.y`), then `name: value` lines up to an empty line (RFC 9112, sections 3 and 5);
this reads exactly that, into `HeaderFields`: what the handler and its helpers read of the standard
library's `HTTPMessage` (`get`, `get_all`, `items`, case-insensitive names), looked up in a dict rather
than by a scan that lower-cases every name (five look-ups a request). A value's surrounding spaces and
tabs are not part of it; a line folded onto the next one (obsolete, RFC 9112 section 5.2) continues the
value before it. What is not a head is refused as the real API server refuses it: 400 for a line without
a colon or a request line that is not three words, 505 for HTTP/2 and later, 431 for a line longer than
64 KiB or more than 100 fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO, TypeVar, overload

MAX_LINE = 65536
MAX_FIELDS = 100
_VERSION = re.compile(r"HTTP/(\d{1,10})\.(\d{1,10})")

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


class HeadError(Exception):
    """The head cannot be read: answer `code` with `message` and close the connection."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def request_line(raw: bytes) -> tuple[str, str, tuple[int, int]] | None:
    """(method, target, (major, minor)) of a request line; None for an empty one (the client closed)."""
    text = str(raw, "iso-8859-1").rstrip("\r\n")
    words = text.split()
    if not words:
        return None
    if len(words) != 3:
        raise HeadError(400, f"Bad request syntax ({text!r})")
    method, target, version = words
    match = _VERSION.fullmatch(version)
    if match is None:
        raise HeadError(400, f"Bad request version ({version!r})")
    number = (int(match[1]), int(match[2]))
    if number >= (2, 0):
        raise HeadError(505, f"Invalid HTTP version ({version[5:]})")
    if target.startswith("//"):
        target = "/" + target.lstrip("/")
    return method, target, number


def header_fields(rfile: BinaryIO) -> HeaderFields:
    """The header fields up to the empty line that ends them (or the end of the stream)."""
    fields: list[list[str]] = []  # [name, value]: a folded line extends the value
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise HeadError(431, "Line too long")
        if line in (b"\r\n", b"\n", b""):
            break
        text = str(line, "iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and fields:
            fields[-1][1] += " " + text.strip(" \t")
            continue
        if len(fields) == MAX_FIELDS:
            raise HeadError(431, "Too many headers")
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            raise HeadError(400, f"malformed header line ({text[:100]!r})")
        fields.append([name, value.strip(" \t")])
    return HeaderFields([(name, value) for name, value in fields])


__all__ = ["MAX_FIELDS", "MAX_LINE", "HeadError", "HeaderFields", "header_fields", "request_line"]
