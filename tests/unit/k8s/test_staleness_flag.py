"""`kai-scheduler run --default-staleness-grace-period`: KAI's scheduler flag of that name (v0.17
`cmd/scheduler/app/options/options.go`, default 60s, negative: never), read as Go reads a duration."""

from __future__ import annotations

import pytest

from kai_scheduler import cli


def options(*flags: str) -> float:
    args = cli.parser().parse_args(["run", "--component", "scheduler", *flags])
    return cli.run_options(args).config.default_staleness_grace_period


def test_without_the_flag_the_configuration_decides() -> None:
    assert options() == 60.0


@pytest.mark.parametrize(("value", "seconds"), [("30s", 30.0), ("-1s", -1.0), ("0", 0.0), ("1m30s", 90.0)])
def test_the_flag_sets_the_default(value: str, seconds: float) -> None:
    assert options(f"--default-staleness-grace-period={value}") == seconds


@pytest.mark.parametrize("value", ["30", "1d", "soon"])
def test_a_value_go_cannot_read_is_a_one_line_usage_error(value: str) -> None:
    with pytest.raises(cli.UsageError, match=r"--default-staleness-grace-period: .* is not a Go duration"):
        options(f"--default-staleness-grace-period={value}")
