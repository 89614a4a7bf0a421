"""Durations in manifests, CLI flags and configuration: plain seconds or Go-style."""

import pytest

from kai_scheduler.api.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 30.0),
        ("1.5", 1.5),
        ("0", 0.0),
        ("90s", 90.0),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("1w", 604800.0),
        ("1w2d", 777600.0),
        ("1h30m", 5400.0),
        ("1h30m15s", 5415.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("100ns", 1e-7),
        ("-1s", -1.0),
        ("-1", -1.0),
        ("+5m", 300.0),
        (" 10m ", 600.0),
    ],
)
def test_parses_plain_seconds_and_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("number", "seconds"), [(1, 1.0), (2.5, 2.5), (-1, -1.0)])
def test_yaml_numbers_are_seconds(number: float, seconds: float) -> None:
    assert parse_duration(number) == seconds


@pytest.mark.parametrize(
    "text", ["", "10x", "1y", "m", "1m-5s", "1.2.3s", "h1", "nan", "inf", "1e999", "ten"]
)
def test_rejects_invalid_text_naming_it_and_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    message = str(caught.value)
    assert repr(text) in message
    assert "90s" in message  # the message shows what would have worked


@pytest.mark.parametrize("value", [True, None, float("inf"), [1]])
def test_rejects_non_durations(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)  # type: ignore[arg-type]
