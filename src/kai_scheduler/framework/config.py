"""The scheduler configuration: KAI's format (`actions`, `tiers` of plugins with `arguments`, and the
disable flags KAI accepts and ignores) plus the options that KAI passes as command-line flags; its
`usageDBConfig` section (time-based fairness) is read and written by `usage_config`.

```yaml
actions: "allocate, consolidation, reclaim, preempt, stalegangeviction"
tiers:
- plugins:
  - name: proportion
  - name: priority
    disableJobOrder: true   # accepted and ignored, as KAI does (EXTENSION_POINTS)
  - name: nodeplacement
    arguments: {gpu: binpack, cpu: binpack}
defaultStalenessGracePeriod: 60s
usageDBConfig:            # time-based fairness (off without this key)
  clientType: prometheus
  connectionString: http://prometheus-operated.kai-scheduler:9090   # live mode: read usage from it
  usageParams: {windowSize: 1w, windowType: sliding, halfLifePeriod: 1d}
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

from kai_scheduler.api.constants import NODE_POOL_LABEL
from kai_scheduler.framework.admission_config import AdmissionGating as AdmissionGating
from kai_scheduler.framework.admission_config import (
    admission_gating_document,
    parse_admission_gating,
    with_ungate_last,
)
from kai_scheduler.framework.config_values import ConfigError as ConfigError
from kai_scheduler.framework.config_values import duration, duration_text
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets as ScenarioSearchBudgets
from kai_scheduler.framework.search_budgets import parse_search_budgets, search_budgets_document
from kai_scheduler.framework.shard_config import ShardSpec, parse_label_key, parse_shards, shard_document
from kai_scheduler.framework.usage_config import CLIENT_TYPES as CLIENT_TYPES
from kai_scheduler.framework.usage_config import USAGE_METRIC_DEFAULTS as USAGE_METRIC_DEFAULTS
from kai_scheduler.framework.usage_config import UsageDbConfig as UsageDbConfig
from kai_scheduler.framework.usage_config import parse_usage_db_config, usage_db_config_document
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.releasing import DEFAULT_STUCK_IN_RELEASING_THRESHOLD

DEFAULT_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
DEFAULT_PLUGINS = (
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
    # KAI v0.17's victim search generators, last as in its standalone default.
    "sg-nodelocalgreedy",
    "sg-multinodegang",
)
DEFAULT_PLUGIN_ARGUMENTS: dict[str, dict[str, str]] = {"nodeplacement": {"cpu": "binpack", "gpu": "binpack"}}


# Per-extension-point flags of a plugin entry. KAI's `PluginOption` inherits `disable<Point>` from kube-batch
# and decodes them, but nothing in KAI ever reads them: they change nothing. Here too they are accepted
# (also in Volcano's spellings `enable<Point>` / `enabled<Point>`), checked to be booleans, and ignored
# with a notice, so that a configuration written for KAI runs unchanged and its author learns the flag
# has no effect.
EXTENSION_POINTS: Final = (
    "JobOrder",
    "TaskOrder",
    "QueueOrder",
    "Predicate",
    "NodeOrder",
    "Allocatable",
    "Overused",
    "Reclaimable",
    "Preemptable",
    "Preemptive",
    "Victim",
    "JobStarving",
    "JobReady",
    "JobPipelined",
    "JobEnqueued",
    "Hierarchy",
    "NamespaceOrder",
    "ClusterOrder",
    "BestNode",
    "TargetJob",
    "ReservedNodes",
)
_FLAG_PREFIXES: Final = ("enabled", "enable", "disable")


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...] = DEFAULT_ACTIONS
    tiers: tuple[tuple[PluginOption, ...], ...] = (
        tuple(PluginOption(name, DEFAULT_PLUGIN_ARGUMENTS.get(name, {})) for name in DEFAULT_PLUGINS),
    )
    default_staleness_grace_period: float = 60.0
    # How long after its deletionTimestamp a running pod is stuck in releasing (KAI's
    # `--stuck-in-releasing-threshold`; `model.releasing`).
    stuck_in_releasing_threshold: float = DEFAULT_STUCK_IN_RELEASING_THRESHOLD
    max_consolidation_preemptees: int = 16
    use_scheduling_signatures: bool = True
    full_hierarchy_fairness: bool = True
    allow_consolidating_reclaim: bool = True
    period: float = 1.0
    # The simulator's answer to an evicted pod that no workload of its input owns (`EVICTED_UNOWNED_PODS`):
    # recreated pending under its name (the simulate contract's default), or deleted, as a cluster does.
    # Live mode has no choice to make: an eviction there is a delete.
    evicted_unowned_pods: str = "recreate"
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)
    usage_db: UsageDbConfig | None = None
    # How long the victim search may look (KAI's `scenarioSearchBudgets`, its defaults unless set).
    scenario_search_budgets: ScenarioSearchBudgets = field(default_factory=ScenarioSearchBudgets)
    # Node pools (`shard_config`): the partition label and the scheduling shards (none: one scheduler,
    # KAI's default shard: the nodes, queues and PodGroups without the label).
    node_pool_label_key: str = NODE_POOL_LABEL
    shards: tuple[ShardSpec, ...] = ()
    # Queue admission gating (`admission_config`): off unless the document switches it on.
    admission_gating: AdmissionGating = field(default_factory=AdmissionGating)
    # What a person should know about the document that is not an error (flags that do nothing), one
    # line each naming where; not part of the configuration itself.
    notices: tuple[str, ...] = field(default=(), compare=False)

    def plugins(self) -> list[PluginOption]:
        return [plugin for tier in self.tiers for plugin in tier]

    def plugin(self, name: str) -> PluginOption | None:
        return next((plugin for plugin in self.plugins() if plugin.name == name), None)


PLACEMENT_STRATEGIES = ("binpack", "spread")
EVICTED_UNOWNED_PODS = ("recreate", "delete")


def with_placement_strategy(
    config: SchedulerConfig, strategy: str, cpu: str | None = None
) -> SchedulerConfig:
    """What KAI's operator does for a placement strategy, GPUs' `strategy` and CPUs' `cpu` (the same when
    not given, as KAI's chart sets both): `nodeplacement` places nodes by each; a GPU spread chooses
    devices by `gpuspread` instead of `gpupack` and drops `gpusharingorder`; the consolidation action runs
    only when neither is spread (both exist to pack)."""
    cpu = strategy if cpu is None else cpu
    for what, value in (("gpu", strategy), ("cpu", cpu)):
        if value not in PLACEMENT_STRATEGIES:
            raise ConfigError(f"placement strategy {what}: expected binpack or spread, got {value!r}")
    gpu_spread = strategy == "spread"
    tiers = []
    for tier in config.tiers:
        plugins = []
        for plugin in tier:
            if plugin.name == "nodeplacement":
                plugin = replace(plugin, arguments={**plugin.arguments, "gpu": strategy, "cpu": cpu})
            elif gpu_spread and plugin.name == "gpupack":
                plugin = replace(plugin, name="gpuspread")
            elif gpu_spread and plugin.name == "gpusharingorder":
                continue
            plugins.append(plugin)
        tiers.append(tuple(plugins))
    spread = "spread" in (strategy, cpu)
    actions = tuple(a for a in config.actions if not (spread and a == "consolidation"))
    return replace(config, tiers=tuple(tiers), actions=actions)


_KNOWN_KEYS = {
    "actions",
    "tiers",
    "defaultStalenessGracePeriod",
    "stuckInReleasingThreshold",
    "maxConsolidationPreemptees",
    "useSchedulingSignatures",
    "fullHierarchyFairness",
    "allowConsolidatingReclaim",
    "period",
    "evictedUnownedPods",
    "queueDepthPerAction",
    "usageDBConfig",
    "scenarioSearchBudgets",
    "nodePoolLabelKey",
    "shards",
    "queueAdmissionGating",
}


def parse_config(document: Any) -> SchedulerConfig:
    """Validate a configuration document; empty `actions` / `tiers` fall back to the defaults (as KAI)."""
    if document is None:
        return SchedulerConfig()
    if not isinstance(document, dict):
        raise ConfigError("the configuration must be a mapping")
    unknown = sorted(set(document) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown key (known: {', '.join(sorted(_KNOWN_KEYS))})")
    default = SchedulerConfig()
    notices: list[str] = []
    gating = parse_admission_gating(document.get("queueAdmissionGating"))
    config = SchedulerConfig(
        actions=with_ungate_last(_actions(document.get("actions")) or default.actions, gating),
        tiers=_tiers(document.get("tiers"), notices) or default.tiers,
        default_staleness_grace_period=duration(document, "defaultStalenessGracePeriod", 60.0),
        stuck_in_releasing_threshold=_stuck_threshold(document),
        max_consolidation_preemptees=_integer(document, "maxConsolidationPreemptees", 16, minimum=-1),
        use_scheduling_signatures=_boolean(document, "useSchedulingSignatures", True),
        full_hierarchy_fairness=_boolean(document, "fullHierarchyFairness", True),
        allow_consolidating_reclaim=_boolean(document, "allowConsolidatingReclaim", True),
        period=_positive_duration(document, "period", 1.0),
        evicted_unowned_pods=_choice(document, "evictedUnownedPods", EVICTED_UNOWNED_PODS),
        queue_depth_per_action=_queue_depths(document.get("queueDepthPerAction")),
        usage_db=parse_usage_db_config(document.get("usageDBConfig")),
        scenario_search_budgets=parse_search_budgets(document.get("scenarioSearchBudgets")),
        node_pool_label_key=parse_label_key(document.get("nodePoolLabelKey")),
        shards=parse_shards(document.get("shards"), PLACEMENT_STRATEGIES),
        admission_gating=gating,
        notices=tuple(notices),
    )
    for shard in config.shards:
        shard_config(config, shard.name)  # each shard's own keys are checked now, not when it starts
    return config


def shard_config(config: SchedulerConfig, name: str) -> SchedulerConfig:
    """The configuration the shard `name` runs: the document's keys, then the shard's `config` keys over
    them, then its placement strategy (KAI's operator writes each shard's ConfigMap the same way)."""
    shard = next((s for s in config.shards if s.name == name), None)
    if shard is None:
        known = ", ".join(s.name for s in config.shards) or "none configured"
        raise ConfigError(f"shard {name!r}: no such shard (shards: {known})")
    if not shard.config and shard.placement_strategy is None:
        resolved = config
    else:
        document = {**config_document(config), **shard.config}
        document.pop("shards", None)
        try:
            resolved = parse_config(document)
        except ConfigError as error:
            raise ConfigError(f"shards[{config.shards.index(shard)}].config: {error}") from None
        if shard.placement_strategy is not None:
            resolved = with_placement_strategy(resolved, shard.placement_strategy)
    return replace(resolved, shards=(), notices=config.notices)


def shard_partition(config: SchedulerConfig, name: str) -> Partition:
    shard = next(s for s in config.shards if s.name == name)
    return shard.partition(config.node_pool_label_key)


def _actions(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if not isinstance(value, str):
        raise ConfigError("actions: expected a comma-separated string such as 'allocate, reclaim'")
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _tiers(value: Any, notices: list[str]) -> tuple[tuple[PluginOption, ...], ...]:
    if value is None or value == []:
        return ()
    if not isinstance(value, list):
        raise ConfigError("tiers: expected a list of {plugins: [...]}")
    tiers = []
    for i, tier in enumerate(value):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfigError(f"tiers[{i}]: expected a mapping with a 'plugins' list")
        plugins = []
        for j, plugin in enumerate(tier["plugins"]):
            where = f"tiers[{i}].plugins[{j}]"
            if not isinstance(plugin, dict) or not isinstance(plugin.get("name"), str) or not plugin["name"]:
                raise ConfigError(f"{where}: expected a mapping with a 'name'")
            arguments = plugin.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise ConfigError(f"{where}.arguments: expected a mapping")
            notices.extend(_ignored_flags(plugin, where))
            plugins.append(PluginOption(plugin["name"], dict(arguments)))
        tiers.append(tuple(plugins))
    return tuple(tiers)


def _ignored_flags(plugin: dict[Any, Any], where: str) -> list[str]:
    """A notice for each extension-point flag of a plugin entry (see EXTENSION_POINTS); any other key is an
    error. KAI decodes the entry with Go's default (non-strict) YAML decoding, which ignores keys its
    struct lacks, so there a misspelt key (`disableJobOrdr`) is silently nothing; rejecting it loses
    nothing a KAI configuration can express and reports the typo, as unknown top-level keys are."""
    notices = []
    for key, value in plugin.items():
        if key in ("name", "arguments"):
            continue
        if not _is_flag(key):
            raise ConfigError(
                f"{where}.{key}: unknown key (a plugin entry has name, arguments and "
                "disable<Point>/enable<Point>/enabled<Point> flags; points: "
                f"{', '.join(EXTENSION_POINTS)})"
            )
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{where}.{key}: expected true or false, got {value!r}")
        notices.append(f"{where}.{key}: KAI reads this flag but never applies it; it has no effect")
    return notices


def _is_flag(key: Any) -> bool:
    if not isinstance(key, str):
        return False
    return any(key.startswith(prefix) and key[len(prefix) :] in EXTENSION_POINTS for prefix in _FLAG_PREFIXES)


def _positive_duration(document: dict[str, Any], key: str, default: float) -> float:
    value = duration(document, key, default)
    if value <= 0:
        raise ConfigError(f"{key}: must be positive, got {document.get(key)!r}")
    return value


def _integer(document: dict[str, Any], key: str, default: int, *, minimum: int) -> int:
    value = document.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _boolean(document: dict[str, Any], key: str, default: bool) -> bool:
    value = document.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _choice(document: dict[str, Any], key: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first when absent)."""
    value = document.get(key, choices[0])
    if value not in choices:
        raise ConfigError(f"{key}: expected {' or '.join(choices)}, got {value!r}")
    return str(value)


def _queue_depths(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
        for k, v in value.items()
    ):
        raise ConfigError("queueDepthPerAction: expected a mapping of action name to a positive integer")
    return dict(value)


def _stuck_threshold(document: dict[str, Any]) -> float:
    """KAI takes a threshold that is not positive as its default, 2m."""
    threshold = duration(document, "stuckInReleasingThreshold", DEFAULT_STUCK_IN_RELEASING_THRESHOLD)
    return threshold if threshold > 0 else DEFAULT_STUCK_IN_RELEASING_THRESHOLD


def config_document(config: SchedulerConfig) -> dict[str, Any]:
    """`config` in KAI's format, as `parse_config` reads it back (`parse_config(config_document(c)) == c`):
    `actions` and `tiers` always, the other options only where they differ from the defaults."""
    default = SchedulerConfig()
    document: dict[str, Any] = {
        "actions": ", ".join(config.actions),
        "tiers": [{"plugins": [_plugin_document(p) for p in tier]} for tier in config.tiers],
    }
    if config.default_staleness_grace_period != default.default_staleness_grace_period:
        document["defaultStalenessGracePeriod"] = duration_text(config.default_staleness_grace_period)
    if config.stuck_in_releasing_threshold != default.stuck_in_releasing_threshold:
        document["stuckInReleasingThreshold"] = duration_text(config.stuck_in_releasing_threshold)
    if config.max_consolidation_preemptees != default.max_consolidation_preemptees:
        document["maxConsolidationPreemptees"] = config.max_consolidation_preemptees
    if config.use_scheduling_signatures != default.use_scheduling_signatures:
        document["useSchedulingSignatures"] = config.use_scheduling_signatures
    if config.full_hierarchy_fairness != default.full_hierarchy_fairness:
        document["fullHierarchyFairness"] = config.full_hierarchy_fairness
    if config.allow_consolidating_reclaim != default.allow_consolidating_reclaim:
        document["allowConsolidatingReclaim"] = config.allow_consolidating_reclaim
    if config.period != default.period:
        document["period"] = duration_text(config.period)
    if config.evicted_unowned_pods != default.evicted_unowned_pods:
        document["evictedUnownedPods"] = config.evicted_unowned_pods
    if config.queue_depth_per_action:
        document["queueDepthPerAction"] = dict(config.queue_depth_per_action)
    if config.usage_db is not None:
        document["usageDBConfig"] = usage_db_config_document(config.usage_db)
    if config.scenario_search_budgets != default.scenario_search_budgets:
        document["scenarioSearchBudgets"] = search_budgets_document(config.scenario_search_budgets)
    if config.node_pool_label_key != default.node_pool_label_key:
        document["nodePoolLabelKey"] = config.node_pool_label_key
    if config.shards:
        document["shards"] = [shard_document(shard) for shard in config.shards]
    if config.admission_gating != default.admission_gating:
        document["queueAdmissionGating"] = admission_gating_document(config.admission_gating)
    return document


def _plugin_document(plugin: PluginOption) -> dict[str, Any]:
    document: dict[str, Any] = {"name": plugin.name}
    if plugin.arguments:
        document["arguments"] = dict(plugin.arguments)
    return document
