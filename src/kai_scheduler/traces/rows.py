"""Reading a trace's CSV file: rows with the line they came from, and typed fields whose errors name the
file, the line and the column (one line, as every input error of the CLI)."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kai_scheduler.api.errors import ManifestError


@dataclass(frozen=True, slots=True)
class Row:
    """One data row of a CSV file: its values by column, and its 1-based line in the file."""

    source: str
    line: int
    values: dict[str, str]

    def error(self, message: str, column: str | None = None) -> ManifestError:
        return ManifestError(self.source, message, line=self.line, field=column)

    def text(self, column: str) -> str:
        """The column's value, stripped ("" for a column the file does not have)."""
        return self.values.get(column, "").strip()

    def whole(self, column: str, *, minimum: int = 0) -> int:
        """The column as a whole number, at least `minimum`."""
        raw = self.text(column)
        try:
            value = int(raw)
        except ValueError:
            raise self.error(f"expected a whole number, got {raw!r}", column) from None
        if value < minimum:
            raise self.error(f"expected at least {minimum}, got {value}", column)
        return value

    def optional_whole(self, column: str) -> int | None:
        """The column as a whole number (at least 0), or None when it is empty."""
        return self.whole(column) if self.text(column) else None


def read_rows(path: str, columns: Sequence[str]) -> list[Row]:
    """Every data row of the CSV file `path`, which must have (at least) `columns` in its header."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            return list(_rows(path, handle, columns))
    except FileNotFoundError:
        raise ManifestError(path, "no such file") from None
    except IsADirectoryError:
        raise ManifestError(path, "is a folder, expected a CSV file") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(path, f"not a UTF-8 text file: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise ManifestError(path, f"cannot read: {exc.strerror or exc}") from None


def _rows(path: str, handle: Iterator[str], columns: Sequence[str]) -> Iterator[Row]:
    reader = csv.reader(handle)
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise ManifestError(path, "is empty, expected a CSV header") from None
    missing = [name for name in columns if name not in header]
    if missing:
        raise ManifestError(
            path, f"line 1: missing column(s) {', '.join(missing)} (found: {', '.join(header)})"
        )
    try:
        for values in reader:
            line = reader.line_num
            if not values or all(not value.strip() for value in values):
                continue  # blank lines, as at the end of many files
            if len(values) != len(header):
                raise ManifestError(
                    path, f"expected {len(header)} fields as the header, got {len(values)}", line=line
                )
            yield Row(path, line, dict(zip(header, values, strict=True)))
    except csv.Error as exc:
        raise ManifestError(path, f"malformed CSV: {exc}", line=reader.line_num) from None
