"""The one error users see for bad input: it says where (file, document, object, field) and what is wrong.

Everything that can go wrong while reading manifests (missing files, YAML syntax, schema and semantic
checks, duplicates) ends up as a `ManifestError`, so the CLI prints `str(err)` and exits with status 2:
one line, never a traceback.
"""

from __future__ import annotations

import re
from typing import Any

_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


class ManifestError(Exception):
    """Bad input, located as precisely as known.

    `document` is the 1-based index of the YAML document in `source`; `item` the 1-based index inside a
    `kind: List` document; `line`/`column` are 1-based positions in the file; `object_ref` names the object
    (`Pod default/a-0`); `field` is the dotted path inside it (`spec.containers[0].resources.requests.cpu`).
    """

    def __init__(
        self,
        source: str,
        message: str,
        *,
        document: int | None = None,
        item: int | None = None,
        line: int | None = None,
        column: int | None = None,
        object_ref: str | None = None,
        field: str | None = None,
    ) -> None:
        self.source = source
        self.message = message
        self.document = document
        self.item = item
        self.line = line
        self.column = column
        self.object_ref = object_ref
        self.field = field
        super().__init__(self._render())

    def located(self, *, line: int | None = None, item: int | None = None) -> ManifestError:
        """A copy with location details that only the caller (the file reader) knows; known ones are kept."""
        return ManifestError(
            self.source,
            self.message,
            document=self.document,
            item=self.item if item is None else item,
            line=self.line if line is None else line,
            column=self.column,
            object_ref=self.object_ref,
            field=self.field,
        )

    def __str__(self) -> str:
        return self._render()

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields do not survive Exception's default pickling (it replays `args`); keep them so
        # errors can cross process boundaries (parallel benchmark runs).
        return (_rebuild, (self.source, self.message, self._keywords()))

    def _keywords(self) -> dict[str, Any]:
        return {
            "document": self.document,
            "item": self.item,
            "line": self.line,
            "column": self.column,
            "object_ref": self.object_ref,
            "field": self.field,
        }

    def _render(self) -> str:
        """`source: document 3, item 2 at line 41 (Pod default/a-0): field: message`, unknowns left out."""
        parts = [self.source]
        where = self._where()
        if where:
            parts.append(where)
        if self.field:
            parts.append(self.field)
        parts.append(self.message)
        return _one_line(": ".join(parts))

    def _where(self) -> str:
        place = ""
        if self.document is not None:
            place = f"document {self.document}"
            if self.item is not None:
                place += f", item {self.item}"
        if self.line is not None:
            position = f"line {self.line}" + (f", column {self.column}" if self.column is not None else "")
            place = f"{place} at {position}" if place else position
        if self.object_ref:
            place = f"{place} ({self.object_ref})" if place else f"({self.object_ref})"
        return place


def _rebuild(source: str, message: str, keywords: dict[str, Any]) -> ManifestError:
    return ManifestError(source, message, **keywords)


def _one_line(text: str) -> str:
    """Fold any line breaks (from YAML problems or echoed input) so the error stays a single line."""
    return _LINE_BREAKS.sub(" ", text)
