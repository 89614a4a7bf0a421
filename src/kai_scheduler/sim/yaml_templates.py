"""Reading a large manifest file by its documents' shapes: each distinct shape parsed by PyYAML once.

A cluster's dump repeats a few shapes: 290,000 pods of the same keys, nesting and indentation that differ
only in their values (names, nodes, quantities). Parsing each with PyYAML cost ~55 µs, three quarters of
loading them. Here a document's text is cut into its *skeleton* (the text with each value that ends a
`key: value` or `- value` line replaced by a hole) and its values; the first document of each skeleton is
parsed by PyYAML (holes numbered), and every later one is that result with its own values put in the holes.

Same documents as PyYAML's, or this path is not taken:
- Only a file whose every line is of the plain block style (`key:`, `key: value`, `- value`, `- key:
  value`, comments, blank lines; ASCII, spaces, `---` between documents) is read so, and a value is a hole
  only when it is one scalar on its own: plain text that needs no escaping and cannot continue on the next
  line unnoticed, or a one-line quoted string without escapes. A line of anything else (flow style,
  anchors, tags, block scalars, quoted keys, comments after a value, tabs, `\\r`) sends the file to PyYAML.
- A skeleton is used only when PyYAML's result of it holds each numbered hole exactly once as a whole
  string: a value continued on the next line, or a key given twice (the later one wins), leaves a hole
  out or changes it, and the file goes to PyYAML from that document on.
- A hole's value is its scalar as PyYAML resolves it: a quoted one is its text; a plain one takes the tag
  PyYAML's resolver gives it (`yes`, `1`, `0x1F`, `2026-01-01`, ...) and PyYAML's constructor makes it.
- A skeleton PyYAML cannot parse sends the file to PyYAML, which reports the error as always.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from kai_scheduler.api.errors import ManifestError


@dataclass(slots=True)
class Document:
    """A parsed YAML document before validation: `index` its 1-based place in the file (documents without
    content count: they are null), `line` the 1-based line where it starts, `item_lines` the lines of a
    `kind: List` document's items; `shape`: the same object for documents read through one skeleton (the
    same keys and nesting, other scalars), None when read by PyYAML. Nothing changes one once made. (Not
    frozen: one is made per document, and a frozen dataclass sets each field through
    `object.__setattr__`, three times the cost of making a plain one.)"""

    data: Any
    index: int
    line: int
    item_lines: tuple[int, ...] = ()
    shape: object = None


# Parses a file's (or a skeleton's) text, as bytes, into its documents, null ones included.
Parse = Callable[[bytes], Iterator[Document]]

# A file of documents of (nearly) all different shapes gains nothing here, and the shapes kept would cost
# as much memory as its documents: past this many, PyYAML reads the rest.
MAX_SKELETONS = 1000
_SEPARATOR = "\n---\n"
_START = "---\n"
_HOLE = "kai-template-hole"  # a file that holds this text anywhere is read by PyYAML alone
# Values that become holes. Plain: what cannot start an indicator (`-` only before a digit), no spaces
# (so no `: ` or ` #`), not ending in `:`; quoted: printable ASCII without the quote or a backslash.
_PLAIN = r"(?:[A-Za-z0-9_./]|-(?=[0-9]))[A-Za-z0-9_./:@+-]*(?<!:)"
_SINGLE_QUOTED = r"'[ -&(-~]*'"
_DOUBLE_QUOTED = r'"[ !#-\[\]-~]*"'
# The space before the value is part of the hole (the pattern starting with it is a third faster).
_VALUES = re.compile(rf"(?m) (?<=[:-] )({_PLAIN}|{_SINGLE_QUOTED}|{_DOUBLE_QUOTED})$")
# A skeleton's lines: indentation, sequence dashes, then a key with or without a hole, a hole, or nothing;
# or a comment line.
_KEY = r"[A-Za-z0-9_][A-Za-z0-9_./-]*"
_LINE = rf" *(?:- )*(?:{_KEY}:(?:{_HOLE})?|-{_HOLE}|-)?| *#[ -~]*"
_SKELETON = re.compile(rf"(?:{_LINE})(?:\n(?:{_LINE}))*")
_STR_TAG = "tag:yaml.org,2002:str"

# A container of a parsed skeleton and how to make a document's own copy of it: the container itself (its
# plain values stay), the holes among its entries (key or position, hole number) and its entries that are
# containers, each with its own recipe.
_Recipe = tuple[Any, tuple[tuple[Any, int], ...], tuple[tuple[Any, "_Recipe"], ...]]


@dataclass(frozen=True, slots=True, eq=False)  # one per skeleton: equal and hashed by identity
class _Template:
    """What one skeleton parses to: `documents` 0 or 1 (a skeleton of comments alone after `---` is a null
    document; before any `---`, none); `line`/`item_lines` relative to the skeleton's parsed text;
    `line_breaks` in the skeleton (its documents' text has as many)."""

    documents: int
    recipe: _Recipe | None  # None: the document is not a container (null, or a scalar)
    data: Any
    line: int
    item_lines: tuple[int, ...]
    line_breaks: int


class _Unreadable(Exception):
    """This part of the file is PyYAML's to read."""


class _Values(dict[str, Any]):
    """A hole's text -> its value, made once per distinct text (a file repeats most of them): one object
    for equal values, as the loader shares equal strings."""

    def __init__(self, constructor: Any) -> None:
        super().__init__()
        self._constructor = constructor
        # The first characters of plain scalars that may resolve to another tag than str (PyYAML's
        # resolver looks its candidate patterns up by first character, and none applies to every one).
        resolvers = constructor.yaml_implicit_resolvers
        self._maybe_not_str = None if None in resolvers else frozenset(resolvers)

    def __missing__(self, text: str) -> Any:
        if text[0] in "'\"":
            value: Any = text[1:-1]
        elif self._maybe_not_str is not None and text[0] not in self._maybe_not_str:
            value = text  # most distinct values (names): no resolver to try
        else:
            tag = self._constructor.resolve(yaml.ScalarNode, text, (True, False))
            try:
                value = (
                    text
                    if tag == _STR_TAG
                    else self._constructor.construct_document(yaml.ScalarNode(tag, text))
                )
            except Exception:  # `2026-13-01`, ...: PyYAML's reading of the file says what it says of it
                raise _Unreadable from None
        self[text] = value
        return value


def documents(text: str, parse: Parse, constructor: Any) -> Iterator[Document | None]:
    """The documents of a file's text read through their skeletons, in order; None, as the last item, when
    the rest of the file (from the document after the last one given) is for `parse` to read.
    `constructor`: a PyYAML loader whose resolver and constructor make the holes' values."""
    if not text.isascii() or _HOLE in text:
        yield None
        return
    reader = _Reader(parse, constructor)
    try:
        yield from reader.documents(text)
    except _Unreadable:
        yield None


class _Reader:
    def __init__(self, parse: Parse, constructor: Any) -> None:
        self._parse = parse
        self._templates: dict[tuple[str, bool], _Template] = {}
        self._values = _Values(constructor)

    def documents(self, text: str) -> Iterator[Document]:
        explicit = text.startswith(_START)
        start = len(_START) if explicit else 0
        line = 1 if explicit else 0  # 0-based: the chunk's first line
        index = 0
        split, join, templates = _VALUES.split, _HOLE.join, self._templates
        values_of = self._values.__getitem__
        while start <= len(text):
            end = text.find(_SEPARATOR, start)
            if end < 0:
                end = len(text)
            parts = split(text[start:end])
            skeleton = join(parts[::2])
            template = templates.get((skeleton, explicit)) or self._template(skeleton, explicit)
            if template.documents:
                index += 1
                values = list(map(values_of, parts[1::2]))
                offset = line - 1 if explicit else line
                yield Document(
                    template.data if template.recipe is None else _fill(template.recipe, values),
                    index,
                    offset + template.line,
                    tuple(offset + item for item in template.item_lines) if template.item_lines else (),
                    template,
                )
            line += template.line_breaks + 2
            start = end + len(_SEPARATOR)
            explicit = True

    def _template(self, skeleton: str, explicit: bool) -> _Template:
        if len(self._templates) >= MAX_SKELETONS or not _SKELETON.fullmatch(skeleton):
            raise _Unreadable
        pieces = skeleton.split(_HOLE)
        numbered = pieces[0] + "".join(f" {_HOLE}-{n}{piece}" for n, piece in enumerate(pieces[1:]))
        try:
            parsed = list(self._parse(((_START if explicit else "") + numbered).encode("ascii")))
        except ManifestError:
            raise _Unreadable from None
        if not parsed:
            template = _Template(0, None, None, 0, (), skeleton.count("\n"))
        else:
            (document,) = parsed  # no `---` inside a skeleton: one document at most
            if document.data.__class__ is dict and "items" in document.data:
                raise _Unreadable  # a `kind: List`, whose items' lines are PyYAML's nodes' to give
            holes = {f"{_HOLE}-{n}": n for n in range(len(pieces) - 1)}
            found: list[int] = []
            recipe = _recipe(document.data, holes, found) if _is_container(document.data) else None
            if sorted(found) != list(range(len(holes))) or (recipe is None and holes):
                raise _Unreadable
            template = _Template(
                1, recipe, document.data, document.line, document.item_lines, skeleton.count("\n")
            )
        self._templates[skeleton, explicit] = template
        return template


def _is_container(value: Any) -> bool:
    return value.__class__ is dict or value.__class__ is list


def _recipe(container: Any, holes: dict[str, int], found: list[int]) -> _Recipe:
    entries = container.items() if container.__class__ is dict else enumerate(container)
    own: list[tuple[Any, int]] = []
    children: list[tuple[Any, _Recipe]] = []
    for key, value in entries:
        if _is_container(value):
            children.append((key, _recipe(value, holes, found)))
        elif value.__class__ is str and value in holes:
            own.append((key, holes[value]))
            found.append(holes[value])
    return container, tuple(own), tuple(children)


def _fill(recipe: _Recipe, values: list[Any]) -> Any:
    """A copy of the skeleton's container with this document's values in its holes (every container new,
    as PyYAML makes them; equal values are shared objects)."""
    container, holes, children = recipe
    out = container.copy()
    for key, hole in holes:
        out[key] = values[hole]
    for key, child in children:
        out[key] = _fill(child, values)
    return out
