"""`scenarioSearchBudgets`: KAI's validation and defaults.

Ported from KAI v0.17.0 `pkg/operator/operands/scheduler/resources_test.go`
`TestValidateScenarioSearchBudgets` (all 7 cases, by name); defaults from
`pkg/apis/kai/v1/schedulingshard_types.go` `DefaultScenarioSearchBudgets`.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.framework.config import ConfigError, SchedulerConfig, config_document, parse_config
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets, parse_search_budgets


@pytest.mark.parametrize(
    ("case", "section", "error"),
    [
        ("nil config", None, None),
        (
            "valid config allows defaults for disabled consolidation",
            {
                "maxActionSearchDuration": {
                    "default": "1s",
                    "reclaim": "2s",
                    "preempt": "1s",
                    "consolidation": "1s",
                },
                "maxJobSearchDuration": "250ms",
                "minJobSearchDuration": "0s",
                "maxGeneratorSearchDuration": {
                    "default": "250ms",
                    "NodeLocalGreedy": "50ms",
                    "MultiNodeGang": "250ms",
                    "PluginProvidedGeneratorFromScheduler": "1s",
                },
            },
            None,
        ),
        (
            "invalid action budget key",
            {"maxActionSearchDuration": {"allocate": "1s"}},
            "scenarioSearchBudgets.maxActionSearchDuration contains invalid action key 'allocate'; "
            "valid action keys: default, reclaim, preempt, consolidation",
        ),
        (
            "negative duration",
            {"maxGeneratorSearchDuration": {"NodeLocalGreedy": "-1s"}},
            "scenarioSearchBudgets.maxGeneratorSearchDuration['NodeLocalGreedy'] must be non-negative, "
            "got '-1s'",
        ),
        (
            "min job budget must be less than max job budget",
            {"maxJobSearchDuration": "100ms", "minJobSearchDuration": "100ms"},
            "scenarioSearchBudgets: minJobSearchDuration (100ms) must be less than "
            "maxJobSearchDuration (100ms)",
        ),
        (
            "zero max job budget disables min max ordering",
            {"maxJobSearchDuration": "0s", "minJobSearchDuration": "1s"},
            None,
        ),
        (
            "zero duration map values are valid explicit budgets",
            {
                "maxActionSearchDuration": {"reclaim": "0s"},
                "maxGeneratorSearchDuration": {"NodeLocalGreedy": "0s"},
            },
            None,
        ),
    ],
)
def test_validate_scenario_search_budgets(
    case: str, section: dict[str, Any] | None, error: str | None
) -> None:
    # TestValidateScenarioSearchBudgets, by case name
    if error is None:
        parse_search_budgets(section)
        return
    with pytest.raises(ConfigError) as raised:
        parse_search_budgets(section)
    assert str(raised.value) == error


def test_kai_defaults_fill_every_key_not_given() -> None:
    # DefaultScenarioSearchBudgets: 5m per action, 4m per job, no minimum, 2m per generator but 30s for
    # NodeLocalGreedy; a configured default does not replace the named generators' own
    budgets = parse_search_budgets({"maxGeneratorSearchDuration": {"default": "10s"}})
    assert budgets == ScenarioSearchBudgets(
        max_action={"default": 300.0},
        max_job=240.0,
        min_job=0.0,
        max_generator={"default": 10.0, "NodeLocalGreedy": 30.0, "MultiNodeGang": 120.0},
    )
    assert parse_search_budgets(None) == SchedulerConfig().scenario_search_budgets


def test_limits_fall_back_to_the_default_key() -> None:
    budgets = parse_search_budgets({"maxActionSearchDuration": {"reclaim": "3s"}})
    assert (budgets.action_limit("reclaim"), budgets.action_limit("preempt")) == (3.0, 300.0)
    assert (budgets.generator_limit("NodeLocalGreedy"), budgets.generator_limit("Other")) == (30.0, 120.0)


def test_the_configuration_document_carries_them_and_reads_them_back() -> None:
    config = parse_config({"scenarioSearchBudgets": {"maxJobSearchDuration": "1m30s"}})
    assert config.scenario_search_budgets.max_job == 90.0
    assert parse_config(config_document(config)) == config
    assert "scenarioSearchBudgets" not in config_document(SchedulerConfig())


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ("5m", "scenarioSearchBudgets: expected a mapping"),
        ({"maxJobSearch": "1s"}, "scenarioSearchBudgets.maxJobSearch: unknown key"),
        ({"maxJobSearchDuration": 5}, "scenarioSearchBudgets.maxJobSearchDuration: expected a duration"),
        ({"maxJobSearchDuration": "5 minutes"}, "scenarioSearchBudgets.maxJobSearchDuration: "),
    ],
)
def test_malformed_sections_name_the_key(section: Any, error: str) -> None:
    with pytest.raises(ConfigError, match=f"^{error}"):
        parse_config({"scenarioSearchBudgets": section})
