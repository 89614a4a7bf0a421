"""Per-extension-point flags of a plugin entry (`disableJobOrder: true`, ...): accepted, checked, and
ignored with a notice, as KAI does.

KAI's `PluginOption` (pkg/scheduler/conf/scheduler_conf.go) decodes `disableJobOrder`, `disableTaskOrder`,
`disablePreemptable`, `disableReclaimable`, `disableQueueOrder`, `disablePredicate` and `disableNodeOrder`,
but nothing in KAI reads those fields: a KAI scheduler with `disableJobOrder: true` orders jobs as without
it. Volcano's spellings (`enableJobOrder: false`, `enabledJobOrder: false`) are accepted alike. Unknown keys
in a plugin entry are errors (KAI would ignore a misspelt key silently; rejecting it reports the typo).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import bound_order, node, one_cycle, pod, priority_class, queue
from kai_scheduler.framework.config import (
    DEFAULT_PLUGIN_ARGUMENTS,
    DEFAULT_PLUGINS,
    ConfigError,
    PluginOption,
    SchedulerConfig,
    config_document,
    parse_config,
)


def default_with(flags: dict[str, dict[str, Any]], **document: Any) -> SchedulerConfig:
    """KAI's default plugin list, with extra keys on some plugin entries."""
    plugins = [
        {"name": name, "arguments": DEFAULT_PLUGIN_ARGUMENTS.get(name, {}), **flags.get(name, {})}
        for name in DEFAULT_PLUGINS
    ]
    return parse_config({"tiers": [{"plugins": plugins}], **document})


def entry(**keys: Any) -> dict[str, Any]:
    return {"tiers": [{"plugins": [{"name": "predicates"}, {"name": "priority", **keys}]}]}


# --- parsing -------------------------------------------------------------------------------------


def test_flags_in_all_three_spellings_are_accepted_and_each_gets_a_notice() -> None:
    config = parse_config(entry(disableJobOrder=True, enableNodeOrder=False, enabledVictim=False))
    assert config.plugin("priority") == PluginOption("priority")
    assert config.notices == (
        "tiers[0].plugins[1].disableJobOrder: KAI reads this flag but never applies it; it has no effect",
        "tiers[0].plugins[1].enableNodeOrder: KAI reads this flag but never applies it; it has no effect",
        "tiers[0].plugins[1].enabledVictim: KAI reads this flag but never applies it; it has no effect",
    )
    assert parse_config(entry()).notices == ()


@pytest.mark.parametrize("value", ["false", 0, 1, "no", [], {}])
def test_a_flag_that_is_not_a_boolean_is_an_error_naming_the_key(value: Any) -> None:
    with pytest.raises(
        ConfigError, match=r"^tiers\[0\]\.plugins\[1\]\.disableJobOrder: expected true or false"
    ):
        parse_config(entry(disableJobOrder=value))


@pytest.mark.parametrize(
    "key", ["disableJobOrdr", "enabled", "priority", "disabledJobOrder", "DisableJobOrder", "args"]
)
def test_an_unknown_key_in_a_plugin_entry_is_an_error_naming_it(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^tiers\[0\]\.plugins\[1\]\.{key}: unknown key"):
        parse_config(entry(**{key: False}))


def test_the_configuration_document_leaves_the_flags_out() -> None:
    config = default_with({"priority": {"disableJobOrder": True}})
    assert config == default_with({})
    priority = next(p for p in config_document(config)["tiers"][0]["plugins"] if p["name"] == "priority")
    assert priority == {"name": "priority"}


# --- they change nothing -------------------------------------------------------------------------


PRIORITIES = [
    node("n0", gpus=1),
    queue("q"),
    priority_class("low", 10),
    priority_class("high", 50),
    pod("old-low", gpus=1, priority_class="low"),
    pod("new-high", gpus=1, priority_class="high"),
]


@pytest.mark.parametrize(
    "flag", [{"disableJobOrder": True}, {"enableJobOrder": False}, {"enabledJobOrder": False}]
)
def test_job_order_flags_leave_priority_ordering_jobs(flag: dict[str, bool]) -> None:
    assert bound_order(one_cycle(PRIORITIES, default_with({"priority": flag}, actions="allocate"))) == [
        "new-high"
    ]


def test_predicate_flags_leave_taints_repelling_pods() -> None:
    objects = [
        node("tainted", gpus=1, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        queue("q"),
        pod("p", gpus=1),
    ]
    flagged = default_with({"predicates": {"disablePredicate": True}}, actions="allocate")
    assert bound_order(one_cycle(objects, flagged)) == []


def test_simulate_prints_the_notice_naming_the_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("tiers:\n- plugins:\n  - name: proportion\n    disableQueueOrder: true\n")
    done = subprocess.run(
        [sys.executable, "-m", "kai_scheduler", "simulate", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"kai-scheduler: warning: {config}: tiers[0].plugins[0].disableQueueOrder: KAI reads this flag but "
        "never applies it; it has no effect"
    ) in done.stderr.splitlines()
