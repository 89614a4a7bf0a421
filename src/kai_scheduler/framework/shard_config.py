"""Scheduling shards in the scheduler configuration (KAI's `SchedulingShard`, one scheduler per node pool).

```yaml
nodePoolLabelKey: kai.scheduler/node-pool   # the partition label (KAI's global.nodePoolLabelKey)
shards:
- name: default                  # no partitionLabelValue: the nodes, queues and PodGroups without the label
- name: gpu-a100
  partitionLabelValue: a100      # those labelled kai.scheduler/node-pool=a100
  placementStrategy: spread      # binpack or spread, as KAI's SchedulingShard.placementStrategy
  config:                        # this shard's configuration keys, over the document's own
    queueDepthPerAction: {allocate: 25}
```

No `shards`: one scheduler, KAI's default shard. `config_for_shard` resolves one shard's configuration;
`config.parse_config` checks every shard's when it reads the document.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.framework.config_values import ConfigError
from kai_scheduler.model.partition import Partition

DEFAULT_SHARD: Final = "default"
SHARD_KEYS: Final = ("name", "partitionLabelValue", "placementStrategy", "config")
# A shard's name becomes part of Deployment and Lease names (`<scheduler>-<shard>`): a DNS label.
_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# A label value (Kubernetes' syntax), non-empty: an empty value is KAI's default shard, written by leaving
# the key out.
_LABEL_KEY: Final = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """One scheduling shard: its name, its partition's label value (None: the default shard, the objects
    without the label), its placement strategy and its own configuration keys (a document)."""

    name: str
    partition_label_value: str | None = None
    placement_strategy: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def partition(self, label_key: str) -> Partition:
        return Partition(label_key, self.partition_label_value)


def parse_label_key(value: Any) -> str:
    if value is None:
        return c.NODE_POOL_LABEL
    if not isinstance(value, str) or not _LABEL_KEY.match(value):
        raise ConfigError(
            f"nodePoolLabelKey: expected a label key such as {c.NODE_POOL_LABEL}, got {value!r}"
        )
    return value


def parse_shards(value: Any, placement_strategies: tuple[str, ...]) -> tuple[ShardSpec, ...]:
    """The `shards` list: names unique, label values unique (at most one default shard)."""
    if value is None or value == []:
        return ()
    if not isinstance(value, list):
        raise ConfigError("shards: expected a list of {name, partitionLabelValue, placementStrategy, config}")
    shards: list[ShardSpec] = []
    for i, entry in enumerate(value):
        where = f"shards[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected a mapping with a 'name'")
        unknown = sorted(str(k) for k in entry if k not in SHARD_KEYS)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(SHARD_KEYS)})")
        name = check_shard_name(entry.get("name"), f"{where}.name")
        label_value = check_partition_label_value(
            entry.get("partitionLabelValue"), f"{where}.partitionLabelValue"
        )
        strategy = entry.get("placementStrategy")
        if strategy is not None and strategy not in placement_strategies:
            raise ConfigError(
                f"{where}.placementStrategy: expected {' or '.join(placement_strategies)}, got {strategy!r}"
            )
        overrides = entry.get("config") or {}
        if not isinstance(overrides, dict):
            raise ConfigError(f"{where}.config: expected a mapping of configuration keys")
        if "shards" in overrides or "nodePoolLabelKey" in overrides:
            raise ConfigError(f"{where}.config: shards and nodePoolLabelKey are the whole document's")
        if any(other.name == name for other in shards):
            raise ConfigError(f"{where}.name: {name!r} is named twice")
        check_partition_free(shards, label_value, where)
        shards.append(ShardSpec(name, label_value, strategy, dict(overrides)))
    return tuple(shards)


def check_shard_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 40:
        raise ConfigError(f"{where}: expected a lowercase DNS label of at most 40 characters, got {name!r}")
    return name


def check_partition_label_value(value: Any, where: str) -> str | None:
    """A label value, None for the default shard (as KAI: an empty value is the default shard)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _LABEL_VALUE.match(value) or len(value) > 63:
        raise ConfigError(f"{where}: expected a label value, got {value!r}")
    return value


def check_partition_free(
    shards: Sequence[ShardSpec], label_value: str | None, where: str, shard: str = "shard"
) -> None:
    """No other shard serves the partition `label_value` (`shard`: how messages name the other)."""
    for other in shards:
        if other.partition_label_value == label_value:
            what = f"partitionLabelValue {label_value!r}" if label_value else "the default partition"
            raise ConfigError(f"{where}: {what} is served by {shard} {other.name!r} already")


def shard_document(shard: ShardSpec) -> dict[str, Any]:
    document: dict[str, Any] = {"name": shard.name}
    if shard.partition_label_value is not None:
        document["partitionLabelValue"] = shard.partition_label_value
    if shard.placement_strategy is not None:
        document["placementStrategy"] = shard.placement_strategy
    if shard.config:
        document["config"] = dict(shard.config)
    return document
