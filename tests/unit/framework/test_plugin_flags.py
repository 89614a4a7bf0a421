"""Per-extension-point flags of a plugin entry (`enableJobOrder: false`, `disablePredicate: true`, ...):
parsing, errors that name the key, and what `Scheduler` drops from the session when a point is off.

Reference: kai-reference §9 ("Plugin entries also accept `enabled*` / `disable*` flags per extension
point"; KAI's `PluginOption`, inherited from kube-batch's `disableJobOrder`... and Volcano's
`enableJobOrder`...), §4.4 (which plugin registers what).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from helpers import bound_order, node, one_cycle, pod, priority_class, queue, run, snapshot_of
from kai_scheduler.framework.config import (
    DEFAULT_PLUGIN_ARGUMENTS,
    DEFAULT_PLUGINS,
    EXTENSION_POINT_FLAGS,
    ConfigError,
    PluginOption,
    SchedulerConfig,
    config_document,
    parse_config,
    with_placement_strategy,
)
from kai_scheduler.framework.session import ExtensionPoints, Session
from kai_scheduler.scheduler import Scheduler


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


def test_flags_are_parsed_in_all_three_spellings() -> None:
    config = parse_config(
        entry(
            enableJobOrder=False,
            enabledVictim=False,
            disablePredicate=True,
            enableNodeOrder=True,
            disableQueueOrder=False,
        )
    )
    assert config.plugin("priority") == PluginOption(
        "priority", {}, frozenset({"JobOrder", "Victim", "Predicate"})
    )
    assert config.plugin("predicates") == PluginOption("predicates")


def test_disabled_points_map_to_extension_points() -> None:
    option = PluginOption("x", {}, frozenset({"Predicate", "Reclaimable", "Victim"}))
    assert option.disabled_points() == (
        "static_predicates",
        "task_predicates",
        "reclaim_victim_filters",
        "reclaim_validators",
        "victim_protection.reclaim",
    )


def test_every_mapped_target_is_an_extension_point() -> None:
    names = {f.name for f in fields(ExtensionPoints)}
    dict_fields = {"victim_protection"}
    for point, targets in EXTENSION_POINT_FLAGS.items():
        for target in targets:
            name, _, key = target.partition(".")
            assert name in names, (point, target)
            assert bool(key) == (name in dict_fields), (point, target)


@pytest.mark.parametrize("value", ["false", 0, 1, "no", [], {}])
def test_a_flag_that_is_not_a_boolean_is_an_error_naming_the_key(value: Any) -> None:
    with pytest.raises(
        ConfigError, match=r"^tiers\[0\]\.plugins\[1\]\.enableJobOrder: expected true or false"
    ):
        parse_config(entry(enableJobOrder=value))


@pytest.mark.parametrize(
    "key", ["enableJobOrdr", "enabled", "priority", "disabledJobOrder", "EnableJobOrder", "args"]
)
def test_an_unknown_key_in_a_plugin_entry_is_an_error_naming_it(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^tiers\[0\]\.plugins\[1\]\.{key}: unknown key"):
        parse_config(entry(**{key: False}))


def test_contradicting_flags_are_an_error() -> None:
    with pytest.raises(ConfigError, match=r"plugins\[1\]\.disableJobOrder: contradicts .*enableJobOrder"):
        parse_config(entry(enableJobOrder=True, disableJobOrder=True))
    # Agreeing spellings are fine.
    config = parse_config(entry(enableJobOrder=False, disableJobOrder=True))
    assert config.plugin("priority").disabled == {"JobOrder"}  # type: ignore[union-attr]


def test_a_flag_without_a_value_leaves_the_point_on() -> None:
    assert parse_config(entry(enableJobOrder=None)).plugin("priority") == PluginOption("priority")


def test_flags_survive_the_configuration_document_and_placement_strategies() -> None:
    config = default_with({"priority": {"enableJobOrder": False}, "gpupack": {"disableNodeOrder": True}})
    document = config_document(config)
    priority = next(p for p in document["tiers"][0]["plugins"] if p["name"] == "priority")
    assert priority == {"name": "priority", "enableJobOrder": False}
    assert parse_config(document) == config
    spread = with_placement_strategy(config, "spread")
    assert spread.plugin("priority").disabled == {"JobOrder"}  # type: ignore[union-attr]
    assert spread.plugin("gpuspread").disabled == {"NodeOrder"}  # type: ignore[union-attr]


# --- what the scheduler drops --------------------------------------------------------------------


def opened(config: SchedulerConfig) -> Session:
    objects = [node("n0", gpus=2), queue("q"), pod("p", gpus=1)]
    session, _ = Scheduler(config)._open(snapshot_of(objects), 1, 0.0)
    return session


def test_a_disabled_point_loses_only_that_plugins_registrations() -> None:
    default = opened(default_with({})).points
    points = opened(
        default_with(
            {
                "proportion": {"enableQueueOrder": False, "enableAllocatable": False},
                "minruntime": {"enableReclaimable": False},
                "predicates": {"enableNodeOrder": False},
            }
        )
    ).points
    assert default.queue_order is not None and points.queue_order is None
    assert len(default.job_capacity_checks) == 2 and points.job_capacity_checks == []
    # proportion's reclaim registrations stay: the flag was on proportion, not on minruntime.
    assert len(points.reclaim_validators) == len(default.reclaim_validators) == 1
    assert len(default.victim_protection["reclaim"]) == 1 and points.victim_protection["reclaim"] == []
    assert len(points.victim_protection["preempt"]) == 1
    # predicates' preference scorer is gone, the other plugins' scorers are not.
    assert len(points.node_scorers) == len(default.node_scorers) - 1
    assert len(points.static_predicates) == len(default.static_predicates) > 0


def test_a_point_with_no_counterpart_changes_nothing() -> None:
    def shape(points: ExtensionPoints) -> dict[str, Any]:
        return {
            f.name: len(value) if isinstance(value := getattr(points, f.name), list | dict) else value is None
            for f in fields(ExtensionPoints)
        }

    flags = {"enabledVictim": False, "enableHierarchy": False, "enableJobStarving": False}
    assert shape(opened(default_with({"proportion": flags})).points) == shape(opened(default_with({})).points)


PRIORITIES = [
    node("n0", gpus=1),
    queue("q"),
    priority_class("low", 10),
    priority_class("high", 50),
    pod("old-low", gpus=1, priority_class="low"),
    pod("new-high", gpus=1, priority_class="high"),
]


@pytest.mark.parametrize(
    "flag", [{"enableJobOrder": False}, {"enabledJobOrder": False}, {"disableJobOrder": True}]
)
def test_job_order_off_on_priority_takes_jobs_by_creation(flag: dict[str, bool]) -> None:
    assert bound_order(one_cycle(PRIORITIES, default_with({}, actions="allocate"))) == ["new-high"]
    assert bound_order(one_cycle(PRIORITIES, default_with({"priority": flag}, actions="allocate"))) == [
        "old-low"
    ]


def test_job_order_explicitly_on_is_the_default() -> None:
    config = default_with({"priority": {"enableJobOrder": True}}, actions="allocate")
    assert bound_order(one_cycle(PRIORITIES, config)) == ["new-high"]


def test_predicate_off_on_predicates_lets_a_pod_onto_a_tainted_node() -> None:
    objects = [
        node("tainted", gpus=1, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
        queue("q"),
        pod("p", gpus=1),
    ]
    default = run(objects, default_with({}, actions="allocate"), cycles=1)
    assert bound_order(default.cycles[0].decisions) == []
    assert "untolerated taint" in default.reasons["default/pg-p"]
    flagged = default_with({"predicates": {"enablePredicate": False}}, actions="allocate")
    assert bound_order(one_cycle(objects, flagged)) == ["p"]


def test_queue_order_off_on_proportion_takes_queues_by_creation() -> None:
    objects = [
        node("n0", gpus=4),
        queue("lo", gpu=0),
        queue("hi", gpu=0, priority=200),
        pod("lo-0", "lo", gpus=1),
        pod("hi-0", "hi", gpus=1),
    ]
    assert bound_order(one_cycle(objects, default_with({}, actions="allocate"))) == ["hi-0", "lo-0"]
    flagged = default_with({"proportion": {"disableQueueOrder": True}}, actions="allocate")
    assert bound_order(one_cycle(objects, flagged)) == ["lo-0", "hi-0"]
