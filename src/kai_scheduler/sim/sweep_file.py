"""The file of `simulate --sweep FILE`: a base configuration and the values to vary, into one `Variant` per
combination (every value of each parameter with every value of the others, in the file's order).

```yaml
config: base-config.yaml              # KAI's format, relative to this file; default: KAI's default
vary:
  actions: ["allocate, reclaim", "allocate, consolidation, reclaim, preempt"]
  maxConsolidationPreemptees: [0, 16]         # any top-level key of the configuration
  placementStrategy: [binpack, spread]        # as KAI's operator applies it (with_placement_strategy)
  plugin.proportion.kValue: [0, 1]            # an argument of a plugin of the base configuration
  queue.team-a.resources.gpu.quota: [4, 8]    # a field of a Queue's spec in the input
```

Every value is checked on its own against the base configuration and the input before anything runs;
a mistake is a `ConfigError` of one line naming the file and the parameter (and the value's position).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from kai_scheduler.api.objects import ApiObject, Queue, QueueSpec
from kai_scheduler.controlplane.driver import check_config
from kai_scheduler.framework.config import (
    PLACEMENT_STRATEGIES,
    ConfigError,
    SchedulerConfig,
    config_document,
    parse_config,
    with_placement_strategy,
)
from kai_scheduler.sim.variants import Variant
from kai_scheduler.sim.workloads import Workload

_KEYS = ("config", "vary")
PLACEMENT = "placementStrategy"
PLUGIN_PREFIX = "plugin."
QUEUE_PREFIX = "queue."


@dataclass(frozen=True, slots=True)
class Sweep:
    source: str
    base: str | None  # the base configuration's file, as the sweep file names it
    parameters: tuple[str, ...]
    values: tuple[dict[str, Any], ...]  # each combination's values, by parameter
    variants: tuple[Variant, ...]
    notices: tuple[str, ...] = ()  # about the base configuration (flags that do nothing)


def load_sweep(path: str, objects: Sequence[ApiObject | Workload]) -> Sweep:
    """Read and check the sweep file at `path` against the input `objects` (for the queues it varies)."""
    document = _yaml(path, Path(path))
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping with 'vary' (and 'config')")
    unknown = sorted(str(key) for key in document if key not in _KEYS)
    if unknown:
        raise ConfigError(f"{path}: {unknown[0]}: unknown key (known: {', '.join(_KEYS)})")
    base_name, base, notices = _base(path, document.get("config"))
    vary = document.get("vary")
    if not isinstance(vary, dict) or not vary:
        raise ConfigError(f"{path}: vary: expected a mapping of parameter to a list of values")
    queues = {o.metadata.name: o for o in objects if isinstance(o, Queue)}
    parameters: list[_Parameter] = []
    for name, values in vary.items():
        where = f"{path}: vary.{name}"
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: expected a non-empty list of values")
        parameter = _parameter(str(name), where, base, queues)
        for i, value in enumerate(values):
            try:
                parameter.check(value)
            except ConfigError as error:
                raise ConfigError(f"{where}[{i}]: {error}") from None
        parameters.append(parameter)
    combinations = list(itertools.product(*(vary[p.name] for p in parameters)))
    variants = []
    value_rows = []
    for combination in combinations:
        chosen = dict(zip((p.name for p in parameters), combination, strict=True))
        label = ", ".join(f"{name}={_text(value)}" for name, value in chosen.items())
        try:
            variants.append(_variant(label, base, parameters, combination))
        except ConfigError as error:
            raise ConfigError(f"{path}: vary ({label}): {error}") from None
        value_rows.append(chosen)
    return Sweep(
        source=path,
        base=base_name,
        parameters=tuple(p.name for p in parameters),
        values=tuple(value_rows),
        variants=tuple(variants),
        notices=notices,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _yaml(name: str, path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{name}: {error.strerror or error}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        raise ConfigError(f"{name}:{where} invalid YAML") from None


def _base(path: str, name: Any) -> tuple[str | None, dict[str, Any], tuple[str, ...]]:
    """The base configuration's document with its actions and tiers written out (so that a plugin argument
    can be varied on a configuration that lists no tiers, KAI's default), and its notices."""
    if name is None:
        return None, config_document(SchedulerConfig()), ()
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}: config: expected the path of a scheduler configuration file")
    file = Path(path).parent / name
    document = _yaml(f"{path}: config: {name}", file)
    try:
        config = parse_config(document)
        check_config(config)
    except ConfigError as error:
        raise ConfigError(f"{path}: config: {name}: {error}") from None
    return name, config_document(config), tuple(f"{name}: {notice}" for notice in config.notices)


class _Parameter:
    """One thing the sweep varies; `apply` puts a value into the configuration document or the queues."""

    def __init__(self, name: str, base: dict[str, Any]) -> None:
        self.name = name
        self.base = base

    def apply(self, value: Any, document: dict[str, Any], queues: dict[str, Queue]) -> None:
        document[self.name] = value

    def check(self, value: Any) -> None:
        document = dict(self.base)
        queues: dict[str, Queue] = {}
        self.apply(value, document, queues)
        _config(document)


class _PluginArgument(_Parameter):
    def __init__(self, name: str, base: dict[str, Any], plugin: str, argument: str) -> None:
        super().__init__(name, base)
        self.plugin = plugin
        self.argument = argument

    def apply(self, value: Any, document: dict[str, Any], queues: dict[str, Queue]) -> None:
        tiers = [{"plugins": [dict(p) for p in tier["plugins"]]} for tier in document["tiers"]]
        for tier in tiers:
            for entry in tier["plugins"]:
                if entry["name"] == self.plugin:
                    entry["arguments"] = {**(entry.get("arguments") or {}), self.argument: value}
        document["tiers"] = tiers


class _Placement(_Parameter):
    def apply(self, value: Any, document: dict[str, Any], queues: dict[str, Queue]) -> None:
        if value not in PLACEMENT_STRATEGIES:
            raise ConfigError(f"expected one of {', '.join(PLACEMENT_STRATEGIES)}, got {value!r}")
        config = with_placement_strategy(parse_config(document), value)
        document.update(config_document(config))


class _QueueField(_Parameter):
    def __init__(self, name: str, base: dict[str, Any], queue: Queue, field: tuple[str, ...]) -> None:
        super().__init__(name, base)
        self.queue = queue
        self.field = field

    def apply(self, value: Any, document: dict[str, Any], queues: dict[str, Queue]) -> None:
        queue = queues.get(self.queue.metadata.name, self.queue)
        spec = queue.spec.model_dump(by_alias=True)
        *parents, last = self.field
        holder = spec
        for key in parents:
            holder = holder[key]
        holder[last] = value
        try:
            new_spec = QueueSpec.model_validate(spec)
        except ValidationError as error:
            problem = error.errors()[0]
            raise ConfigError(f"value {value!r}: {problem['msg']}") from None
        queues[queue.metadata.name] = queue.model_copy(update={"spec": new_spec})

    def check(self, value: Any) -> None:
        self.apply(value, {}, {})


def _parameter(name: str, where: str, base: dict[str, Any], queues: dict[str, Queue]) -> _Parameter:
    if name == PLACEMENT:
        return _Placement(name, base)
    if name.startswith(PLUGIN_PREFIX):
        plugin, _, argument = name[len(PLUGIN_PREFIX) :].partition(".")
        if not plugin or not argument:
            raise ConfigError(f"{where}: expected plugin.<plugin name>.<argument>")
        listed = [p["name"] for tier in base["tiers"] for p in tier["plugins"]]
        if plugin not in listed:
            raise ConfigError(f"{where}: no plugin {plugin!r} in the base configuration's tiers")
        return _PluginArgument(name, base, plugin, argument)
    if name.startswith(QUEUE_PREFIX):
        queue_name, _, field = name[len(QUEUE_PREFIX) :].partition(".")
        if not queue_name or not field:
            raise ConfigError(f"{where}: expected queue.<queue name>.<field of its spec>")
        queue = queues.get(queue_name)
        if queue is None:
            known = ", ".join(sorted(queues)) or "none"
            raise ConfigError(f"{where}: no Queue {queue_name!r} in the input (queues: {known})")
        path = tuple(field.split("."))
        holder: Any = queue.spec.model_dump(by_alias=True)
        for depth, key in enumerate(path):
            if not isinstance(holder, dict) or key not in holder:
                known = ", ".join(sorted(holder)) if isinstance(holder, dict) else "none"
                inside = ".".join(path[:depth]) or "spec"
                raise ConfigError(f"{where}: a Queue's {inside} has no field {key!r} (fields: {known})")
            holder = holder[key]
        if isinstance(holder, dict):
            raise ConfigError(f"{where}: {field} is a mapping; name one of its fields ({', '.join(holder)})")
        return _QueueField(name, base, queue, path)
    if name == "shards":
        raise ConfigError(f"{where}: shards cannot be varied (vary a shard's own file instead)")
    return _Parameter(name, base)


def _config(document: dict[str, Any]) -> SchedulerConfig:
    config = parse_config(document)
    check_config(config)  # unknown plugins and actions, bad plugin arguments
    return config


def _variant(
    label: str, base: dict[str, Any], parameters: Sequence[_Parameter], values: Sequence[Any]
) -> Variant:
    document = dict(base)
    queues: dict[str, Queue] = {}
    # The placement strategy last: it rewrites the tiers and actions the other values leave.
    order = sorted(range(len(parameters)), key=lambda i: isinstance(parameters[i], _Placement))
    for i in order:
        parameters[i].apply(values[i], document, queues)
    return Variant(label, _config(document), tuple(queues.values()))
