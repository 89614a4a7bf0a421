"""The fair-share explanation as text: a `FairShareRecord` (`fair_share_record.py`) for one queue, step by
step per resource, from the top of the tree down to the queue, as `kubectl kai fairshare` and `simulate
--explain-fairshare` print it. Pure: the record holds every number, this only lays them out."""

from __future__ import annotations

from kai_scheduler.api.objects import is_unlimited
from kai_scheduler.model.fair_share_record import Bucket, FairShareRecord, Level, ResourceDivision

_HEADERS = ("QUEUE", "PRIORITY", "QUOTA", "LIMIT", "WEIGHT", "REQUEST", "USAGE", "QUOTA PHASE", "FAIR SHARE")


def amount(resource: str, value: float) -> str:
    """One amount of `resource` in the scheduler's units, as people read it (cpu in cores, memory in Gi)."""
    if resource == "cpu":
        return f"{_number(value / 1000)} CPU"
    if resource == "memory":
        return f"{_number(value / 2**30)}Gi"
    return f"{_number(value)} GPU"


def _number(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def _limit(resource: str, value: float) -> str:
    return "unlimited" if is_unlimited(value) else amount(resource, value)


def explanation_text(record: FairShareRecord, queue: str) -> str:
    """Why `queue` has the fair share it has, per resource. The record must hold the queue."""
    lines = [f"Fair share of queue {queue}, as scheduling cycle {record.cycle} divided it:"]
    for division in record.resources.values():
        lines.append("")
        lines.extend(_resource_lines(division, queue))
    return "\n".join(lines) + "\n"


def _resource_lines(division: ResourceDivision, queue: str) -> list[str]:
    resource = division.resource
    share = division.fair_share(queue)
    shown = "-" if share is None else amount(resource, share)
    lines = [f"{resource.upper()}: fair share {shown} (the cluster has {amount(resource, division.total)})"]
    if queue in division.detached:
        leaves = division.detached[queue]
        lines.append(
            f"  fullHierarchyFairness is off: {queue} is left out of the division and reports the sum of "
            f"its leaf queues' shares ({', '.join(leaves)})."
        )
    levels = division.path(queue) if queue not in division.detached else division.levels
    for depth, level in enumerate(levels, start=1):
        lines.extend(_level_lines(resource, division.k_value, depth, level))
    if queue not in division.detached and share is not None and levels:
        why = _why(resource, levels[-1], queue)
        lines.append(f"  Result: {queue}'s {resource} fair share is {amount(resource, share)}: {why}.")
    return lines


def _why(resource: str, level: Level, queue: str) -> str:
    """The one step that settled the queue's share at its level."""
    entry = next(q for q in level.queues if q.name == queue)
    share = level.shares.get(queue, 0.0)
    above = share - entry.quota_share
    if share >= entry.requestable - 1e-9:
        if not is_unlimited(entry.limit) and entry.limit < entry.request:
            asked = amount(resource, entry.request)
            return f"all it may have, its limit {amount(resource, entry.limit)} (it asks for {asked})"
        return f"all it asks for ({amount(resource, entry.request)})"
    if above <= 1e-9:
        if entry.over_quota_weight <= 0:
            return "its quota phase share; an over-quota weight of 0 gets nothing above it"
        if level.after_quota <= 0:
            return "its quota phase share; nothing was left over the quotas"
        return "its quota phase share; queues of higher priority, or the rounds, took what was left"
    return (
        f"{amount(resource, entry.quota_share)} in the quota phase and {amount(resource, above)} over quota, "
        f"by weight {_number(entry.over_quota_weight)} among the queues of priority {entry.priority}"
    )


def _level_lines(resource: str, k_value: float, depth: int, level: Level) -> list[str]:
    owner = "the cluster" if level.parent is None else f"queue {level.parent}"
    names = ", ".join(q.name for q in level.queues)
    lines = [f"  Level {depth}: {owner}'s {amount(resource, level.total)} among {names}"]
    rows = [
        (
            q.name,
            str(q.priority),
            _limit(resource, q.deserved),
            _limit(resource, q.limit),
            _number(q.over_quota_weight),
            amount(resource, q.request),
            _number(q.usage),
            amount(resource, q.quota_share),
            amount(resource, level.shares.get(q.name, 0.0)),
        )
        for q in level.queues
    ]
    widths = [max(len(row[i]) for row in [_HEADERS, *rows]) for i in range(len(_HEADERS))]
    for row in [_HEADERS, *rows]:
        lines.append(
            "    " + "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    given = level.total - level.after_quota
    lines.append(
        f"    Quota phase: each gets min(quota, request, limit): {amount(resource, given)} given, "
        f"{amount(resource, level.after_quota)} left."
    )
    if level.after_quota <= 0:
        lines.append("    Nothing left over quota: no over-quota phase.")
    if any(q.usage for q in level.queues):
        lines.append(
            f"    Time-based fairness is on (kValue {_number(k_value)}): each round's share weight is "
            "max(0, w' + kValue*(w' - usage)), normalised, where w' = weight / the candidates' weights."
        )
    for bucket in level.buckets:
        lines.extend(_bucket_lines(resource, bucket))
    return lines


def _bucket_lines(resource: str, bucket: Bucket) -> list[str]:
    lines = [
        f"    Over quota, priority {bucket.priority}: {amount(resource, bucket.remaining)} to hand out to "
        "the queues of this priority that ask for more (a weight above 0)"
    ]
    if not bucket.rounds:
        lines.append("      no queue of this priority asks for more")
    for number, entry in enumerate(bucket.rounds, start=1):
        parts = [
            f"{grant.queue} w'={_number(relative)} weight {_number(grant.share_weight)} "
            f"offered {amount(resource, grant.offer)} got {amount(resource, grant.granted)}"
            for grant, relative in zip(entry.grants, entry.relative, strict=True)
        ]
        lines.append(f"      round {number} of {amount(resource, entry.amount)}: " + "; ".join(parts))
    if bucket.leftovers:
        parts = [
            f"{grant.queue} +{amount(resource, grant.granted)} (leftover {_number(grant.leftover)})"
            for grant in bucket.leftovers
        ]
        lines.append("      leftovers, largest first (then the older queue): " + "; ".join(parts))
    lines.append(f"      left after priority {bucket.priority}: {amount(resource, bucket.remaining_after)}")
    return lines


__all__ = ["amount", "explanation_text"]
