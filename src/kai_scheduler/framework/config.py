"""The scheduler configuration: KAI's format (`actions`, `tiers` of plugins with `arguments`) plus the
options that KAI passes as command-line flags.

```yaml
actions: "allocate, consolidation, reclaim, preempt, stalegangeviction"
tiers:
- plugins:
  - name: proportion
  - name: nodeplacement
    arguments: {gpu: binpack, cpu: binpack}
defaultStalenessGracePeriod: 60s
```
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kai_scheduler.api.durations import parse_duration

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
)
DEFAULT_PLUGIN_ARGUMENTS: dict[str, dict[str, str]] = {"nodeplacement": {"cpu": "binpack", "gpu": "binpack"}}


class ConfigError(ValueError):
    """A configuration problem, with the key it is about."""


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
    max_consolidation_preemptees: int = 16
    use_scheduling_signatures: bool = True
    full_hierarchy_fairness: bool = True
    allow_consolidating_reclaim: bool = True
    period: float = 1.0
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)

    def plugins(self) -> list[PluginOption]:
        return [plugin for tier in self.tiers for plugin in tier]

    def plugin(self, name: str) -> PluginOption | None:
        return next((plugin for plugin in self.plugins() if plugin.name == name), None)


PLACEMENT_STRATEGIES = ("binpack", "spread")


def with_placement_strategy(config: SchedulerConfig, strategy: str) -> SchedulerConfig:
    """What KAI's operator does for a placement strategy: `nodeplacement` binpacks or spreads GPUs and
    CPUs; with spread, GPUs are chosen by `gpuspread` instead of `gpupack`, and neither
    `gpusharingorder` nor the consolidation action runs (both exist to pack)."""
    if strategy not in PLACEMENT_STRATEGIES:
        raise ConfigError(f"placement strategy: expected binpack or spread, got {strategy!r}")
    tiers = []
    for tier in config.tiers:
        plugins = []
        for plugin in tier:
            if plugin.name == "nodeplacement":
                plugin = PluginOption(plugin.name, {**plugin.arguments, "gpu": strategy, "cpu": strategy})
            elif strategy == "spread" and plugin.name == "gpupack":
                plugin = PluginOption("gpuspread", plugin.arguments)
            elif strategy == "spread" and plugin.name == "gpusharingorder":
                continue
            plugins.append(plugin)
        tiers.append(tuple(plugins))
    actions = tuple(a for a in config.actions if not (strategy == "spread" and a == "consolidation"))
    return replace(config, tiers=tuple(tiers), actions=actions)


_KNOWN_KEYS = {
    "actions",
    "tiers",
    "defaultStalenessGracePeriod",
    "maxConsolidationPreemptees",
    "useSchedulingSignatures",
    "fullHierarchyFairness",
    "allowConsolidatingReclaim",
    "period",
    "queueDepthPerAction",
    "usageDBConfig",
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
    return SchedulerConfig(
        actions=_actions(document.get("actions")) or default.actions,
        tiers=_tiers(document.get("tiers")) or default.tiers,
        default_staleness_grace_period=_duration(document, "defaultStalenessGracePeriod", 60.0),
        max_consolidation_preemptees=_integer(document, "maxConsolidationPreemptees", 16, minimum=-1),
        use_scheduling_signatures=_boolean(document, "useSchedulingSignatures", True),
        full_hierarchy_fairness=_boolean(document, "fullHierarchyFairness", True),
        allow_consolidating_reclaim=_boolean(document, "allowConsolidatingReclaim", True),
        period=_positive_duration(document, "period", 1.0),
        queue_depth_per_action=_queue_depths(document.get("queueDepthPerAction")),
    )


def _actions(value: Any) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if not isinstance(value, str):
        raise ConfigError("actions: expected a comma-separated string such as 'allocate, reclaim'")
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _tiers(value: Any) -> tuple[tuple[PluginOption, ...], ...]:
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
            plugins.append(PluginOption(plugin["name"], dict(arguments)))
        tiers.append(tuple(plugins))
    return tuple(tiers)


def _duration(document: dict[str, Any], key: str, default: float) -> float:
    value = document.get(key)
    if value is None:
        return default
    try:
        return parse_duration(str(value))
    except ValueError as error:
        raise ConfigError(f"{key}: {error}") from None


def _positive_duration(document: dict[str, Any], key: str, default: float) -> float:
    value = _duration(document, key, default)
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


def _queue_depths(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
        for k, v in value.items()
    ):
        raise ConfigError("queueDepthPerAction: expected a mapping of action name to a positive integer")
    return dict(value)
