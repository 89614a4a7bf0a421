"""The kubelet stand-in: what a node's kubelet would write about its pods. With `enabled`, a pod bound to
a node starts running at once (a second write after the binding); with `graceful_deletion`, deleting a
pod that runs on a node only marks it terminating, and `complete_pod_deletions` then removes it."""

from __future__ import annotations

from collections.abc import Callable

from .jsoncopy import clone
from .meta import Obj, format_time
from .resources import ResourceType
from .versioned import VersionedStore


class Kubelet:
    def __init__(
        self,
        objects: VersionedStore,
        pods: ResourceType,
        clock: Callable[[], float],
        *,
        enabled: bool = False,
        graceful_deletion: bool = False,
    ) -> None:
        self.objects = objects
        self.pods = pods
        self.clock = clock
        self.enabled = enabled
        self.graceful_deletion = graceful_deletion

    def pod_bound(self, pod: Obj) -> None:
        """A stored pod got its node (lock held): when enabled, start it as the kubelet would."""
        if not self.enabled:
            return
        if (pod.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        # Only the status (and the resourceVersion the commit sets) change: the new version shares the
        # rest with the old one, as stored objects are never changed in place (watches serve them as
        # they are).
        new = {**pod, "metadata": dict(pod["metadata"]), "status": clone(pod.get("status") or {})}
        status = new["status"]
        now = format_time(self.clock())
        status["phase"] = "Running"
        status.setdefault("startTime", now)
        status["hostIP"] = status.get("hostIP", "10.0.0.1")
        conds = [
            c
            for c in status.get("conditions") or []
            if c.get("type") not in ("Ready", "ContainersReady", "Initialized")
        ]
        for t in ("Initialized", "Ready", "ContainersReady"):
            conds.append({"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
        status["conditions"] = conds
        status["containerStatuses"] = [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": now}},
            }
            for c in (new.get("spec") or {}).get("containers") or []
        ]
        self.objects.commit(self.pods, "MODIFIED", new, pod)

    def grace_period(self, rt: ResourceType, obj: Obj, options: Obj) -> int:
        """Seconds a deletion of `obj` waits for its kubelet: 0 unless it is a pod running on a node (and
        graceful deletion is on); the request's gracePeriodSeconds, else the pod's own."""
        if rt.key != "pods" or not self.graceful_deletion:
            return 0
        spec = obj.get("spec") or {}
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        value = options.get("gracePeriodSeconds")
        if value is None:
            value = spec.get("terminationGracePeriodSeconds", 30)
        return max(0, int(value))

    @staticmethod
    def terminating_gracefully(pod: Obj) -> bool:
        """Whether a deleted pod still waits for its kubelet (so that removing its finalizers keeps it)."""
        return bool(pod["metadata"].get("deletionGracePeriodSeconds"))

    def complete_pod_deletions(self, namespace: str | None = None, name: str | None = None) -> int:
        """What a kubelet does after a graceful delete: remove terminating pods. Returns how many."""
        done = 0
        with self.objects.lock:
            for ident, pod in list(self.objects.of_type("pods").items()):
                if namespace is not None and ident[0] != namespace:
                    continue
                if name is not None and ident[1] != name:
                    continue
                if not pod["metadata"].get("deletionTimestamp"):
                    continue
                if pod["metadata"].get("finalizers"):
                    if pod["metadata"].get("deletionGracePeriodSeconds"):
                        new = clone(pod)
                        new["metadata"]["deletionGracePeriodSeconds"] = 0
                        self.objects.commit(self.pods, "MODIFIED", new, pod)
                    continue
                self.objects.commit(self.pods, "DELETED", clone(pod), pod)
                done += 1
        return done
