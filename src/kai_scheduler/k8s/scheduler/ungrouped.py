"""New pods that wait for the pod grouper, read once it has grouped them (issue #23, the live row).

With a pod grouper running (`require_pod_groups`), a pod of ours is created without its PodGroup, and the
grouper annotates it later; until then the scheduler leaves it out (`pod_facts`), as KAI's scheduler never
sees a pod without its PodGroup. Reading the first version only to leave it out parsed nearly every pod
twice: at 10,000 pods created over HTTP the grouper works through them for tens of seconds, and every
cycle meanwhile read the new ones. `UngroupedPods` leaves a pod new in that state unread until the grouper's
version comes (a new version, read as any other) or until it has waited `WAIT` seconds: then it is read as
before, and what is wrong with it is said (a pod the grouper leaves alone, or cannot group).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.objects import annotations_of

WAIT = 60.0  # seconds a new ungrouped pod is left unread at most


class UngroupedPods:
    """Which new pods the state builder leaves unread for now (see the module doc). `scheduler_name`: whose
    pods these are; `grouper_runs`: the builder's `require_pod_groups`; `clock`: monotonic seconds."""

    def __init__(
        self, scheduler_name: str, *, grouper_runs: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.scheduler_name = scheduler_name
        self.grouper_runs = grouper_runs
        self.clock = clock
        self._until: dict[str, float] = {}  # pod key -> until when it is left unread (kept while it exists)
        self._due: list[tuple[float, str]] = []  # (that time, key): to read once it has passed

    def put_off(self, key: str, obj: JsonObject, read: bool, requests: list[JsonObject]) -> bool:
        """Whether to leave the pod `key` unread for now: it is ours, new (`read`: the builder has read it
        before), not grouped, not bound, with no BindRequest, and has not waited `WAIT` seconds."""
        if not self.grouper_runs or read or requests:
            return False
        spec = obj.get("spec") or {}
        if (
            spec.get("nodeName")
            or str(spec.get("schedulerName") or "default-scheduler") != self.scheduler_name
        ):
            return False
        if annotations_of(obj).get(c.POD_GROUP_ANNOTATION):
            return False
        now = self.clock()
        until = self._until.get(key)
        if until is None:
            until = self._until[key] = now + WAIT
            heapq.heappush(self._due, (until, key))
        return now < until

    def due(self) -> set[str]:
        """The pods whose wait has ended since the last call, to read now."""
        now, due = self.clock(), set()
        while self._due and self._due[0][0] <= now:
            until, key = heapq.heappop(self._due)
            if self._until.get(key) == until:
                due.add(key)
        return due

    def forget(self, key: str) -> None:
        """The pod is gone."""
        self._until.pop(key, None)


__all__ = ["WAIT", "UngroupedPods"]
