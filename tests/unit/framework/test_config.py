"""Configuration parsing: KAI's format, defaults, and errors that name the key.

Reference: kai-reference §9 (the binary's built-in default: actions
"allocate, consolidation, reclaim, preempt, stalegangeviction", the default plugin list, nodeplacement
binpack/binpack; empty actions/tiers fall back to it), §5.2 / §5.4 (proportion arguments kValue,
relcaimerSaturationMultiplier >= 1); simulate-contract "Configuration file" (optional keys and defaults).
"""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import ConfigError, SchedulerConfig, parse_config

DEFAULT_PLUGIN_NAMES = [
    "predicates",
    "proportion",
    "priority",
    "elastic",
    "kubeflow",
    "ray",
    "nodeavailability",
    "gpusharingorder",
    "gpupack",
    "resourcetype",
    "subgrouporder",
    "taskorder",
    "nominatednode",
    "dynamicresources",
    "nodeplacement",
    "minruntime",
    "topology",
    "snapshot",
    "sg-nodelocalgreedy",
    "sg-multinodegang",
]


@pytest.mark.parametrize("document", [None, {}, {"actions": "", "tiers": []}])
def test_defaults(document: Any) -> None:
    config = parse_config(document)
    assert config.actions == ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
    assert [p.name for p in config.plugins()] == DEFAULT_PLUGIN_NAMES
    assert config.plugin("nodeplacement").arguments == {"cpu": "binpack", "gpu": "binpack"}  # type: ignore[union-attr]
    assert config.default_staleness_grace_period == 60.0
    assert config.max_consolidation_preemptees == 16
    assert config.use_scheduling_signatures is True
    assert config.full_hierarchy_fairness is True
    assert config.allow_consolidating_reclaim is True
    assert config.period == 1.0
    assert config.evicted_unowned_pods == "recreate"
    assert config == SchedulerConfig()


def test_a_full_document() -> None:
    config = parse_config(
        {
            "actions": "allocate,  reclaim",
            "tiers": [
                {"plugins": [{"name": "predicates"}, {"name": "proportion", "arguments": {"kValue": 0.5}}]},
                {"plugins": [{"name": "nodeplacement", "arguments": {"gpu": "spread", "cpu": "spread"}}]},
            ],
            "defaultStalenessGracePeriod": "-1s",
            "maxConsolidationPreemptees": -1,
            "useSchedulingSignatures": False,
            "fullHierarchyFairness": False,
            "allowConsolidatingReclaim": False,
            "period": "2s",
            "evictedUnownedPods": "delete",
            "queueDepthPerAction": {"allocate": 10},
        }
    )
    assert config.actions == ("allocate", "reclaim")
    assert len(config.tiers) == 2
    assert config.plugin("proportion").arguments == {"kValue": 0.5}  # type: ignore[union-attr]
    assert config.plugin("nodeplacement").arguments == {"gpu": "spread", "cpu": "spread"}  # type: ignore[union-attr]
    assert config.default_staleness_grace_period == -1.0
    assert config.max_consolidation_preemptees == -1
    assert config.use_scheduling_signatures is False
    assert config.full_hierarchy_fairness is False
    assert config.allow_consolidating_reclaim is False
    assert config.period == 2.0
    assert config.evicted_unowned_pods == "delete"
    assert config.queue_depth_per_action == {"allocate": 10}


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"actoins": "allocate"}, "actoins"),
        ({"actions": ["allocate"]}, "actions"),
        ({"tiers": {"plugins": []}}, "tiers"),
        ({"tiers": [{"plugins": [{"arguments": {}}]}]}, "tiers[0].plugins[0]"),
        ({"tiers": [{"plugins": [{"name": "x", "arguments": [1]}]}]}, "tiers[0].plugins[0].arguments"),
        ({"tiers": [{"nothing": 1}]}, "tiers[0]"),
        ({"defaultStalenessGracePeriod": "soon"}, "defaultStalenessGracePeriod"),
        ({"maxConsolidationPreemptees": -2}, "maxConsolidationPreemptees"),
        ({"maxConsolidationPreemptees": "3"}, "maxConsolidationPreemptees"),
        ({"useSchedulingSignatures": "yes"}, "useSchedulingSignatures"),
        ({"fullHierarchyFairness": 1}, "fullHierarchyFairness"),
        ({"allowConsolidatingReclaim": None}, "allowConsolidatingReclaim"),
        ({"period": "0s"}, "period"),
        ({"period": "-1s"}, "period"),
        ({"period": "fast"}, "period"),
        ({"queueDepthPerAction": {"allocate": 0}}, "queueDepthPerAction"),
        ({"evictedUnownedPods": "keep"}, "evictedUnownedPods"),
    ],
)
def test_errors_name_the_key(document: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(document)
    assert key in str(error.value)
    assert "\n" not in str(error.value)


def test_a_non_mapping_document_is_rejected() -> None:
    with pytest.raises(ConfigError):
        parse_config(["allocate"])


def _config(plugins: list[dict[str, Any]], actions: str = "allocate") -> SchedulerConfig:
    return parse_config({"actions": actions, "tiers": [{"plugins": plugins}]})


def test_unknown_plugin_and_action_are_named() -> None:
    with pytest.raises(ConfigError, match="nosuchplugin"):
        Scheduler(_config([{"name": "nosuchplugin"}]))
    with pytest.raises(ConfigError, match="nosuchaction"):
        Scheduler(_config([{"name": "predicates"}], actions="allocate, nosuchaction"))


@pytest.mark.parametrize(
    ("plugin", "words"),
    [
        ({"name": "nodeplacement", "arguments": {"gpu": "diagonal"}}, "nodeplacement.arguments.gpu"),
        ({"name": "nodeplacement", "arguments": {"cpu": "pack"}}, "nodeplacement.arguments.cpu"),
        (
            {"name": "proportion", "arguments": {"relcaimerSaturationMultiplier": 0.5}},
            "relcaimerSaturationMultiplier",
        ),
    ],
)
def test_bad_plugin_arguments_are_named(plugin: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace(".", r"\.")):
        Scheduler(_config([plugin]))


def test_every_plugin_and_action_of_kais_default_configuration_is_built() -> None:
    from kai_scheduler.cycle import ACTIONS, PLUGINS

    config = SchedulerConfig()
    Scheduler(config)
    assert [p.name for p in config.plugins() if p.name not in PLUGINS] == []
    assert [name for name in config.actions if name not in ACTIONS] == []
    assert "dynamicresources" in [p.name for p in config.plugins()]
