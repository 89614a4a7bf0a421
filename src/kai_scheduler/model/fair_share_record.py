"""The fair-share division as the scheduler took it, step by step (issue #25, "fair share explained").

The proportion plugin's division (`plugins/proportion/division.py`) tells a `DivisionRecorder`, when it is
given one, every step as it takes it: per resource, each level of the queue tree (the parent's share and,
for each sibling, its quota, limit, over-quota weight, request, usage and what the quota phase gave it),
each priority bucket of the over-quota phase, each round (the amount offered, each candidate's weight,
offer and grant) and the hand-out of the leftovers. The result, a `FairShareRecord`, holds the numbers the
cycle used, not a re-computation: `kubectl kai fairshare` (through the scheduler's plugin server) and
`simulate --explain-fairshare` show it (`fair_share_text.py` renders it).

It lives in the model, below the plugin that fills it and the edges that show it. Amounts are in the
scheduler's units (cpu in millicores, memory in bytes); `as_json` writes the contract's (cpu in cores)
and `from_json` reads them back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kai_scheduler.api.objects import is_unlimited

# What one unit of the JSON is in the scheduler's units, per resource (cpu: cores there, millicores here).
_JSON_SCALE: Final = {"gpu": 1.0, "cpu": 1000.0, "memory": 1.0}


@dataclass(frozen=True, slots=True)
class QueueAtLevel:
    """One sibling's inputs at its level and what the quota phase gave it. `request` is its subtree's;
    `requestable` is min(request, limit), the most it may be given; deserved and limit < 0: unlimited."""

    name: str
    priority: int
    deserved: float
    limit: float
    over_quota_weight: float
    request: float
    usage: float
    requestable: float
    quota_share: float


@dataclass(frozen=True, slots=True)
class Grant:
    """What one queue got from one offer: in a round, `offer` is its part of the round's amount
    (`share_weight`, normalised); in the leftover hand-out, one unit. `leftover` is the fractional rest
    recorded for it so far (it orders the hand-out)."""

    queue: str
    granted: float
    offer: float
    share_weight: float
    leftover: float


@dataclass(slots=True)
class Round:
    """One round of a priority bucket: the amount at its start, w' (weight / Σ weights of the
    candidates) per candidate, and the grants in candidate order."""

    amount: float
    relative: list[float]
    grants: list[Grant]


@dataclass(slots=True)
class Bucket:
    """One priority of the over-quota phase: what was left when it started, its rounds, the leftover
    hand-out, and what was left after it."""

    priority: int
    remaining: float
    rounds: list[Round] = field(default_factory=list)
    leftovers: list[Grant] = field(default_factory=list)
    remaining_after: float = 0.0


@dataclass(slots=True)
class Level:
    """The division of `total` (the parent's fair share; the cluster's at the top, `parent` None)
    among siblings."""

    parent: str | None
    total: float
    queues: list[QueueAtLevel]
    after_quota: float  # what the quota phase left (negative: quotas oversubscribed)
    buckets: list[Bucket] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class ResourceDivision:
    """One resource's division: the cluster's total, kValue, the levels top-down, and (fullHierarchy-
    Fairness off) the parent queues left out of the division with the leaves whose sum they report."""

    resource: str
    total: float
    k_value: float
    levels: list[Level] = field(default_factory=list)
    detached: dict[str, list[str]] = field(default_factory=dict)

    def level_of(self, queue: str) -> Level | None:
        """The level at which `queue` was given its share."""
        for level in self.levels:
            if any(entry.name == queue for entry in level.queues):
                return level
        return None

    def fair_share(self, queue: str) -> float | None:
        """The queue's fair share as the division left it (a detached parent: its leaves' sum)."""
        if queue in self.detached:
            return sum(self.fair_share(leaf) or 0.0 for leaf in self.detached[queue])
        level = self.level_of(queue)
        return None if level is None else level.shares.get(queue)

    def path(self, queue: str) -> list[Level]:
        """The levels from the top down to the one that gave `queue` its share."""
        levels: list[Level] = []
        name: str | None = queue
        while name is not None:
            level = self.level_of(name)
            if level is None:
                break
            levels.append(level)
            name = level.parent
        return levels[::-1]


@dataclass(slots=True)
class FairShareRecord:
    """Every resource's division in one cycle."""

    cycle: int
    resources: dict[str, ResourceDivision] = field(default_factory=dict)

    def queues(self) -> set[str]:
        names: set[str] = set()
        for division in self.resources.values():
            names.update(division.detached)
            for level in division.levels:
                names.update(entry.name for entry in level.queues)
        return names

    def for_queue(self, queue: str) -> FairShareRecord:
        """Only the levels on `queue`'s path (and its leaves', for a detached parent)."""
        out = FairShareRecord(self.cycle)
        for name, division in self.resources.items():
            wanted = division.detached.get(queue, [queue])
            levels: list[Level] = []
            for leaf in wanted:
                levels.extend(level for level in division.path(leaf) if all(level is not x for x in levels))
            detached = {queue: wanted} if queue in division.detached else {}
            out.resources[name] = ResourceDivision(name, division.total, division.k_value, levels, detached)
        return out


class DivisionRecorder:
    """Told each step of the division by `division.divide` (and each resource by the proportion plugin);
    builds `record`."""

    def __init__(self, cycle: int = 0) -> None:
        self.record = FairShareRecord(cycle)
        self._division: ResourceDivision | None = None
        self._level: Level | None = None

    def resource(self, resource: str, total: float, k_value: float) -> None:
        self._division = self.record.resources[resource] = ResourceDivision(resource, total, k_value)

    def detached(self, parent: str, leaves: Iterable[str]) -> None:
        assert self._division is not None
        self._division.detached[parent] = list(leaves)

    def level(self, parent: str | None, total: float, queues: list[QueueAtLevel], after_quota: float) -> None:
        assert self._division is not None
        self._level = Level(parent, total, queues, after_quota)
        self._division.levels.append(self._level)

    def bucket(self, priority: int, remaining: float) -> None:
        assert self._level is not None
        self._level.buckets.append(Bucket(priority, remaining, remaining_after=remaining))

    def round(self, amount: float, relative: list[float], grants: list[Grant]) -> None:
        assert self._level is not None
        bucket = self._level.buckets[-1]
        bucket.rounds.append(Round(amount, list(relative), grants))
        bucket.remaining_after = amount - sum(grant.granted for grant in grants)

    def leftovers(self, grants: list[Grant], remaining: float) -> None:
        assert self._level is not None
        bucket = self._level.buckets[-1]
        bucket.leftovers = grants
        bucket.remaining_after = remaining

    def level_done(self, shares: dict[str, float]) -> None:
        assert self._level is not None
        self._level.shares = dict(shares)


# --- JSON (the contract's units) -------------------------------------------------------------------


def as_json(record: FairShareRecord, queue: str | None = None) -> dict[str, Any]:
    """The record as JSON (cpu in cores); with `queue`, only what explains that queue's share, with the
    share itself per resource."""
    shown = record if queue is None else record.for_queue(queue)
    resources: dict[str, Any] = {}
    for name, division in shown.resources.items():
        scale = 1.0 / _JSON_SCALE[name]
        entry: dict[str, Any] = {
            "total": division.total * scale,
            "kValue": division.k_value,
            "levels": [_level_json(level, scale) for level in division.levels],
        }
        if division.detached:
            entry["detached"] = division.detached
        if queue is not None:
            share = division.fair_share(queue)
            entry["fairShare"] = None if share is None else share * scale
        resources[name] = entry
    document: dict[str, Any] = {"cycle": record.cycle}
    if queue is not None:
        document["queue"] = queue
    document["resources"] = resources
    return document


def _amount(value: float, scale: float) -> float:
    return value if is_unlimited(value) else value * scale


def _level_json(level: Level, scale: float) -> dict[str, Any]:
    return {
        "parent": level.parent,
        "total": level.total * scale,
        "queues": [
            {
                "name": q.name,
                "priority": q.priority,
                "quota": _amount(q.deserved, scale),
                "limit": _amount(q.limit, scale),
                "overQuotaWeight": q.over_quota_weight,
                "request": q.request * scale,
                "usage": q.usage,
                "requestable": q.requestable * scale,
                "quotaShare": q.quota_share * scale,
                "fairShare": level.shares.get(q.name, 0.0) * scale,
            }
            for q in level.queues
        ],
        "afterQuota": level.after_quota * scale,
        "buckets": [
            {
                "priority": bucket.priority,
                "remaining": bucket.remaining * scale,
                "rounds": [
                    {
                        "amount": r.amount * scale,
                        "grants": [
                            _grant_json(grant, scale, relative)
                            for grant, relative in zip(r.grants, r.relative, strict=True)
                        ],
                    }
                    for r in bucket.rounds
                ],
                "leftovers": [_grant_json(grant, scale) for grant in bucket.leftovers],
                "remainingAfter": bucket.remaining_after * scale,
            }
            for bucket in level.buckets
        ],
    }


def _grant_json(grant: Grant, scale: float, relative: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"queue": grant.queue}
    if relative is not None:
        out["weight"] = relative
        out["shareWeight"] = grant.share_weight
    out.update(
        {"offer": grant.offer * scale, "granted": grant.granted * scale, "leftover": grant.leftover * scale}
    )
    return out


def from_json(document: dict[str, Any]) -> FairShareRecord:
    """`as_json`'s output read back (in the scheduler's units). Raises KeyError, TypeError or ValueError on
    a document of another shape."""
    record = FairShareRecord(int(document["cycle"]))
    for name, entry in dict(document["resources"]).items():
        scale = _JSON_SCALE[name]
        division = ResourceDivision(name, float(entry["total"]) * scale, float(entry["kValue"]))
        division.detached = {
            str(k): [str(v) for v in vs] for k, vs in dict(entry.get("detached", {})).items()
        }
        for raw in entry["levels"]:
            level = Level(
                raw["parent"],
                float(raw["total"]) * scale,
                [
                    QueueAtLevel(
                        name=str(q["name"]),
                        priority=int(q["priority"]),
                        deserved=_amount(float(q["quota"]), scale),
                        limit=_amount(float(q["limit"]), scale),
                        over_quota_weight=float(q["overQuotaWeight"]),
                        request=float(q["request"]) * scale,
                        usage=float(q["usage"]),
                        requestable=float(q["requestable"]) * scale,
                        quota_share=float(q["quotaShare"]) * scale,
                    )
                    for q in raw["queues"]
                ],
                float(raw["afterQuota"]) * scale,
            )
            level.shares = {str(q["name"]): float(q["fairShare"]) * scale for q in raw["queues"]}
            for b in raw["buckets"]:
                bucket = Bucket(int(b["priority"]), float(b["remaining"]) * scale)
                bucket.remaining_after = float(b["remainingAfter"]) * scale
                for r in b["rounds"]:
                    grants = [_grant_from(g, scale) for g in r["grants"]]
                    relative = [float(g["weight"]) for g in r["grants"]]
                    bucket.rounds.append(Round(float(r["amount"]) * scale, relative, grants))
                bucket.leftovers = [_grant_from(g, scale) for g in b["leftovers"]]
                level.buckets.append(bucket)
            division.levels.append(level)
        record.resources[name] = division
    return record


def _grant_from(raw: dict[str, Any], scale: float) -> Grant:
    return Grant(
        str(raw["queue"]),
        float(raw["granted"]) * scale,
        float(raw["offer"]) * scale,
        float(raw.get("shareWeight", 0.0)),
        float(raw["leftover"]) * scale,
    )


__all__ = [
    "Bucket",
    "DivisionRecorder",
    "FairShareRecord",
    "Grant",
    "Level",
    "QueueAtLevel",
    "ResourceDivision",
    "Round",
    "as_json",
    "from_json",
]
