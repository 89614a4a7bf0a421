"""The configuration's `queueAdmissionGating` section: switched on, `ungate` runs last whatever the document's
order; the section reads back as written; a bad value is one line naming its key."""

from __future__ import annotations

import pytest

from kai_scheduler.framework.config import ConfigError, config_document, parse_config


def test_switched_on_ungate_runs_last() -> None:
    config = parse_config({"actions": "ungate, allocate, reclaim", "queueAdmissionGating": {"enabled": True}})
    assert config.actions == ("allocate", "reclaim", "ungate")
    assert parse_config({"queueAdmissionGating": {"enabled": True}}).actions[-1] == "ungate"
    assert "ungate" not in parse_config({"queueAdmissionGating": {"enabled": False}}).actions


def test_the_section_reads_back_as_written() -> None:
    config = parse_config({"queueAdmissionGating": {"enabled": True, "reservationTimeout": "90s"}})
    assert config.admission_gating.reservation_timeout == 90.0
    assert parse_config(config_document(config)) == config
    assert "queueAdmissionGating" not in config_document(parse_config(None))


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("yes", "queueAdmissionGating: expected a mapping"),
        ({"enabled": "yes"}, "queueAdmissionGating.enabled: expected true or false, got 'yes'"),
        ({"enable": True}, "queueAdmissionGating.enable: unknown key"),
        ({"enabled": True, "reservationTimeout": "0s"}, "queueAdmissionGating.reservationTimeout: must be"),
    ],
)
def test_bad_values_are_one_line_naming_the_key(section: object, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"queueAdmissionGating": section})
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
