"""The controllers of a cluster's control plane that turn workloads into pods: Jobs, CronJobs, Deployments,
ReplicaSets and StatefulSets, as `kube-controller-manager` would.

They are the simulator's own (`kai_scheduler.workloads`: the same expansion, names and reactions), driven
here by what the store holds: a workload created through the API is handed to a `Runtime`, whose objects
(ReplicaSets, Jobs, pods, ...) are written into the store with the uids their owner references name; a
pod's new phase (the kubelet stand-in starts bound pods) and a pod or workload deleted reach the runtime
too, and what it makes or deletes in answer is written back, with the workloads' status. A thread reads
the store's own watches, so the controllers see exactly the events clients see.

Not followed: a workload's spec changed after it was created (scaling a Deployment, a new pod template).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kai_scheduler.workloads.errors import WorkloadError
from kai_scheduler.workloads.runtime import Changes, Runtime

from .errors import ApiError
from .jsoncopy import clone
from .meta import Obj
from .store import Store
from .versioned import Watcher

log = logging.getLogger(__name__)

# The workload kinds followed, by the store's resource names.
WORKLOADS = ("jobs", "cronjobs", "deployments", "replicasets", "statefulsets")
_POLL_SECONDS = 0.05


class WorkloadControllers:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.runtime = Runtime()
        self._statuses: dict[str, Any] = {}  # workload uid -> the status last written
        self._watches: list[tuple[str, Watcher]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        for resource in (*WORKLOADS, "pods"):
            watcher, backlog = self.store.objects.open_watch(self.store.resource(resource), None)
            for item in backlog:
                watcher.items.put(item)
            self._watches.append((resource, watcher))
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fakeapi-controllers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for _, watcher in self._watches:
            self.store.objects.close_watch(watcher)
        self._watches.clear()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = False
            for resource, watcher in self._watches:
                while not watcher.items.empty():
                    kind, obj = watcher.items.get()
                    if obj is not None:
                        busy = True
                        self._on_event(resource, kind, obj)
            self._apply(self.runtime.due(self._now()))
            if not busy:
                self._stop.wait(_POLL_SECONDS)

    def _on_event(self, resource: str, kind: str, obj: Obj) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        known = uid in self.runtime.objects
        now = self._now()
        try:
            if resource == "pods":
                if not known:
                    return  # not a pod these controllers made
                if kind == "DELETED":
                    self._apply(self.runtime.delete([uid], now))
                    return
                phase = str((obj.get("status") or {}).get("phase") or "Pending")
                if phase != (self.runtime.objects[uid].get("status") or {}).get("phase"):
                    self._apply(self.runtime.set_pod_phase([(uid, phase)], now))
            elif kind == "ADDED" and not known:
                self._apply(self.runtime.apply(obj, now))
            elif kind == "DELETED" and known:
                self._apply(self.runtime.delete([uid], now))
        except WorkloadError as error:
            name = (obj.get("metadata") or {}).get("name")
            log.warning("controllers: %s %s: %s", resource, name, error)

    def _apply(self, changes: Changes) -> None:
        """Write what the controllers made and deleted into the store, then the workloads' new status."""
        for made in changes.created:
            try:
                self.store.create(clone(made), keep_uid=True)
            except ApiError as error:
                if error.code != 409:  # (already there: one of ours, seen again)
                    log.warning("controllers: cannot create %s: %s", _name(made), error)
        for gone in changes.deleted:
            try:
                self.store.delete(self.store.type_of(gone), _name(gone), _namespace(gone))
            except ApiError as error:
                if error.code != 404:
                    log.warning("controllers: cannot delete %s: %s", _name(gone), error)
        for uid, obj in list(self.runtime.objects.items()):
            if obj.get("kind") == "Pod":
                continue
            status = obj.get("status")
            if status and self._statuses.get(uid) != status:
                self._statuses[uid] = clone(status)
                try:
                    self.store.set_status(self.store.type_of(obj), _name(obj), clone(status), _namespace(obj))
                except ApiError as error:
                    if error.code != 404:
                        log.warning("controllers: cannot write the status of %s: %s", _name(obj), error)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _namespace(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")
