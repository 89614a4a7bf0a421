"""The result document as JSON text: exactly what `json.dumps(document, indent=2)` writes, but fast, and
in pieces that can be written as they are made.

The standard library indents in pure Python (about 5 s of CPU for the 150 MB document of 290,000 pods);
orjson writes the same text in a fraction of that. The two differ only in

* floats that are not finite (json: `NaN`, `Infinity`; orjson: `null`) or below 1e-4 in magnitude
  (json: `1e-05`; orjson: `0.00001`),
* characters outside printable ASCII above 0x7e (json escapes them, `\\u00e9`; orjson writes UTF-8), and
* what orjson does not take: numpy scalars, keys that are not strings, integers beyond 64 bits.

So the document is written part by part: a list or mapping without any of those is orjson's, one with
them is opened up and its entries written the same way, down to the values orjson would write otherwise,
which are the standard library's. A reused cycle's time of 0.00006 s no longer sends the whole document to
the slow encoder, only that number. Long lists (the pods, the decisions) go in batches, so the text is
never all in memory at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import IO, Any

import orjson

_SMALLEST_PLAIN_FLOAT = 1e-4
"""Below this magnitude `repr(float)`, and so json, switches to an exponent (`1e-05`); orjson does not."""

_BATCH = 2048
"""Entries of a long list written by one orjson call: large enough to leave the per-call cost behind,
small enough that a batch's text is a few MB."""

_INDENT = b"  "


def document_json(document: dict[str, Any]) -> str:
    """`json.dumps(document, indent=2)` plus a final newline."""
    return b"".join(document_chunks(document)).decode("ascii")


def write_document(document: dict[str, Any], handle: IO[bytes]) -> None:
    """`document_json(document)`, written to a binary `handle` piece by piece."""
    for chunk in document_chunks(document):
        handle.write(chunk)


def document_chunks(document: dict[str, Any]) -> Iterator[bytes]:
    """The text of `document_json`, as ASCII bytes in pieces."""
    yield from _chunks(document, 0)
    yield b"\n"


def _chunks(value: Any, level: int) -> Iterator[bytes]:
    """`value` as json.dumps(indent=2) writes it at nesting `level` (its first line not indented: that is
    the place of the key or list entry before it)."""
    kind = value.__class__
    if kind is not dict and kind is not list and kind is not tuple:
        yield json.dumps(value).encode("ascii")  # a scalar: few enough to leave to json
        return
    if len(value) > _BATCH and kind is not dict:
        yield from _long_list(value, level)
        return
    fast = _orjson(value, level)
    if fast is not None:
        yield fast
    elif kind is not dict or all(key.__class__ is str for key in value):
        yield from _opened(value, level)
    else:  # keys json turns into strings (numbers, booleans, None): all of it json's
        yield _reindent(json.dumps(value, indent=2).encode("ascii"), level)


def _opened(value: dict[str, Any] | list[Any] | tuple[Any, ...], level: int) -> Iterator[bytes]:
    """A non-empty container (or `{}` / `[]`) whose entries are written one by one."""
    is_dict = value.__class__ is dict
    opening, closing = (b"{", b"}") if is_dict else (b"[", b"]")
    if not value:
        yield opening + closing
        return
    inner = b"\n" + _INDENT * (level + 1)
    entries = value.items() if is_dict else enumerate(value)  # type: ignore[union-attr]
    for position, (key, entry) in enumerate(entries):
        head = opening if position == 0 else b","
        yield head + inner + (json.dumps(key).encode("ascii") + b": " if is_dict else b"")
        yield from _chunks(entry, level + 1)
    yield b"\n" + _INDENT * level + closing


def _long_list(value: list[Any] | tuple[Any, ...], level: int) -> Iterator[bytes]:
    """A long list in batches of entries: each batch orjson's when it can be, else opened up."""
    inner = b"\n" + _INDENT * (level + 1)
    closing = b"\n" + _INDENT * level + b"]"
    for start in range(0, len(value), _BATCH):
        batch = value[start : start + _BATCH]
        head = b"[" if start == 0 else b","
        fast = _orjson(batch, level)
        if fast is not None:
            # `[\n  a,\n  b\n]` at `level`: its entries and the separators between them, no brackets.
            yield head + fast[1 : -len(closing)]
            continue
        for position, entry in enumerate(batch):
            yield (head if position == 0 else b",") + inner
            yield from _chunks(entry, level + 1)
    yield closing


def _orjson(value: Any, level: int) -> bytes | None:
    """orjson's text of `value` indented to `level`, when it is json's text too; else None."""
    if not _floats_written_alike(value):
        return None
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:  # numpy scalars, non-string keys, integers beyond 64 bits
        return None
    if not text.isascii() or b"\x7f" in text:
        return None
    return _reindent(text, level)


def _reindent(text: bytes, level: int) -> bytes:
    """Text written at nesting 0 moved to `level`: every line after the first indented further (a JSON
    string holds no raw line break, so every one is between values)."""
    return text.replace(b"\n", b"\n" + _INDENT * level) if level else text


def _floats_written_alike(value: Any) -> bool:
    """Whether every float in `value` (dicts, lists and scalars) is finite and either zero or at least
    1e-4 in magnitude. A loop over containers rather than a call per value: the document holds millions."""
    containers: list[Any] = [value]
    while containers:
        container = containers.pop()
        for entry in container.values() if container.__class__ is dict else container:
            kind = entry.__class__
            if kind is float:
                if not (math.isfinite(entry) and (entry == 0 or abs(entry) >= _SMALLEST_PLAIN_FLOAT)):
                    return False
            elif kind is dict or kind is list or kind is tuple:
                containers.append(entry)
    return True
