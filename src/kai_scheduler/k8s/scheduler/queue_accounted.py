"""Each queue's use of each AccountedResource, written into its status (`status.accountedResources`: used
and limit by resource name) for people and tools to read: `kubectl kai queues` shows them. KAI's phase-1
design keeps usage status out; this field is the project's, in its own CRD (a cluster with KAI's CRD
prunes it).

Counted from the cycle's snapshot as the cluster's pods left it (`model.accounted.queue_report`: the
charges of the pods that hold their node), only on a cluster with accounted resources, and only when the
cluster cache moved since the last count (a settled cluster's cycles, reused, count nothing: counting
visits every pod); written, as the fair share is (`queue_fair_share.py`), only for the queues whose
numbers changed, as a merge patch of this one field through the status subresource.

And the queue condition the design names for its references: a queue that names AccountedResources in
`spec.accountedResources` has `AccountedResourcesResolved` in `status.conditions`, False with reason
`AccountedResourceNotFound` (naming the queue and the missing names) while any of them does not exist
(its jobs are blocked then), True once all do; a queue that names none has none. Written with the
others of `conditions` kept (a merge patch replaces a list whole), only when it changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from kai_scheduler.api.quantity import format_quantity
from kai_scheduler.api.reasons import ACCOUNTED_RESOURCE_NOT_FOUND
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.queue_fair_share import write_status_field
from kai_scheduler.model.accounted import queue_report
from kai_scheduler.model.snapshot import ClusterSnapshot

ACCOUNTED_FIELD = "accountedResources"
CONDITIONS_FIELD = "conditions"
RESOLVED_CONDITION = "AccountedResourcesResolved"

Usage = dict[str, dict[str, str]]  # resource -> {"used": quantity, "limit": quantity}


def amount(value: float) -> str:
    """A quantity for the status: exact to a thousandth (GPU fractions), bytes whole."""
    return format_quantity(Fraction(round(value * 1000), 1000))


class QueueAccountedUsage:
    def __init__(self, effects: Effects, informers: InformerSet) -> None:
        self.effects = effects
        self.informers = informers
        self._written: dict[str, Usage] = {}  # queue -> what this scheduler last wrote
        self._conditions: dict[str, Any] = {}  # queue -> the conditions this scheduler last wrote
        self._counted_at: int | None = None  # the cache version of the last count whose writes all went

    def forget(self) -> None:
        """A new leadership term: what an earlier one wrote may have been overwritten since."""
        self._written.clear()
        self._conditions.clear()
        self._counted_at = None

    def calls(self, snapshot: ClusterSnapshot, version: int, report: CycleReport) -> list[Awaitable[None]]:
        """The writes for the cluster as `snapshot` shows it, at the cache's `version`."""
        if version == self._counted_at:
            return []
        self._counted_at = version
        calls: list[Awaitable[None]] = []
        cache = self.informers.queues.cache
        for queue, resources in queue_report(snapshot).items():
            obj = cache.get(queue)
            if obj is None:
                continue
            desired = {
                name: {"used": amount(used), "limit": amount(limit)}
                for name, (used, limit) in resources.items()
            }
            shown = (obj.get("status") or {}).get(ACCOUNTED_FIELD)
            if shown == desired or self._written.get(queue) == desired:
                continue
            self._written[queue] = desired
            calls.append(
                self.effects.limited(self._write(queue, desired), report, f"accounted usage {queue}")
            )
        defined = snapshot.accounted.definitions if snapshot.accounted is not None else {}
        for info in snapshot.queues:
            obj = cache.get(info.name)
            if obj is None:
                continue
            current = list((obj.get("status") or {}).get(CONDITIONS_FIELD) or [])
            conditions = self._resolved(info.name, sorted(info.accounted_limits), defined, current)
            if conditions is None or self._conditions.get(info.name) == conditions:
                continue
            self._conditions[info.name] = conditions
            write = self._write_field(info.name, CONDITIONS_FIELD, conditions, self._conditions)
            calls.append(self.effects.limited(write, report, f"accounted references {info.name}"))
        return calls

    def _resolved(
        self, queue: str, names: Sequence[str], defined: Mapping[str, object], current: list[Any]
    ) -> list[Any] | None:
        """The queue's conditions with its AccountedResourcesResolved as it should be (None: as it is)."""
        others = [c for c in current if not (isinstance(c, dict) and c.get("type") == RESOLVED_CONDITION)]
        mine = [c for c in current if c not in others]
        if not names:
            return others if mine else None
        missing = [name for name in names if name not in defined]
        if missing:
            status, reason = "False", ACCOUNTED_RESOURCE_NOT_FOUND
            message = f"queue {queue} names AccountedResource {', '.join(missing)}, which does not exist"
        else:
            status, reason = "True", "Resolved"
            message = f"every AccountedResource queue {queue} names exists"
        if len(mine) == 1 and (mine[0].get("status"), mine[0].get("reason"), mine[0].get("message")) == (
            status,
            reason,
            message,
        ):
            return None
        changed = not mine or mine[0].get("status") != status
        clock = self.effects.clock
        since = clock.stamp(clock.now()) if changed else mine[0].get("lastTransitionTime")
        condition = {
            "type": RESOLVED_CONDITION,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        return [*others, condition]

    async def _write(self, queue: str, desired: Usage) -> None:
        await self._write_field(queue, ACCOUNTED_FIELD, desired, self._written)

    async def _write_field(self, queue: str, field: str, desired: object, written: dict[str, Any]) -> None:
        try:
            await write_status_field(self.effects, queue, field, desired, written)
        except BaseException:
            self._counted_at = None  # count again at the next cycle, though nothing changed
            raise


__all__ = ["ACCOUNTED_FIELD", "RESOLVED_CONDITION", "QueueAccountedUsage"]
