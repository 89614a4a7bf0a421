"""Tables as `kubectl get` prints them: upper-case headers, columns left-aligned and three spaces apart,
no borders."""

from __future__ import annotations

from collections.abc import Sequence

GAP = "   "


def render(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(header) for header in headers]
    for row in rows:
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    lines = [
        GAP.join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *rows)
    ]
    return "\n".join(lines) + "\n"


__all__ = ["render"]
