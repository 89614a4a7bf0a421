"""KAI's operator objects (`kai.scheduler/v1`): each `SchedulingShard` and the `kai-config` `Config`, read
as KAI's operator reads them (v0.17.0: `SetDefaultsWhereNeeded`, `configMapForShard`, `buildArgsList`),
into the configuration this scheduler runs.

A shard's scheduler configuration is KAI's default actions and plugins (each with a priority) after its
placement strategy, merged with the shard's `actions` and `plugins` (`enabled` and `priority` each when
given, `arguments` replacing the defaults; a name not in the defaults is enabled at priority 0), the
enabled ones sorted by priority, highest first, then by name; plus `kValue` (proportion's argument),
`minRuntime` (minruntime's), `queueDepthPerAction` (its actions only), `usageDBConfig` (a Prometheus
without a connection string is the Config's), `scenarioSearchBudgets` and the scheduler flags of `args`
(`operator_flags`). The Config gives the node-pool label (`spec.global.nodePoolLabelKey`).

`config_from_operator_objects` is the one entry point: the simulator calls it with the objects of its
input, the live scheduler with those it watches. Bad values are one-line errors naming the object and the
field; fields that mean nothing to this scheduler (the Go memory limit) are read and checked, not used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.strict import did_you_mean
from kai_scheduler.framework.config import (
    PLACEMENT_STRATEGIES,
    ConfigError,
    SchedulerConfig,
    config_document,
    parse_config,
)
from kai_scheduler.framework.config_values import go_duration
from kai_scheduler.framework.operator_flags import ShardFlags, read_flags
from kai_scheduler.framework.search_budgets import parse_search_budgets, search_budgets_document
from kai_scheduler.framework.shard_config import (
    ShardSpec,
    check_partition_free,
    check_partition_label_value,
    check_shard_name,
    parse_label_key,
)

API_VERSION: Final = "kai.scheduler/v1"
SHARD_KIND: Final = "SchedulingShard"
CONFIG_KIND: Final = "Config"
CONFIG_NAME: Final = "kai-config"  # the one Config KAI's operator reconciles
DEFAULT_NAMESPACE: Final = "kai-scheduler"

# KAI's defaults (pkg/apis/kai/v1/schedulingshard_types.go, v0.17.0): higher runs first.
DEFAULT_PLUGIN_PRIORITIES: Final = {
    "predicates": 1900,
    "proportion": 1800,
    "priority": 1700,
    "nodeavailability": 1600,
    "resourcetype": 1500,
    "podaffinity": 1400,
    "elastic": 1300,
    "kubeflow": 1200,
    "ray": 1100,
    "subgrouporder": 1000,
    "taskorder": 900,
    "nominatednode": 800,
    "dynamicresources": 700,
    "minruntime": 600,
    "topology": 500,
    "snapshot": 400,
    "sg-nodelocalgreedy": 360,
    "sg-multinodegang": 350,
    "gpupack": 300,
    "gpuspread": 300,
    "nodeplacement": 200,
    "gpusharingorder": 100,
}
DEFAULT_ACTION_PRIORITIES: Final = {
    "allocate": 500,
    "consolidation": 400,
    "reclaim": 300,
    "preempt": 200,
    "stalegangeviction": 100,
}
SHARD_SPEC_KEYS: Final = (
    "args",
    "goMemLimitRatio",
    "goMemLimit",
    "placementStrategy",
    "partitionLabelValue",
    "queueDepthPerAction",
    "minRuntime",
    "kValue",
    "usageDBConfig",
    "scenarioSearchBudgets",
    "plugins",
    "actions",
)
CONFIG_SPEC_KEYS: Final = (
    "namespace",
    "global",
    "podGrouper",
    "binder",
    "admission",
    "scheduler",
    "queueController",
    "podGroupController",
    "nodeScaleAdjuster",
    "prometheus",
    "numaPlacementExporter",
)
_PLUGIN_KEYS: Final = ("enabled", "priority", "arguments")
_ACTION_KEYS: Final = ("enabled", "priority")
_MIN_RUNTIME_KEYS: Final = {
    "preemptMinRuntime": "defaultPreemptMinRuntime",
    "reclaimMinRuntime": "defaultReclaimMinRuntime",
}


@dataclass(frozen=True, slots=True)
class _Entry:
    """A plugin or action after the merge."""

    enabled: bool
    priority: int
    arguments: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class KaiConfig:
    """What of the Config this scheduler uses (its other sections configure KAI's deployments)."""

    namespace: str = DEFAULT_NAMESPACE
    node_pool_label_key: str = c.NODE_POOL_LABEL
    scheduler_name: str = c.SCHEDULER_NAME
    queue_label_key: str = c.QUEUE_LABEL
    prometheus_enabled: bool = False
    external_prometheus_url: str | None = None


@dataclass(frozen=True, slots=True)
class ResolvedShard:
    """One SchedulingShard as its scheduler runs it: the configuration document of its ConfigMap plus the
    options its flags set, its partition, and what to tell the user about it."""

    name: str
    partition_label_value: str | None
    document: dict[str, Any]
    node_pool_label_key: str | None
    notices: tuple[str, ...]


def config_from_operator_objects(
    shards: Sequence[Mapping[str, Any]], kai_config: Mapping[str, Any] | None, base: SchedulerConfig
) -> SchedulerConfig:
    """`base` with the shards the SchedulingShard objects define (`framework.config.shard_config(result,
    name)` gives each one's configuration) and the Config's node-pool label.

    With SchedulingShard objects, `base`'s own shards, actions, plugins, queue depths, usage and search
    budgets are not used: each shard's come from its object, as KAI's operator renders them; `base`
    keeps the options KAI passes as flags that a shard's `args` do not set. Without any, only the Config
    applies. Raises ConfigError, one line naming the object and field."""
    settings = read_kai_config(kai_config)
    notices = list(base.notices) + list(kai_config_notices(settings, kai_config))
    if not shards:
        return replace(base, node_pool_label_key=settings.node_pool_label_key, notices=tuple(notices))
    resolved = [resolve_shard(shard, settings) for shard in shards]
    for shard in resolved:
        notices.extend(shard.notices)
        if shard.node_pool_label_key not in (None, settings.node_pool_label_key):
            raise ConfigError(
                f"{SHARD_KIND} {shard.name}: spec.args.nodepool-label-key: {shard.node_pool_label_key!r} "
                f"differs from the node-pool label {settings.node_pool_label_key!r} (Config "
                f"{CONFIG_NAME} spec.global.nodePoolLabelKey); here every shard shares one, set it there"
            )
    specs = _shard_specs(resolved)
    neutral = replace(
        base,
        actions=SchedulerConfig().actions,
        tiers=SchedulerConfig().tiers,
        queue_depth_per_action={},
        usage_db=None,
        scenario_search_budgets=SchedulerConfig().scenario_search_budgets,
        node_pool_label_key=settings.node_pool_label_key,
        shards=(),
        notices=(),
    )
    default_shard = next((s for s in resolved if s.partition_label_value is None), None)
    top = parse_config({**config_document(neutral), **default_shard.document}) if default_shard else neutral
    return replace(top, shards=specs, notices=tuple(notices))


def read_kai_config(obj: Mapping[str, Any] | None) -> KaiConfig:
    """The parts of the `kai-config` Config this scheduler uses, KAI's defaults where it says nothing (no
    Config: all defaults)."""
    if obj is None:
        return KaiConfig()
    name = _object_name(obj, CONFIG_KIND)
    where = f"{CONFIG_KIND} {name}: spec"
    spec = _mapping(obj.get("spec"), where)
    _known_keys(spec, CONFIG_SPEC_KEYS, where)
    global_ = _mapping(spec.get("global"), f"{where}.global")
    prometheus = _mapping(spec.get("prometheus"), f"{where}.prometheus")
    namespace = spec.get("namespace") or DEFAULT_NAMESPACE
    if not isinstance(namespace, str):
        raise ConfigError(f"{where}.namespace: expected a namespace name, got {namespace!r}")
    try:
        label_key = parse_label_key(global_.get("nodePoolLabelKey"))
    except ConfigError as error:
        raise ConfigError(f"{where}.global.{error}") from None
    enabled = prometheus.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.prometheus.enabled: expected true or false, got {enabled!r}")
    url = prometheus.get("externalPrometheusUrl")
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"{where}.prometheus.externalPrometheusUrl: expected a URL, got {url!r}")
    return KaiConfig(
        namespace=namespace,
        node_pool_label_key=label_key,
        scheduler_name=_string(global_, "schedulerName", c.SCHEDULER_NAME, f"{where}.global"),
        queue_label_key=_string(global_, "queueLabelKey", c.QUEUE_LABEL, f"{where}.global"),
        prometheus_enabled=enabled,
        external_prometheus_url=url,
    )


def kai_config_notices(settings: KaiConfig, obj: Mapping[str, Any] | None) -> list[str]:
    """What of a Config this scheduler does not follow: another object than `kai-config` (KAI's operator
    reads only that one), a scheduler name (a flag of `run`) or queue label (read from kai.scheduler/queue
    only) other than KAI's default."""
    if obj is None:
        return []
    name = _object_name(obj, CONFIG_KIND)
    notices = []
    if name != CONFIG_NAME:
        notices.append(f"{CONFIG_KIND} {name}: KAI's operator reads only the Config named {CONFIG_NAME}")
    if settings.scheduler_name != c.SCHEDULER_NAME:
        notices.append(
            f"{CONFIG_KIND} {name}: spec.global.schedulerName {settings.scheduler_name!r}: the scheduler's "
            f"name is run's --scheduler-name (simulate schedules the pods of {c.SCHEDULER_NAME}); ignored"
        )
    if settings.queue_label_key != c.QUEUE_LABEL:
        notices.append(
            f"{CONFIG_KIND} {name}: spec.global.queueLabelKey {settings.queue_label_key!r}: this scheduler "
            f"reads a workload's queue from {c.QUEUE_LABEL}; ignored"
        )
    return notices


def resolve_shard(obj: Mapping[str, Any], settings: KaiConfig | None = None) -> ResolvedShard:
    """One SchedulingShard as KAI's operator renders it (defaults, merge, validation)."""
    settings = settings or KaiConfig()
    name = _object_name(obj, SHARD_KIND)
    where = f"{SHARD_KIND} {name}: spec"
    spec = _mapping(obj.get("spec"), where)
    _known_keys(spec, SHARD_SPEC_KEYS, where)
    _check_go_memory(spec, where)
    strategy = _mapping(spec.get("placementStrategy"), f"{where}.placementStrategy")
    _known_keys(strategy, ("gpu", "cpu"), f"{where}.placementStrategy")
    gpu = _strategy(strategy, "gpu", where)
    cpu = _strategy(strategy, "cpu", where)
    flags = read_flags(spec.get("args"), f"{where}.args")
    plugins = _merged(
        _default_plugins(spec, gpu, cpu, where), spec.get("plugins"), _PLUGIN_KEYS, f"{where}.plugins"
    )
    actions = _merged(_default_actions(gpu, cpu), spec.get("actions"), _ACTION_KEYS, f"{where}.actions")
    action_names = _enabled_in_order(actions)
    document: dict[str, Any] = {
        "actions": ", ".join(action_names),
        "tiers": [{"plugins": [_plugin_document(n, plugins[n]) for n in _enabled_in_order(plugins)]}],
        "scenarioSearchBudgets": search_budgets_document(
            parse_search_budgets(spec.get("scenarioSearchBudgets"), f"{where}.scenarioSearchBudgets")
        ),
        **flags.keys,
    }
    depths = _queue_depths(spec.get("queueDepthPerAction"), action_names, f"{where}.queueDepthPerAction")
    if depths:
        document["queueDepthPerAction"] = depths
    notices = list(flags.notices)
    usage = _usage_db(spec.get("usageDBConfig"), settings, f"{where}.usageDBConfig", notices)
    if usage is not None:
        document["usageDBConfig"] = usage
    try:
        parse_config(document)
    except ConfigError as error:  # what only the scheduler's reading of the result can see
        raise ConfigError(f"{SHARD_KIND} {name}: {error}") from None
    return ResolvedShard(
        name, _partition(spec, flags, where), document, flags.node_pool_label_key, tuple(notices)
    )


# --- defaults and the merge ---------------------------------------------------------------------------


def _default_plugins(spec: Mapping[str, Any], gpu: str, cpu: str, where: str) -> dict[str, _Entry]:
    pack = gpu == "binpack"
    plugins = {name: _Entry(True, priority, {}) for name, priority in DEFAULT_PLUGIN_PRIORITIES.items()}
    for name, enabled in (("gpupack", pack), ("gpusharingorder", pack), ("gpuspread", not pack)):
        plugins[name] = replace(plugins[name], enabled=enabled)
    k_value = spec.get("kValue")
    if k_value is not None:
        if isinstance(k_value, bool) or not isinstance(k_value, int | float) or not math.isfinite(k_value):
            raise ConfigError(f"{where}.kValue: expected a number, got {k_value!r}")
        plugins["proportion"] = replace(plugins["proportion"], arguments={"kValue": _go_float(k_value)})
    min_runtime = _mapping(spec.get("minRuntime"), f"{where}.minRuntime")
    _known_keys(min_runtime, tuple(_MIN_RUNTIME_KEYS), f"{where}.minRuntime")
    arguments = {}
    for key, argument in _MIN_RUNTIME_KEYS.items():
        if min_runtime.get(key) is not None:
            go_duration(min_runtime[key], f"{where}.minRuntime.{key}")
            arguments[argument] = min_runtime[key]
    plugins["minruntime"] = replace(plugins["minruntime"], arguments=arguments)
    plugins["nodeplacement"] = replace(plugins["nodeplacement"], arguments={"gpu": gpu, "cpu": cpu})
    return plugins


def _default_actions(gpu: str, cpu: str) -> dict[str, _Entry]:
    actions = {name: _Entry(True, priority) for name, priority in DEFAULT_ACTION_PRIORITIES.items()}
    # Consolidation exists to pack: a spread of either kind turns it off.
    actions["consolidation"] = replace(actions["consolidation"], enabled="spread" not in (gpu, cpu))
    return actions


def _merged(
    defaults: dict[str, _Entry], overrides: Any, keys: tuple[str, ...], where: str
) -> dict[str, _Entry]:
    merged = dict(defaults)
    for name, override in _mapping(overrides, where).items():
        at = f"{where}.{name}"
        override = _mapping(override, at)
        _known_keys(override, keys, at)
        entry = merged.get(str(name), _Entry(True, 0, {} if "arguments" in keys else None))
        enabled = override.get("enabled")
        if enabled is not None:
            if not isinstance(enabled, bool):
                raise ConfigError(f"{at}.enabled: expected true or false, got {enabled!r}")
            entry = replace(entry, enabled=enabled)
        priority = override.get("priority")
        if priority is not None:
            if isinstance(priority, bool) or not isinstance(priority, int):
                raise ConfigError(f"{at}.priority: expected an integer, got {priority!r}")
            entry = replace(entry, priority=priority)
        if override.get("arguments") is not None:
            entry = replace(entry, arguments=_arguments(override["arguments"], f"{at}.arguments"))
        merged[str(name)] = entry
    return merged


def _enabled_in_order(entries: Mapping[str, _Entry]) -> list[str]:
    """KAI's order: priority, highest first, then name."""
    return sorted((n for n, e in entries.items() if e.enabled), key=lambda n: (-entries[n].priority, n))


def _plugin_document(name: str, entry: _Entry) -> dict[str, Any]:
    return {"name": name, "arguments": dict(entry.arguments)} if entry.arguments else {"name": name}


def _arguments(value: Any, where: str) -> dict[str, str]:
    arguments = _mapping(value, where)
    for key, text in arguments.items():
        if not isinstance(text, str):
            raise ConfigError(f'{where}.{key}: expected a string, got {text!r} (quote it: "{text}")')
    return {str(k): v for k, v in arguments.items()}


# --- the other fields ---------------------------------------------------------------------------------


def _shard_specs(resolved: list[ResolvedShard]) -> tuple[ShardSpec, ...]:
    specs: list[ShardSpec] = []
    for shard in resolved:
        where = f"{SHARD_KIND} {shard.name}"
        check_shard_name(shard.name, f"{where}: metadata.name")
        check_partition_free(
            specs, shard.partition_label_value, f"{where}: spec.partitionLabelValue", SHARD_KIND
        )
        specs.append(ShardSpec(shard.name, shard.partition_label_value, None, shard.document))
    return tuple(specs)


def _partition(spec: Mapping[str, Any], flags: ShardFlags, where: str) -> str | None:
    # An `args` entry comes after the flag KAI's operator generates from the field, so it wins.
    if flags.partition_label_value is not None:
        return check_partition_label_value(flags.partition_label_value, f"{where}.args.partition-label-value")
    return check_partition_label_value(spec.get("partitionLabelValue"), f"{where}.partitionLabelValue")


def _strategy(strategy: Mapping[str, Any], key: str, where: str) -> str:
    value = strategy.get(key)
    if value is None:
        return "binpack"
    if value not in PLACEMENT_STRATEGIES:
        raise ConfigError(f"{where}.placementStrategy.{key}: expected binpack or spread, got {value!r}")
    return str(value)


def _queue_depths(value: Any, actions: list[str], where: str) -> dict[str, int]:
    depths = _mapping(value, where)
    for action, depth in depths.items():
        if action not in actions:
            raise ConfigError(
                f"{where}.{action}: not one of the shard's actions ({', '.join(actions)}), making "
                "queueDepthPerAction invalid"
            )
        if isinstance(depth, bool) or not isinstance(depth, int) or depth <= 0:
            raise ConfigError(f"{where}.{action}: expected a positive integer, got {depth!r}")
    return {str(k): v for k, v in depths.items()}


def _usage_db(value: Any, settings: KaiConfig, where: str, notices: list[str]) -> dict[str, Any] | None:
    """KAI's `getUsageDBConfig`: a Prometheus client without a connection string (nor an environment
    variable naming one) reads the Config's Prometheus: the one KAI deploys, else the external URL."""
    if value is None:
        return None
    usage = dict(_mapping(value, where))
    if usage.get("clientType") != "prometheus" or usage.get("connectionString"):
        return usage
    if usage.get("connectionStringEnvVar"):
        notices.append(
            f"{where}.connectionStringEnvVar: the connection string is read from the scheduler's "
            "environment, which this scheduler does not do; it keeps the usage history itself"
        )
        usage.pop("connectionStringEnvVar")
        return usage
    if settings.prometheus_enabled:
        usage["connectionString"] = f"http://usage-prometheus.{settings.namespace}.svc.cluster.local:9090"
    elif settings.external_prometheus_url is not None:
        usage["connectionString"] = settings.external_prometheus_url
    else:
        raise ConfigError(
            f"{where}: prometheus connection string not configured: either enable internal prometheus "
            f"(Config {CONFIG_NAME} spec.prometheus.enabled) or configure external TSDB connection URL "
            "(spec.prometheus.externalPrometheusUrl)"
        )
    return usage


def _check_go_memory(spec: Mapping[str, Any], where: str) -> None:
    """The Go runtime's memory limit (nothing here), checked as KAI's schema does."""
    ratio = spec.get("goMemLimitRatio")
    if ratio is not None and (
        isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 1
    ):
        raise ConfigError(f"{where}.goMemLimitRatio: expected a number above 0 and at most 1, got {ratio!r}")


def _go_float(value: float) -> str:
    """A number as Go's strconv.FormatFloat(v, 'f', -1, 64) writes it: shortest, no exponent."""
    text = repr(float(value))
    if "e" in text or "E" in text:
        text = f"{value:.20f}".rstrip("0")
    return text.removesuffix(".0").removesuffix(".")


# --- small readers -------------------------------------------------------------------------------------


def _object_name(obj: Mapping[str, Any], kind: str) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{kind}: metadata.name: required field is missing")
    return name


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {value!r}")
    return value


def _known_keys(value: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in value:
        if key not in known:
            close = did_you_mean(str(key), known)
            hint = f"did you mean {close}?" if close else f"known: {', '.join(known)}"
            raise ConfigError(f"{where}.{key}: unknown field ({hint})")


def _string(section: Mapping[str, Any], key: str, default: str, where: str) -> str:
    value = section.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.{key}: expected a non-empty string, got {value!r}")
    return value
