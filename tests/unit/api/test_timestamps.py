"""RFC 3339 times read and written one way (api.timestamps): the forms Kubernetes emits read as the
instants they name, and each precision writes what apimachinery (or the caller before it) writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from kai_scheduler.api.timestamps import (
    Precision,
    format_epoch,
    format_rfc3339,
    parse_rfc3339,
    seconds_since,
)

NOON = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-01T12:00:00Z", NOON),  # metav1.Time
        ("2026-03-01T12:00:00.000000Z", NOON),  # metav1.MicroTime
        ("2026-03-01T12:00:00.123456Z", NOON + timedelta(microseconds=123456)),
        ("2026-03-01T12:00:00.5Z", NOON + timedelta(milliseconds=500)),  # RFC3339Nano drops trailing zeros
        ("2026-03-01T13:30:00+01:30", NOON),  # an offset (a CronJob's scheduled-time annotation)
        ("2026-03-01T07:00:00-05:00", NOON),
        ("2026-03-01t12:00:00z", NOON),  # RFC 3339 allows lower case
        ("2026-03-01T12:00:00", NOON),  # no zone: UTC, as Kubernetes means it
        (" 2026-03-01T12:00:00Z\n", NOON),  # as a YAML block scalar leaves it
    ],
)
def test_the_forms_kubernetes_writes_read_as_the_same_instant(text: str, expected: datetime) -> None:
    moment = parse_rfc3339(text)
    assert moment == expected
    assert moment.tzinfo is not None


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z", "2026-03-01T25:00:00Z"])
def test_what_is_not_a_time_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_seconds_since_ignores_what_is_absent_or_not_a_time() -> None:
    assert seconds_since("2026-03-01T12:01:30Z", NOON) == 90.0
    assert seconds_since(None, NOON) is None
    assert seconds_since("", NOON) is None
    assert seconds_since("soon", NOON) is None


MOMENT = datetime(2026, 3, 1, 12, 0, 5, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        ("seconds", "2026-03-01T12:00:05Z"),  # metav1.Time: digits dropped, not rounded
        ("milliseconds", "2026-03-01T12:00:05.123Z"),
        ("microseconds", "2026-03-01T12:00:05.123456Z"),  # metav1.MicroTime
        ("microseconds_if_any", "2026-03-01T12:00:05.123456Z"),
    ],
)
def test_each_precision_writes_its_digits(precision: Precision, expected: str) -> None:
    assert format_rfc3339(MOMENT, precision) == expected


def test_a_whole_second_keeps_microtime_digits_and_drops_optional_ones() -> None:
    assert format_rfc3339(NOON, "microseconds") == "2026-03-01T12:00:00.000000Z"
    assert format_rfc3339(NOON, "microseconds_if_any") == "2026-03-01T12:00:00Z"
    assert format_rfc3339(NOON, "milliseconds") == "2026-03-01T12:00:00.000Z"


def test_times_are_written_in_utc_and_naive_ones_are_utc() -> None:
    paris = NOON.astimezone(ZoneInfo("Europe/Paris"))
    assert format_rfc3339(paris) == "2026-03-01T12:00:00Z"
    assert format_rfc3339(NOON.replace(tzinfo=None)) == "2026-03-01T12:00:00Z"


def test_keep_offset_writes_the_moments_own_offset_as_go_does() -> None:
    assert format_rfc3339(NOON, keep_offset=True) == "2026-03-01T12:00:00Z"
    assert format_rfc3339(NOON.astimezone(ZoneInfo("Europe/Paris")), keep_offset=True) == (
        "2026-03-01T13:00:00+01:00"
    )
    west = timezone(-timedelta(hours=3, minutes=30))
    assert format_rfc3339(NOON.astimezone(west), keep_offset=True) == "2026-03-01T08:30:00-03:30"


def test_an_epoch_reading_is_written_in_utc() -> None:
    assert format_epoch(NOON.timestamp()) == "2026-03-01T12:00:00Z"
    assert format_epoch(NOON.timestamp() + 0.25, "microseconds") == "2026-03-01T12:00:00.250000Z"


@pytest.mark.parametrize("precision", ["seconds", "milliseconds", "microseconds", "microseconds_if_any"])
def test_what_is_written_reads_back(precision: Precision) -> None:
    text = format_rfc3339(MOMENT, precision)
    kept = {"seconds": 0, "milliseconds": 123000}.get(precision, 123456)
    assert parse_rfc3339(text) == MOMENT.replace(microsecond=kept)
