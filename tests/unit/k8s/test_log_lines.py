"""Live mode's log lines start with the time the record was made, in UTC to the millisecond
(`2026-03-01T12:00:05.123Z`), in both formats `run --log-format` offers."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from kai_scheduler.k8s.runtime.logs import configure, fields

MADE = datetime(2026, 3, 1, 12, 0, 5, 123456, tzinfo=UTC).timestamp()


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    monkeypatch.setattr("time.time", lambda: MADE)  # what logging stamps a record with
    monkeypatch.setattr("time.time_ns", lambda: int(MADE * 1e9))
    out = io.StringIO()
    yield out


def test_a_text_line_starts_with_its_time_in_utc_to_the_millisecond(stream: io.StringIO) -> None:
    configure("info", "text", stream)
    logging.getLogger("kai_scheduler.test").info("bound %s", "p", extra=fields(node="n1"))
    assert stream.getvalue() == "2026-03-01T12:00:05.123Z INFO    kai_scheduler.test: bound p node=n1\n"


def test_a_json_line_has_the_same_time(stream: io.StringIO) -> None:
    configure("info", "json", stream)
    logging.getLogger("kai_scheduler.test").warning("slow", extra=fields(seconds=2))
    entry = json.loads(stream.getvalue())
    assert entry == {
        "time": "2026-03-01T12:00:05.123Z",
        "level": "warning",
        "logger": "kai_scheduler.test",
        "message": "slow",
        "seconds": 2,
    }
