"""Which queue each job goes to, and the queues' GPU quotas.

By default a job goes to the queue named after a column of its row (openb: `qos`, Pollux:
`application`), lower-cased (`LS` -> `ls`; empty or absent: `default`). A mapping file
(`--queues MAPPING.yaml`) replaces that:

    rules:                       # the first rule whose `match` fits the row wins
    - match: {qos: LS}           # trace columns; a value or a list of values
      queue: serving
    - match: {qos: [BE, Burstable]}
      queue: batch
    - queue: other               # no `match`: every row
    queues:                      # optional, per queue: quota (GPUs), limit (-1: none), overQuotaWeight
      serving: {quota: 3000, overQuotaWeight: 2}

Without `rules`, the default rule names the queues (and `queues` sets their quotas). A row no rule
matches is an error. Quotas: a queue given one keeps it; the others share the rest of the
cluster's GPUs in proportion to the GPU-seconds their jobs ask for (GPUs x duration; a job without a
duration counts until the last job of the trace ends; with no time at all, by the GPUs they ask for), as
whole GPUs (largest remainders), so that the quotas add up to the cluster. A queue that asks for no GPUs
gets quota 0 (it still gets idle GPUs over quota, by its weight).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.traces.jobs import TraceJob
from kai_scheduler.traces.rows import Row

# The default rule's queue for a row whose column is empty or absent (the multigpu pod lists have no qos).
EMPTY_VALUE_QUEUE = "default"
# Kubernetes names: queues are also the namespaces of their pods.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class QueueSettings:
    quota: float | None = None  # None: a share of what the cluster has left, by demand
    limit: float = -1
    over_quota_weight: float = 1


@dataclass(frozen=True, slots=True)
class Rule:
    match: Mapping[str, frozenset[str]]
    queue: str

    def fits(self, row: Row) -> bool:
        return all(row.values.get(column, "").strip() in values for column, values in self.match.items())


@dataclass(frozen=True, slots=True)
class QueueMapping:
    """Rules (empty: one queue per value of `column`) and per-queue settings."""

    column: str
    rules: tuple[Rule, ...] = ()
    settings: Mapping[str, QueueSettings] | None = None
    source: str = ""

    def queue_of(self, row: Row) -> str:
        if not self.rules:
            name = row.text(self.column).lower() or EMPTY_VALUE_QUEUE
            if not _NAME.fullmatch(name):
                raise row.error(
                    f"{name!r} cannot name a queue (lower-case letters, digits and '-')", self.column
                )
            return name
        for rule in self.rules:
            if rule.fits(row):
                return rule.queue
        raise row.error(f"no rule of {self.source} matches this row")

    def setting(self, queue: str) -> QueueSettings:
        return (self.settings or {}).get(queue, QueueSettings())


@dataclass(frozen=True, slots=True)
class PlannedQueue:
    name: str
    quota: float
    limit: float
    over_quota_weight: float


def assign(jobs: Sequence[TraceJob], mapping: QueueMapping) -> list[str]:
    """Each job's queue, in the order of `jobs`."""
    return [mapping.queue_of(job.row) for job in jobs]


def plan_queues(
    jobs: Sequence[TraceJob], queues: Sequence[str], mapping: QueueMapping, capacity: int
) -> list[PlannedQueue]:
    """Every queue that has a job (and every queue the mapping file lists), by name, with its quota."""
    names = sorted(set(queues) | set(mapping.settings or {}))
    demand = dict.fromkeys(names, 0.0)
    gpus = dict.fromkeys(names, 0.0)
    end = max((job.arrival + (job.duration or 0.0) for job in jobs), default=0.0)
    for job, queue in zip(jobs, queues, strict=True):
        seconds = job.duration if job.duration is not None else end - job.arrival
        demand[queue] += job.pod.gpu_amount * job.replicas * seconds
        gpus[queue] += job.pod.gpu_amount * job.replicas
    if not any(demand.values()):  # no durations (all at second 0): by the GPUs asked for
        demand = gpus
    fixed = {name: mapping.setting(name).quota for name in names if mapping.setting(name).quota is not None}
    left = max(math.floor(capacity - sum(q for q in fixed.values() if q is not None)), 0)
    shared = _split(left, {name: demand[name] for name in names if name not in fixed})
    planned = []
    for name in names:
        setting = mapping.setting(name)
        quota = fixed.get(name)
        planned.append(
            PlannedQueue(
                name, shared[name] if quota is None else quota, setting.limit, setting.over_quota_weight
            )
        )
    return planned


def _split(total: int, weights: Mapping[str, float]) -> dict[str, int]:
    """`total` as whole numbers in proportion to `weights` (largest remainders; ties by name)."""
    weight_sum = sum(weights.values())
    if weight_sum <= 0:
        return dict.fromkeys(weights, 0)
    exact = {name: total * weight / weight_sum for name, weight in weights.items()}
    shares = {name: math.floor(value) for name, value in exact.items()}
    rest = total - sum(shares.values())
    for name in sorted(exact, key=lambda n: (shares[n] - exact[n], n))[:rest]:
        shares[name] += 1
    return shares


# --- the mapping file ----------------------------------------------------------------------------


def read_mapping(path: str, column: str) -> QueueMapping:
    """The mapping file at `path`; errors are one line naming the file and the key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(path, "no such file") from None
    except OSError as exc:
        raise ManifestError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ManifestError(
            path, f"invalid YAML: {exc.problem}", line=mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as exc:
        raise ManifestError(path, f"invalid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ManifestError(path, "expected a mapping with `rules` and/or `queues`")
    unknown = sorted(set(document) - {"rules", "queues"})
    if unknown:
        raise ManifestError(path, f"unknown key(s) {', '.join(map(str, unknown))} (known: rules, queues)")
    rules = _rules(path, document.get("rules"))
    settings = _settings(path, document.get("queues"))
    return QueueMapping(column, rules, settings, path)


def _rules(path: str, raw: Any) -> tuple[Rule, ...]:
    if raw is None:
        return ()  # only quotas: the default rule names the queues
    if not isinstance(raw, list) or not raw:
        raise ManifestError(
            path, "expected a list of rules, each `{match: {COLUMN: VALUE}, queue: NAME}`", field="rules"
        )
    rules = []
    for i, entry in enumerate(raw):
        where = f"rules[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"match", "queue"}:
            raise ManifestError(path, "expected `{match: {COLUMN: VALUE}, queue: NAME}`", field=where)
        queue = _queue_name(path, entry.get("queue"), f"{where}.queue")
        match = entry.get("match") or {}
        if not isinstance(match, dict):
            raise ManifestError(path, "expected a mapping of trace columns to values", field=f"{where}.match")
        values: dict[str, frozenset[str]] = {}
        for column, wanted in match.items():
            items = wanted if isinstance(wanted, list) else [wanted]
            if not items or any(isinstance(item, dict | list) or item is None for item in items):
                raise ManifestError(
                    path, "expected a value or a list of values", field=f"{where}.match.{column}"
                )
            values[str(column)] = frozenset(str(item) for item in items)
        rules.append(Rule(values, queue))
    return tuple(rules)


def _settings(path: str, raw: Any) -> dict[str, QueueSettings]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ManifestError(path, "expected a mapping of queue names to settings", field="queues")
    settings = {}
    for name, entry in raw.items():
        queue = _queue_name(path, name, "queues")
        where = f"queues.{queue}"
        entry = entry or {}
        if not isinstance(entry, dict) or set(entry) - {"quota", "limit", "overQuotaWeight"}:
            raise ManifestError(path, "expected `{quota: N, limit: N, overQuotaWeight: N}`", field=where)
        settings[queue] = QueueSettings(
            quota=_number(path, entry.get("quota"), f"{where}.quota", optional=True),
            limit=_number(path, entry.get("limit", -1), f"{where}.limit", minimum=-1),
            over_quota_weight=_number(path, entry.get("overQuotaWeight", 1), f"{where}.overQuotaWeight"),
        )
    return settings


def _queue_name(path: str, raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not _NAME.fullmatch(raw):
        raise ManifestError(
            path, f"expected a queue name (lower-case letters, digits and '-'), got {raw!r}", field=where
        )
    return raw


def _number(path: str, raw: Any, where: str, *, optional: bool = False, minimum: float = 0) -> Any:
    if raw is None and optional:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < minimum:
        raise ManifestError(path, f"expected a number of at least {minimum:g}, got {raw!r}", field=where)
    return float(raw)
