"""KAI's operator objects (SchedulingShard, Config; kai.scheduler/v1) read into the scheduler configuration.

Ported from KAI v0.17.0 (each test names its case):
- `pkg/operator/operands/scheduler/resources_test.go`: `TestConfigMapForShard` (the 10 cases that render a
  shard's scheduler configuration), `TestValidateJobDepthMap` (2), `TestGetUsageDBConfig` (the 8 cases
  with both objects present; "nil shard" / "nil kaiConfig" are Go nil pointers, nothing here can pass one).
- `pkg/operator/operands/scheduler/plugin_action_merge_test.go`: the merge and its order (by name).
The budget validation (`TestValidateScenarioSearchBudgets`) is in `test_search_budgets.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import kai_config_manifest as kai_config
from helpers import scheduling_shard_manifest as shard
from kai_scheduler.framework.config import (
    ConfigError,
    SchedulerConfig,
    parse_config,
    shard_config,
    with_placement_strategy,
)
from kai_scheduler.framework.operator_objects import (
    config_from_operator_objects,
    read_kai_config,
    resolve_shard,
)

# KAI's "basic binpack strategy" render: its default plugins in order, with their arguments.
BINPACK = [
    "predicates",
    "proportion",
    "priority",
    "nodeavailability",
    "resourcetype",
    "podaffinity",
    "elastic",
    "kubeflow",
    "ray",
    "subgrouporder",
    "taskorder",
    "nominatednode",
    "dynamicresources",
    "minruntime",
    "topology",
    "snapshot",
    "sg-nodelocalgreedy",
    "sg-multinodegang",
    "gpupack",
    ("nodeplacement", {"cpu": "binpack", "gpu": "binpack"}),
    "gpusharingorder",
]
ALL_ACTIONS = ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]


def rendered(obj: dict[str, Any], config: dict[str, Any] | None = None) -> tuple[list[str], list[Any]]:
    """The shard's actions and plugins as KAI's ConfigMap lists them (a plugin with arguments as a pair)."""
    document = resolve_shard(obj, read_kai_config(config)).document
    parsed = parse_config(document)
    plugins = [(p.name, p.arguments) if p.arguments else p.name for p in parsed.plugins()]
    return list(parsed.actions), plugins


def replaced(plugins: list[Any], old: Any, new: Any) -> list[Any]:
    return [new if p == old else p for p in plugins]


# --- TestConfigMapForShard ---------------------------------------------------------------------------------


def test_basic_binpack_strategy() -> None:
    # TestConfigMapForShard "basic binpack strategy"
    assert rendered(shard(placementStrategy={"gpu": "binpack", "cpu": "binpack"})) == (ALL_ACTIONS, BINPACK)


def test_spread_strategy_with_queue_depth_configuration() -> None:
    # TestConfigMapForShard "spread strategy with queue depth configuration": gpu spread, cpu binpack
    obj = shard(
        placementStrategy={"gpu": "spread", "cpu": "binpack"},
        queueDepthPerAction={"allocate": 20, "reclaim": 10},
    )
    actions, plugins = rendered(obj)
    assert actions == ["allocate", "reclaim", "preempt", "stalegangeviction"]
    expected = replaced(BINPACK, "gpupack", "gpuspread")
    expected = replaced(expected, BINPACK[19], ("nodeplacement", {"cpu": "binpack", "gpu": "spread"}))
    assert plugins == [p for p in expected if p != "gpusharingorder"]
    assert parse_config(resolve_shard(obj).document).queue_depth_per_action == {"allocate": 20, "reclaim": 10}


def test_invalid_queue_depth_configuration() -> None:
    # TestConfigMapForShard "invalid queue depth configuration"
    with pytest.raises(
        ConfigError, match=r"^SchedulingShard default: spec\.queueDepthPerAction\.invalid-action: "
    ):
        resolve_shard(shard(queueDepthPerAction={"invalid-action": 5}))


def test_scenario_search_budget_configuration() -> None:
    # TestConfigMapForShard "scenario search budget configuration": KAI's defaults fill the keys not given
    obj = shard(
        scenarioSearchBudgets={
            "maxActionSearchDuration": {"reclaim": "3s"},
            "maxJobSearchDuration": "500ms",
            "minJobSearchDuration": "50ms",
            "maxGeneratorSearchDuration": {"NodeLocalGreedy": "75ms"},
        }
    )
    budgets = parse_config(resolve_shard(obj).document).scenario_search_budgets
    assert budgets.max_action == {"default": 300.0, "reclaim": 3.0}
    assert budgets.max_generator == {"MultiNodeGang": 120.0, "NodeLocalGreedy": 0.075, "default": 120.0}
    assert (budgets.max_job, budgets.min_job) == (0.5, 0.05)
    assert rendered(obj) == (ALL_ACTIONS, BINPACK)


def test_plugin_disable_elastic_disabled_via_override() -> None:
    # TestConfigMapForShard "plugin disable: elastic disabled via override"
    _, plugins = rendered(shard(plugins={"elastic": {"enabled": False}}))
    assert plugins == [p for p in BINPACK if p != "elastic"]


def test_action_disable_consolidation_disabled_via_override() -> None:
    # TestConfigMapForShard "action disable: consolidation disabled via override"
    # (also plugin_action_merge_test.go TestSetDefaultActions_DisableConsolidationOnBinpack)
    actions, _ = rendered(shard(actions={"consolidation": {"enabled": False}}))
    assert actions == ["allocate", "reclaim", "preempt", "stalegangeviction"]


def test_plugin_argument_override_user_kvalue_overrides_spec_kvalue() -> None:
    # TestConfigMapForShard "plugin argument override: user kValue overrides spec kValue"
    _, plugins = rendered(shard(kValue=1.5, plugins={"proportion": {"arguments": {"kValue": "3.0"}}}))
    assert plugins == replaced(BINPACK, "proportion", ("proportion", {"kValue": "3.0"}))


def test_custom_plugin_added_via_override_with_priority_and_arguments() -> None:
    # TestConfigMapForShard "custom plugin: added via override with priority and arguments"
    _, plugins = rendered(shard(plugins={"myplugin": {"priority": 1050, "arguments": {"key": "val"}}}))
    ray = BINPACK.index("ray")
    assert plugins == [*BINPACK[: ray + 1], ("myplugin", {"key": "val"}), *BINPACK[ray + 1 :]]


def test_spread_nodes_with_pack_devices_via_plugin_override() -> None:
    # TestConfigMapForShard "spread nodes with pack devices via plugin override"
    # (plugin_action_merge_test.go TestSetDefaultPlugins_SpreadNodesPackDevices): the devices are packed,
    # the nodes spread, and gpusharingorder stays off (it follows placementStrategy.gpu)
    obj = shard(
        placementStrategy={"gpu": "spread", "cpu": "binpack"},
        plugins={"gpuspread": {"enabled": False}, "gpupack": {"enabled": True}},
    )
    actions, plugins = rendered(obj)
    assert actions == ["allocate", "reclaim", "preempt", "stalegangeviction"]
    assert plugins == [
        *BINPACK[:18],
        "gpupack",
        ("nodeplacement", {"cpu": "binpack", "gpu": "spread"}),
    ]


def test_usage_db_configuration() -> None:
    # TestConfigMapForShard "usage DB configuration"
    obj = shard(
        usageDBConfig={
            "clientType": "prometheus",
            "connectionString": "http://prometheus-operated.kai-scheduler.svc.cluster.local:9090",
            "usageParams": {"halfLifePeriod": "10m", "windowSize": "10m", "windowType": "sliding"},
        }
    )
    usage = parse_config(resolve_shard(obj, read_kai_config(kai_config())).document).usage_db
    assert usage is not None
    assert usage.connection_string == "http://prometheus-operated.kai-scheduler.svc.cluster.local:9090"
    assert (usage.half_life, usage.window_size, usage.window_type) == (600.0, 600.0, "sliding")


# --- TestValidateJobDepthMap ----------------------------------------------------------------------------


def test_valid_queue_depth_with_allocate_and_reclaim() -> None:
    # TestValidateJobDepthMap "valid queue depth with allocate and reclaim"
    document = resolve_shard(shard(queueDepthPerAction={"allocate": 10, "reclaim": 5})).document
    assert parse_config(document).queue_depth_per_action == {"allocate": 10, "reclaim": 5}


def test_invalid_queue_depth_with_unknown_action() -> None:
    # TestValidateJobDepthMap "invalid queue depth with unknown action"; a disabled action is not one either
    with pytest.raises(
        ConfigError, match=r"spec\.queueDepthPerAction\.invalid: not one of the shard's actions"
    ):
        resolve_shard(shard(queueDepthPerAction={"allocate": 10, "invalid": 5}))
    with pytest.raises(ConfigError, match=r"queueDepthPerAction\.consolidation: not one"):
        resolve_shard(shard(placementStrategy={"cpu": "spread"}, queueDepthPerAction={"consolidation": 5}))


# --- TestGetUsageDBConfig -------------------------------------------------------------------------------

_PROMETHEUS = {"clientType": "prometheus"}


@pytest.mark.parametrize(
    ("case", "usage", "config", "connection"),
    [
        ("nil UsageDBConfig", None, kai_config(), None),
        (
            "non-prometheus client type",
            {"clientType": "fake", "connectionString": "http://custom-db:9090"},
            kai_config(),
            "http://custom-db:9090",
        ),
        (
            "prometheus with explicit connection string",
            {**_PROMETHEUS, "connectionString": "http://external-prometheus:9090"},
            kai_config(),
            "http://external-prometheus:9090",
        ),
        (
            "prometheus with internal prometheus enabled",
            _PROMETHEUS,
            kai_config(namespace="kai-system", prometheus={"enabled": True}),
            "http://usage-prometheus.kai-system.svc.cluster.local:9090",
        ),
        (
            "prometheus with external TSDB connection",
            _PROMETHEUS,
            kai_config(
                namespace="kai-system", prometheus={"externalPrometheusUrl": "http://external-tsdb:9090"}
            ),
            "http://external-tsdb:9090",
        ),
        (
            "deep copy preserves usage params",
            {
                **_PROMETHEUS,
                "connectionString": "http://prometheus:9090",
                "usageParams": {"windowSize": "1h"},
            },
            kai_config(),
            "http://prometheus:9090",
        ),
    ],
)
def test_usage_db_config_from_the_shard_and_the_config(
    case: str, usage: dict[str, Any] | None, config: dict[str, Any], connection: str | None
) -> None:
    # TestGetUsageDBConfig, by case name
    obj = shard() if usage is None else shard(usageDBConfig=usage)
    parsed = parse_config(resolve_shard(obj, read_kai_config(config)).document).usage_db
    if usage is None:
        assert parsed is None
        return
    assert parsed is not None and parsed.connection_string == connection
    if case == "deep copy preserves usage params":
        assert parsed.window_size == 3600.0


@pytest.mark.parametrize(
    ("case", "config"),
    [
        ("prometheus with nil prometheus config", kai_config(namespace="kai-system")),
        ("prometheus with prometheus.enabled = false", kai_config(prometheus={"enabled": False})),
        ("prometheus with nil global config", kai_config(namespace="kai-system")),
    ],
)
def test_a_prometheus_without_any_connection_string_is_an_error(case: str, config: dict[str, Any]) -> None:
    # TestGetUsageDBConfig, by case name: KAI's operator refuses to render the shard
    with pytest.raises(
        ConfigError, match=r"^SchedulingShard default: spec\.usageDBConfig: prometheus connection"
    ):
        resolve_shard(shard(usageDBConfig=_PROMETHEUS), read_kai_config(config))


# --- plugin_action_merge_test.go ------------------------------------------------------------------------


def test_set_default_plugins_with_kvalue_and_min_runtime() -> None:
    # TestSetDefaultPlugins_WithKValue, TestSetDefaultPlugins_WithMinRuntime
    obj = shard(kValue=1.5, minRuntime={"preemptMinRuntime": "5m", "reclaimMinRuntime": "10m"})
    config = parse_config(resolve_shard(obj).document)
    assert config.plugin("proportion") is not None
    assert config.plugin("proportion").arguments == {"kValue": "1.5"}  # type: ignore[union-attr]
    minruntime = config.plugin("minruntime")
    assert minruntime is not None
    assert minruntime.arguments == {"defaultPreemptMinRuntime": "5m", "defaultReclaimMinRuntime": "10m"}


def test_set_default_plugins_change_priority_and_enable_on_spread() -> None:
    # TestSetDefaultPlugins_ChangePriority (predicates after most others),
    # TestSetDefaultPlugins_EnableGpuSharingOrderOnSpreadWithoutPriority (keeps its default priority 100)
    obj = shard(
        placementStrategy={"gpu": "spread"},
        plugins={"predicates": {"priority": 50}, "gpusharingorder": {"enabled": True}},
    )
    _, plugins = rendered(obj)
    assert plugins[-3:] == [
        ("nodeplacement", {"gpu": "spread", "cpu": "binpack"}),
        "gpusharingorder",
        "predicates",
    ]


def test_set_default_actions_custom_and_reenabled() -> None:
    # TestSetDefaultActions_AddCustomAction (between reclaim 300 and preempt 200),
    # TestSetDefaultActions_EnableConsolidationOnSpreadWithoutPriority (keeps 400),
    # TestSetDefaultActions_ChangePriority
    obj = shard(
        placementStrategy={"gpu": "spread"},
        actions={
            "myaction": {"priority": 250},
            "consolidation": {"enabled": True},
            "allocate": {"priority": 50},
        },
    )
    actions, _ = rendered(obj)
    assert actions == ["consolidation", "reclaim", "myaction", "preempt", "stalegangeviction", "allocate"]


def test_pack_nodes_spread_devices() -> None:
    # TestSetDefaultPlugins_PackNodesSpreadDevices
    _, plugins = rendered(shard(plugins={"gpupack": {"enabled": False}, "gpuspread": {"enabled": True}}))
    assert plugins == replaced(BINPACK, "gpupack", "gpuspread")


def test_resolve_ordering_priority_then_name() -> None:
    # TestResolvePlugins_Ordering, TestResolveActions_Ordering: disabled ones left out, ties by name
    off = {name: {"enabled": False} for name in ALL_ACTIONS}
    obj = shard(
        actions={
            **off,
            "x": {"enabled": True, "priority": 50},
            "y": {"priority": 100},
            "z": {"priority": 50},
            "w": {"enabled": False, "priority": 200},
        },
        plugins={"b": {"priority": 20000}, "c": {"priority": 10000}, "a": {"priority": 10000}},
    )
    actions, plugins = rendered(obj)
    assert actions == ["y", "x", "z"]
    assert plugins[:3] == ["b", "a", "c"]


# --- the whole: config_from_operator_objects -----------------------------------------------------------


def test_each_shard_runs_its_own_configuration_on_its_partition() -> None:
    objects = [
        shard("default"),
        shard(
            "gpu-a100",
            partitionLabelValue="a100",
            placementStrategy={"gpu": "spread", "cpu": "spread"},
            args={"default-staleness-grace-period": "2m", "max-consolidation-preemptees": "4"},
        ),
    ]
    config = config_from_operator_objects(
        objects, kai_config(**{"global": {"nodePoolLabelKey": "pool"}}), SchedulerConfig()
    )
    assert config.node_pool_label_key == "pool"
    assert [(s.name, s.partition_label_value) for s in config.shards] == [
        ("default", None),
        ("gpu-a100", "a100"),
    ]
    default, a100 = shard_config(config, "default"), shard_config(config, "gpu-a100")
    assert default.actions == tuple(ALL_ACTIONS) and default.default_staleness_grace_period == 60.0
    assert "consolidation" not in a100.actions
    assert a100.plugin("nodeplacement").arguments == {"gpu": "spread", "cpu": "spread"}  # type: ignore[union-attr]
    assert (a100.default_staleness_grace_period, a100.max_consolidation_preemptees) == (120.0, 4)


def test_the_base_configuration_keeps_what_no_object_sets() -> None:
    base = parse_config(
        {"period": "5s", "shards": [{"name": "other"}], "queueDepthPerAction": {"allocate": 3}}
    )
    config = config_from_operator_objects([shard("default")], None, base)
    assert [s.name for s in config.shards] == ["default"]
    resolved = shard_config(config, "default")
    assert resolved.period == 5.0
    assert resolved.queue_depth_per_action == {}


def test_a_config_alone_sets_the_node_pool_label() -> None:
    config = config_from_operator_objects(
        [], kai_config(**{"global": {"nodePoolLabelKey": "team"}}), SchedulerConfig()
    )
    assert config.node_pool_label_key == "team" and config.shards == ()


def test_args_partition_label_value_wins_over_the_field() -> None:
    # KAI's operator appends the args after the flags it generates: the later flag is the one pflag keeps
    resolved = resolve_shard(shard("a", partitionLabelValue="x", args={"partition-label-value": "y"}))
    assert resolved.partition_label_value == "y"


def test_flags_without_a_counterpart_are_notices_naming_them() -> None:
    # KAI's docs/operator/scheduling-shards.md "Advanced Shard Configuration" args
    config = config_from_operator_objects(
        [shard("gpu-shard", args={"leader-elect": "true", "v": "3"})], None, SchedulerConfig()
    )
    assert list(config.notices) == [
        "SchedulingShard gpu-shard: spec.args.leader-elect: KAI's scheduler flag --leader-elect has no "
        "counterpart here; ignored",
        "SchedulingShard gpu-shard: spec.args.v: KAI's scheduler flag --v has no counterpart here; ignored",
    ]


@pytest.mark.parametrize(
    ("objects", "config", "message"),
    [
        (
            [shard("gpu-a100", placementStrategy={"gpu": "pack"})],
            None,
            "SchedulingShard gpu-a100: spec.placementStrategy.gpu: expected binpack or spread, got 'pack'",
        ),
        (
            [shard(args={"schedule-perod": "2s"})],
            None,
            "SchedulingShard default: spec.args.schedule-perod: not a flag of "
            "KAI's scheduler (did you mean schedule-period?)",
        ),
        (
            [shard(args={"allow-consolidating-reclaim": "yes"})],
            None,
            "SchedulingShard default: "
            "spec.args.allow-consolidating-reclaim: expected true or false, got 'yes'",
        ),
        (
            [shard(args={"max-consolidation-preemptees": 4})],
            None,
            "SchedulingShard default: "
            'spec.args.max-consolidation-preemptees: expected a string, got 4 (quote it: "4")',
        ),
        (
            [shard(plugins={"proportion": {"arguments": {"kValue": 2.0}}})],
            None,
            "SchedulingShard default: "
            'spec.plugins.proportion.arguments.kValue: expected a string, got 2.0 (quote it: "2.0")',
        ),
        (
            [shard(plugins={"elastic": {"enabld": False}})],
            None,
            "SchedulingShard default: spec.plugins.elastic.enabld: unknown field (did you mean enabled?)",
        ),
        ([shard(kValue="high")], None, "SchedulingShard default: spec.kValue: expected a number, got 'high'"),
        (
            [shard(minRuntime={"preemptMinRuntime": "soon"})],
            None,
            "SchedulingShard default: spec.minRuntime.preemptMinRuntime: ",
        ),
        (
            [shard(goMemLimitRatio=1.5)],
            None,
            "SchedulingShard default: spec.goMemLimitRatio: expected a number above 0 and at most 1, got 1.5",
        ),
        (
            [shard("a"), shard("b")],
            None,
            "SchedulingShard b: spec.partitionLabelValue: the default partition is served by "
            "SchedulingShard 'a' already",
        ),
        (
            [shard("a", args={"nodepool-label-key": "other"})],
            None,
            "SchedulingShard a: spec.args.nodepool-label-key: 'other' differs from the node-pool label",
        ),
        (
            [],
            kai_config(**{"global": {"nodePoolLabelKey": "bad key"}}),
            "Config kai-config: spec.global.nodePoolLabelKey: ",
        ),
        (
            [],
            kai_config(shceduler={}),
            "Config kai-config: spec.shceduler: unknown field (did you mean scheduler?)",
        ),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_object_and_field(
    objects: list[dict[str, Any]], config: dict[str, Any] | None, message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        config_from_operator_objects(objects, config, SchedulerConfig())
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_with_placement_strategy_takes_gpu_and_cpu_apart() -> None:
    # KAI allows gpu binpack with cpu spread: the devices are packed (gpupack, gpusharingorder), the nodes
    # placed by each resource's own strategy, and consolidation off (a spread of either kind)
    config = with_placement_strategy(SchedulerConfig(), "binpack", "spread")
    names = [p.name for p in config.plugins()]
    assert "gpupack" in names and "gpusharingorder" in names and "gpuspread" not in names
    assert config.plugin("nodeplacement").arguments == {"gpu": "binpack", "cpu": "spread"}  # type: ignore[union-attr]
    assert "consolidation" not in config.actions
    assert with_placement_strategy(SchedulerConfig(), "spread") == with_placement_strategy(
        SchedulerConfig(), "spread", "spread"
    )


def test_config_fields_this_scheduler_does_not_follow_are_notices() -> None:
    config = kai_config(**{"global": {"schedulerName": "my-scheduler", "queueLabelKey": "team"}})
    config["metadata"]["name"] = "other"
    notices = config_from_operator_objects([], config, SchedulerConfig()).notices
    assert notices == (
        "Config other: KAI's operator reads only the Config named kai-config",
        "Config other: spec.global.schedulerName 'my-scheduler': the scheduler's name is run's "
        "--scheduler-name (simulate schedules the pods of kai-scheduler); ignored",
        "Config other: spec.global.queueLabelKey 'team': this scheduler reads a workload's queue from "
        "kai.scheduler/queue; ignored",
    )
