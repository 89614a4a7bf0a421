"""Each queue's use of each AccountedResource, written into its status (`status.accountedResources`: used
and limit by resource name) for people and tools to read: `kubectl kai queues` shows them. KAI's phase-1
design keeps usage status out; this field is the project's, in its own CRD (a cluster with KAI's CRD
prunes it).

Counted from the cycle's snapshot as the cluster's pods left it (`model.accounted.queue_report`: the
charges of the pods that hold their node), only on a cluster with accounted resources, and only when the
cluster cache moved since the last count (a settled cluster's cycles, reused, count nothing: counting
visits every pod); written, as the fair share is (`queue_fair_share.py`), only for the queues whose
numbers changed, as a merge patch of this one field through the status subresource.
"""

from __future__ import annotations

from collections.abc import Awaitable
from fractions import Fraction

from kai_scheduler.api.quantity import format_quantity
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.queue_fair_share import write_status_field
from kai_scheduler.model.accounted import queue_report
from kai_scheduler.model.snapshot import ClusterSnapshot

ACCOUNTED_FIELD = "accountedResources"

Usage = dict[str, dict[str, str]]  # resource -> {"used": quantity, "limit": quantity}


def amount(value: float) -> str:
    """A quantity for the status: exact to a thousandth (GPU fractions), bytes whole."""
    return format_quantity(Fraction(round(value * 1000), 1000))


class QueueAccountedUsage:
    def __init__(self, effects: Effects, informers: InformerSet) -> None:
        self.effects = effects
        self.informers = informers
        self._written: dict[str, Usage] = {}  # queue -> what this scheduler last wrote
        self._counted_at: int | None = None  # the cache version of the last count whose writes all went

    def forget(self) -> None:
        """A new leadership term: what an earlier one wrote may have been overwritten since."""
        self._written.clear()
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
        return calls

    async def _write(self, queue: str, desired: Usage) -> None:
        try:
            await write_status_field(self.effects, queue, ACCOUNTED_FIELD, desired, self._written)
        except BaseException:
            self._counted_at = None  # count again at the next cycle, though nothing changed
            raise


__all__ = ["ACCOUNTED_FIELD", "QueueAccountedUsage"]
