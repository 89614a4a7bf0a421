"""Controllers driven to rest over an in-memory set of objects: what a cluster's control plane does
between a user's `kubectl apply` and the pods being there.

`Runtime` keeps every object (the user's workloads and what their controllers made), completes names
(`generateName` plus five characters of Kubernetes' alphabet) and uids, deletes what an object controls
with it, and reconciles the owners of whatever changed until nothing more changes. Names and uids come
from a seeded generator, so a run is the same every time. The caller tells it about pod phases
(`set_pod_phase`) and the clock (`due`), and reads back the objects made and deleted (`Changes`).
"""

from __future__ import annotations

import copy
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kai_scheduler.api.timestamps import format_rfc3339
from kai_scheduler.workloads.errors import WorkloadError
from kai_scheduler.workloads.objects import (
    GENERATED_SUFFIX_LENGTH,
    NAME_ALPHABET,
    Manifest,
    at,
    name_of,
    namespace_of,
)
from kai_scheduler.workloads.registry import admit_pod, controller_for, next_time

# A controller that keeps making objects without rest is a bug; stop it with an error, not a hang.
_MAX_RECONCILES = 100_000


@dataclass
class Changes:
    """Objects made (pods among them) and deleted by one step, in order."""

    created: list[Manifest] = field(default_factory=list)
    deleted: list[Manifest] = field(default_factory=list)

    def pods_created(self) -> list[Manifest]:
        return [obj for obj in self.created if obj.get("kind") == "Pod"]

    def pods_deleted(self) -> list[Manifest]:
        return [obj for obj in self.deleted if obj.get("kind") == "Pod"]


class Runtime:
    def __init__(self, seed: int = 0) -> None:
        self._random = random.Random(seed)
        self.objects: dict[str, Manifest] = {}  # by uid, in creation order
        self._names: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> uid
        self._owned: dict[str, list[str]] = {}  # controller uid -> uids it controls
        self._checked: dict[str, datetime] = {}  # timed controller uid -> when it last reconciled

    # --- what a controller sees ------------------------------------------------------------------

    def owned(self, owner: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
        uid = str(at(owner, "metadata", "uid") or "")
        return [self.objects[child] for child in self._owned.get(uid, ())]

    def owners(self, obj: Mapping[str, Any]) -> list[Manifest]:
        """The chain of controllers above `obj`: its controller, that one's controller, ..."""
        chain: list[Manifest] = []
        current: Mapping[str, Any] = obj
        while (parent := self._controller(current)) is not None and len(chain) < 64:
            chain.append(parent)
            current = parent
        return chain

    def find(self, kind: str, namespace: str, name: str) -> Manifest | None:
        uid = self._names.get((kind, namespace, name))
        return self.objects.get(uid) if uid is not None else None

    # --- what happens ----------------------------------------------------------------------------

    def apply(self, manifest: Mapping[str, Any], now: datetime) -> Changes:
        """A user creates `manifest` (a workload) at `now`: store it, and run the controllers to rest."""
        changes = Changes()
        obj = self._store(copy.deepcopy(dict(manifest)), now, changes)
        self._settle([str(obj["metadata"]["uid"])], now, changes)
        return changes

    def set_pod_phase(self, updates: Iterable[tuple[str, str]], now: datetime) -> Changes:
        """Pods (by uid) have a new phase: their controllers react."""
        changes = Changes()
        touched = []
        for uid, phase in updates:
            pod = self.objects.get(uid)
            if pod is None:
                continue
            pod.setdefault("status", {})["phase"] = phase
            touched.append(uid)
        self._settle(self._owners_of(touched), now, changes)
        return changes

    def delete(self, uids: Iterable[str], now: datetime) -> Changes:
        """Objects are deleted (with everything they control); their controllers react."""
        changes = Changes()
        owners = self._owners_of(list(uids))
        for uid in uids:
            self._delete(uid, changes)
        self._settle(owners, now, changes)
        return changes

    def due(self, now: datetime) -> Changes:
        """Timed controllers (CronJobs) whose time has come act."""
        changes = Changes()
        ready = [
            uid
            for uid, checked in self._checked.items()
            if (when := next_time(self.objects[uid], checked)) is not None and when <= now
        ]
        self._settle(ready, now, changes)
        return changes

    def next_time(self, now: datetime) -> datetime | None:
        """When a timed controller next has work after `now`."""
        times = [when for uid in self._checked if (when := next_time(self.objects[uid], now)) is not None]
        return min(times) if times else None

    # --- inside ----------------------------------------------------------------------------------

    def _controller(self, obj: Mapping[str, Any]) -> Manifest | None:
        for reference in at(obj, "metadata", "ownerReferences") or []:
            if reference.get("controller"):
                return self.objects.get(str(reference.get("uid")))
        return None

    def _owners_of(self, uids: Sequence[str]) -> list[str]:
        out: list[str] = []
        for uid in uids:
            obj = self.objects.get(uid)
            if obj is None:
                continue
            for owner in [obj, *self.owners(obj)]:
                owner_uid = str(owner["metadata"]["uid"])
                if controller_for(owner) is not None and owner_uid not in out:
                    out.append(owner_uid)
        return out

    def _settle(self, queue: list[str], now: datetime, changes: Changes) -> None:
        pending = list(dict.fromkeys(queue))
        for _ in range(_MAX_RECONCILES):
            if not pending:
                return
            uid = pending.pop(0)
            obj = self.objects.get(uid)
            controller = controller_for(obj) if obj is not None else None
            if obj is None or controller is None:
                continue
            result = controller.reconcile(obj, self, now)
            if result.status is not None:
                obj["status"] = {**(obj.get("status") or {}), **result.status}
            if controller.next_time is not None:
                # Only objects with a timer are looked at by the clock (most Jobs have none).
                if controller.next_time(obj, now) is not None:
                    self._checked[uid] = now
                else:
                    self._checked.pop(uid, None)
            touched: list[str] = []
            for doomed in result.delete:
                doomed_uid = str(at(doomed, "metadata", "uid") or "")
                if doomed_uid in self.objects:
                    self._delete(doomed_uid, changes)
                    touched.append(uid)
            for manifest in result.create:
                made = self._store(manifest, now, changes)
                touched.append(str(made["metadata"]["uid"]))
            if touched:
                for again in self._owners_of(touched) + ([uid] if uid in self.objects else []):
                    if again not in pending:
                        pending.append(again)
        raise WorkloadError("controllers did not come to rest (a loop of creations)")

    def _store(self, manifest: Manifest, now: datetime, changes: Changes) -> Manifest:
        meta = manifest.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        kind, namespace = str(manifest.get("kind")), namespace_of(manifest)
        if not meta.get("name"):
            prefix = str(meta.pop("generateName", "") or f"{kind.lower()}-")
            meta["name"] = self._generate(kind, namespace, prefix)
        else:
            meta.pop("generateName", None)
        key = (kind, namespace, str(meta["name"]))
        if key in self._names:
            raise WorkloadError(f"{kind} {namespace}/{meta['name']} exists already")
        if not meta.get("uid"):
            meta["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
        meta.setdefault("creationTimestamp", format_rfc3339(now))
        if kind == "Pod":
            manifest = admit_pod(manifest)
            manifest.setdefault("status", {})["phase"] = "Pending"
        uid = str(meta["uid"])
        self.objects[uid] = manifest
        self._names[key] = uid
        parent = self._controller(manifest)
        if parent is not None:
            self._owned.setdefault(str(parent["metadata"]["uid"]), []).append(uid)
        changes.created.append(manifest)
        return manifest

    def _generate(self, kind: str, namespace: str, prefix: str) -> str:
        while True:
            suffix = "".join(self._random.choice(NAME_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH))
            if (kind, namespace, prefix + suffix) not in self._names:
                return prefix + suffix

    def _delete(self, uid: str, changes: Changes) -> None:
        obj = self.objects.pop(uid, None)
        if obj is None:
            return
        self._checked.pop(uid, None)
        for child in self._owned.pop(uid, []):
            self._delete(child, changes)
        self._names.pop((str(obj.get("kind")), namespace_of(obj), name_of(obj)), None)
        parent = self._controller(obj)
        if parent is not None:
            siblings = self._owned.get(str(parent["metadata"]["uid"]), [])
            if uid in siblings:
                siblings.remove(uid)
        changes.deleted.append(obj)
