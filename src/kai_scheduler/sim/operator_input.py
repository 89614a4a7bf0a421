"""KAI's operator objects in the simulator's input: `SchedulingShard` and `Config` (`kai.scheduler/v1`,
cluster-scoped) define the scheduling shards and their configuration, as KAI's operator renders them
(`framework.operator_objects`).

They describe the cluster as KAI runs it, so they win over the configuration file: with SchedulingShard
objects in the input, each shard's actions, plugins and the options its object sets come from the object,
and the file's `shards` (our shorthand for the same thing), `actions`, `tiers`, `queueDepthPerAction`,
`usageDBConfig` and `scenarioSearchBudgets` are not used, which a warning says in one line; the file's
other options (`period`, the flags' defaults) still apply. A Config alone sets the node-pool label.

A KAI install has one SchedulingShard, `default`, with no partition: a run with only that one is KAI's
default shard exactly as a run without shards (one scheduler; the objects without the label when some
carry it), with that shard's configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.controlplane.driver import check_config
from kai_scheduler.framework.config import ConfigError, SchedulerConfig, shard_config
from kai_scheduler.framework.operator_objects import (
    API_VERSION,
    CONFIG_KIND,
    SHARD_KIND,
    config_from_operator_objects,
)
from kai_scheduler.framework.shard_config import DEFAULT_SHARD

OPERATOR_KINDS: Final = frozenset({SHARD_KIND, CONFIG_KIND})
# The file's keys that SchedulingShard objects replace, by SchedulerConfig field.
_REPLACED: Final = {
    "shards": "shards",
    "actions": "actions",
    "tiers": "tiers",
    "queue_depth_per_action": "queueDepthPerAction",
    "usage_db": "usageDBConfig",
    "scenario_search_budgets": "scenarioSearchBudgets",
}


@dataclass(frozen=True, slots=True)
class OperatorObject:
    """A SchedulingShard or Config of the input, as written, and where it is (`source`, 1-based
    `document`, `item` in a List, `line`)."""

    kind: str
    name: str
    manifest: dict[str, Any]
    source: str
    document: int
    item: int | None
    line: int | None

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.name}"

    def error(self, message: str, field: str | None = None) -> ManifestError:
        return ManifestError(
            self.source,
            message,
            document=self.document,
            item=self.item,
            line=self.line,
            object_ref=self.ref,
            field=field,
        )


def is_operator_document(doc: Any) -> bool:
    """A SchedulingShard or Config document (of any apiVersion: `operator_object` checks it)."""
    return isinstance(doc, dict) and doc.get("kind") in OPERATOR_KINDS


def operator_object(
    doc: dict[str, Any], source: str, document: int, item: int | None, line: int
) -> OperatorObject:
    """The object, its apiVersion and name checked (its spec is `framework.operator_objects`' to read)."""
    kind = str(doc["kind"])
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    where = OperatorObject(kind, name if isinstance(name, str) else "", doc, source, document, item, line)
    if doc.get("apiVersion") != API_VERSION:
        raise ManifestError(
            source,
            f"unsupported apiVersion {doc.get('apiVersion')} for kind {kind}; expected {API_VERSION}",
            document=document,
            item=item,
            line=line,
            field="apiVersion",
        )
    if not isinstance(name, str) or not name:
        raise where.error("required field is missing", "metadata.name")
    return where


def with_operator_objects(
    config: SchedulerConfig, objects: Sequence[OperatorObject], config_path: str | None
) -> tuple[SchedulerConfig, list[str]]:
    """`config` with the input's operator objects applied, and the warnings to show (what the objects
    replace of the file, flags and fields without a counterpart here). Errors are ManifestErrors naming
    the object's file, document and field."""
    if not objects:
        return config, []
    shards = [o for o in objects if o.kind == SHARD_KIND]
    configs = [o for o in objects if o.kind == CONFIG_KIND]
    if len(configs) > 1:
        raise configs[1].error(f"a second Config (the first is {configs[0].name}): KAI reads one, kai-config")
    before = len(config.notices)
    try:
        result = config_from_operator_objects(
            [o.manifest for o in shards], configs[0].manifest if configs else None, config
        )
    except ConfigError as error:
        raise _located(str(error), objects) from None
    for shard in shards:
        try:
            check_config(shard_config(result, shard.name))
        except ConfigError as error:
            raise shard.error(
                f"the scheduler cannot run this shard's configuration: {error}", "spec"
            ) from None
    warnings = [f"{_ref_location(line, objects)}{line}" for line in result.notices[before:]]
    if shards:
        replaced = _replaced_keys(config)
        if replaced:
            names = ", ".join(o.name for o in shards)
            warnings.insert(
                0,
                f"{config_path or '--config'}: {', '.join(replaced)} not used: the input's SchedulingShard "
                f"objects ({names}) define the shards and each one's configuration, as KAI's operator does",
            )
    return _kai_default_shard(result), warnings


def _kai_default_shard(config: SchedulerConfig) -> SchedulerConfig:
    """KAI's chart's one shard, `default` without a partition, is what a run without shards is: one
    scheduler (the default partition only when some object carries the label), with its configuration."""
    if len(config.shards) != 1:
        return config
    only = config.shards[0]
    if only.name != DEFAULT_SHARD or only.partition_label_value is not None:
        return config
    return replace(shard_config(config, only.name), notices=config.notices)


def _replaced_keys(config: SchedulerConfig) -> list[str]:
    default = SchedulerConfig()
    return [key for field, key in _REPLACED.items() if getattr(config, field) != getattr(default, field)]


def _located(message: str, objects: Sequence[OperatorObject]) -> ManifestError:
    """A `Kind name: field: problem` error at the object's place in the input."""
    for obj in objects:
        prefix = f"{obj.ref}: "
        if message.startswith(prefix):
            field, _, problem = message[len(prefix) :].partition(": ")
            return obj.error(problem, field) if problem else obj.error(field)
    return ManifestError(objects[0].source, message, document=objects[0].document, line=objects[0].line)


def _ref_location(notice: str, objects: Sequence[OperatorObject]) -> str:
    for obj in objects:
        if notice.startswith(f"{obj.ref}: "):
            where = f"{obj.source} document {obj.document}"
            return f"{where}, item {obj.item}: " if obj.item is not None else f"{where}: "
    return ""
