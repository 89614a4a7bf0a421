"""New pods that wait for the pod grouper, read once it has grouped them (issue #23, the live row).

With a pod grouper running (`require_pod_groups`), a pod of ours is created without its PodGroup, and the
grouper annotates it moments later; until then the scheduler leaves it out (`pod_facts`). Reading the first
version only to leave it out parsed nearly every pod twice: at 10,000 pods created over HTTP, almost every
pod was first seen ungrouped. `UngroupedPods` puts a pod seen for the first time in that state off to the
next build: by then the grouper's version is there, or, when the pod still waits, it is read as before (what
is wrong with it is said one cycle later). A pod is put off once: after that it is read as any other.
"""

from __future__ import annotations

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.objects import annotations_of


class UngroupedPods:
    """Which new pods the state builder reads at its next build rather than now (see the module doc).
    `scheduler_name`: whose pods these are; `grouper_runs`: the builder's `require_pod_groups`."""

    def __init__(self, scheduler_name: str, *, grouper_runs: bool) -> None:
        self.scheduler_name = scheduler_name
        self.grouper_runs = grouper_runs
        self._put_off: set[str] = set()  # read at the next build
        self._seen: set[str] = set()  # put off once, while the pod exists

    def put_off(self, key: str, obj: JsonObject, read: bool, requests: list[JsonObject]) -> bool:
        """Whether to leave the pod `key` unread until the next build: it is ours, new (`read`: the builder
        has read it before), not grouped, not bound, with no BindRequest, and was not put off before."""
        if not self.grouper_runs or read or requests or key in self._seen:
            return False
        spec = obj.get("spec") or {}
        if (
            spec.get("nodeName")
            or str(spec.get("schedulerName") or "default-scheduler") != self.scheduler_name
        ):
            return False
        if annotations_of(obj).get(c.POD_GROUP_ANNOTATION):
            return False
        self._seen.add(key)
        self._put_off.add(key)
        return True

    def take(self) -> set[str]:
        """The pods put off since the last build, to read now."""
        taken, self._put_off = self._put_off, set()
        return taken

    def forget(self, key: str) -> None:
        """The pod is gone."""
        self._seen.discard(key)
        self._put_off.discard(key)


__all__ = ["UngroupedPods"]
