"""How the live processes log: levelled (`--log-level`, `-v`), as text or as one JSON object per line
(`--log-format json`, for log pipelines). Structured fields given with `extra={"fields": {...}}` are
appended to a text line as `key=value` and become keys of the JSON object."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, Final, TextIO

from kai_scheduler.api.timestamps import format_epoch

LEVELS: Final = ("debug", "info", "warning", "error")
FORMATS: Final = ("text", "json")


def fields(**values: Any) -> dict[str, Any]:
    """The `extra` of a log call that carries structured fields."""
    return {"fields": values}


class _Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        moment = format_epoch(record.created, "milliseconds")
        line = f"{moment} {record.levelname:<7} {record.name}: {record.getMessage()}"
        extra = getattr(record, "fields", None)
        if extra:
            line += " " + " ".join(f"{key}={value}" for key, value in extra.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": format_epoch(record.created, "milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """Log `level` and above to `stream` (stderr) in `fmt`; the libraries' chatter below warning only."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Json() if fmt == "json" else _Text())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("kai_scheduler").setLevel(level.upper())
