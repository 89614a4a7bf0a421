"""Each queue's fair share, written into its status (`status.fairShare`) for people and tools to read:
`kubectl kai queues` shows it next to the quota, limit, allocated and requested (which the queue status
controller writes). KAI keeps fair share in the scheduler's memory and metrics only; this field is the
project's, in its own CRD (a cluster with KAI's CRD prunes it, and readers show it as unknown).

Written after a cycle for the queues whose fair share changed, rounded as `kubectl kai` shows it (GPUs
to a hundredth, CPU to a millicore, memory to a MiB) so that noise in the last digits writes nothing: a
settled cluster is not written to. Like the queue status controller's fields, a queue's fair share is
written on a pace (`runtime.write_pace`): by the cycle that finds it after a quiet period, else by the
first cycle after it held still for 2 s or its period (30 s) since the last write is over, with that
cycle's fair share; while pods stream in, a queue costs a write a period, not one per cycle. A write goes
through the status subresource as a merge patch of that one field, so it never races the queue status
controller's fields; the scheduler's cache reads no Queue status, so the write does not make the next
cycle rebuild anything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import QUEUES, ApiStatusError
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.write_pace import QUEUE_STATUS_PERIOD, WritePace
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects

ACCESS = (access(QUEUES, "patch", subresource="status"),)

FAIR_SHARE_FIELD = "fairShare"
MIB = 1024 * 1024


def fair_share_list(gpu: float, millicores: float, memory_bytes: float) -> dict[str, str]:
    """The status resource list for a fair share in the session's units (GPUs, millicores, bytes)."""
    hundredths = round(gpu * 100)
    gpus = str(hundredths // 100) if hundredths % 100 == 0 else f"{hundredths / 100:.2f}".rstrip("0")
    cores = round(millicores)
    return {
        c.CPU_RESOURCE: str(cores // 1000) if cores % 1000 == 0 else f"{cores}m",
        c.MEMORY_RESOURCE: f"{round(memory_bytes / MIB)}Mi",
        c.GPU_RESOURCE: gpus,
    }


class QueueFairShare:
    def __init__(
        self, effects: Effects, informers: InformerSet, *, period: float = QUEUE_STATUS_PERIOD
    ) -> None:
        self.effects = effects
        self.informers = informers
        self.pace = WritePace(period)
        self._written: dict[str, dict[str, str]] = {}  # queue -> what this scheduler last wrote

    def forget(self) -> None:
        """A new leadership term: what an earlier one wrote may have been overwritten since."""
        self._written.clear()
        self.pace.forget()

    def calls(
        self, fair_share: Mapping[str, tuple[float, float, float]], report: CycleReport
    ) -> list[Awaitable[None]]:
        calls: list[Awaitable[None]] = []
        cache = self.informers.queues.cache
        for queue, (gpu, millicores, memory) in fair_share.items():
            obj = cache.get(queue)
            if obj is None:
                continue  # a parent queue left out of the tree, or one just deleted
            desired = fair_share_list(gpu, millicores, memory)
            shown = (obj.get("status") or {}).get(FAIR_SHARE_FIELD)
            if shown == desired or self._written.get(queue) == desired or self.pace.wait(queue, desired) > 0:
                continue
            self._written[queue] = desired
            write = write_status_field(
                self.effects, queue, FAIR_SHARE_FIELD, desired, self._written, self.pace
            )
            calls.append(self.effects.limited(write, report, f"fair share {queue}"))
        return calls


async def write_status_field(
    effects: Effects,
    queue: str,
    field: str,
    desired: object,
    written: dict[str, Any],
    pace: WritePace | None = None,
) -> None:
    """Merge-patch one field of a queue's status; on failure, forget it was written (so the next cycle
    writes it again, without waiting for `pace`). A queue deleted meanwhile needs nothing."""
    if pace is not None:
        pace.wrote(queue)
    try:
        await effects.client.patch(QUEUES, queue, {"status": {field: desired}}, None, subresource="status")
    except ApiStatusError as error:
        written.pop(queue, None)
        if pace is not None:
            pace.unwrote(queue)
        if error.code != 404:
            raise
    except (ConnectionError, OSError):
        written.pop(queue, None)
        if pace is not None:
            pace.unwrote(queue)
        raise


__all__ = ["FAIR_SHARE_FIELD", "QueueFairShare", "fair_share_list", "write_status_field"]
