"""The scheduler's `PodScheduled` effect: each pending pod of a job that ends the cycle unschedulable, and
each waiting pod the scheduler cannot take, gets the pod condition `PodScheduled` = `False` with the reason
and message of `waiting.py` (module doc of `loop.py`), written only when it changes (what was written is
remembered per pod uid), and a Warning event with the same reason and message, once per distinct pair."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.api.reasons import POD_GROUP_NOT_FOUND
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState
from kai_scheduler.k8s.scheduler.pod_groups import message_on
from kai_scheduler.k8s.scheduler.waiting import Waiting, job_waiting, waits_for_scheduler
from kai_scheduler.model.jobs import JobInfo

ACCESS = (access(PODS, "patch", subresource="status"),)

POD_SCHEDULED = "PodScheduled"
POD_REASON_UNSCHEDULABLE = "Unschedulable"  # kube's v1.PodReasonUnschedulable
MAX_CONDITION_MESSAGE = 1024
MAX_EVENTS_REMEMBERED = 16  # distinct (reason, message) pairs evented per pod, the oldest forgotten first
# Reasons that name an object another informer shows: said only when a second cycle finds them still so
# (the pod grouper creates a PodGroup before it names it on the pod, but the two watches may arrive apart).
_CONFIRMED_REASONS = frozenset({POD_GROUP_NOT_FOUND})


def stray_pods(jobs: Iterable[JobInfo]) -> dict[str, str]:
    """The waiting pods that name a sub-group their PodGroup does not have, with KAI's message."""
    return {key: message for job in jobs if job.stray for key, message in job.stray.items()}


class PodScheduledConditions:
    def __init__(self, effects: Effects, informers: InformerSet, label_key: str = c.NODE_POOL_LABEL) -> None:
        self.effects = effects
        self.informers = informers
        self.label_key = label_key  # the node-pool label (`message_on`)
        self.written: dict[str, tuple[str, str, str]] = {}  # pod uid -> PodScheduled as written
        self.evented: dict[str, dict[tuple[str, str], None]] = {}  # pod uid -> (reason, message) evented
        self._unconfirmed: set[str] = set()  # pod uids the last cycle found waiting for `_CONFIRMED_REASONS`
        self._watch_pods()

    def calls(
        self,
        live: LiveState,
        result: SessionResult,
        placed_jobs: set[str],
        busy: Callable[[str], bool],
        now: float,
        report: CycleReport,
        stray: Mapping[str, str] | None = None,
    ) -> list[Awaitable[None]]:
        """The `PodScheduled` = False writes for the pending pods of unschedulable jobs (jobs placed
        this cycle and `busy` pods, decided on, nominated or being bound, are left alone), for the
        waiting pods the scheduler cannot take (`live.rejected`) and for those that name a sub-group their
        PodGroup does not have (`stray`: pod key -> KAI's message; they are no pods of their job's)."""
        stray = stray or {}
        calls: list[Awaitable[None]] = []
        unconfirmed, self._unconfirmed = self._unconfirmed, set()

        def say(key: str, pod: JsonObject, why: Waiting) -> None:
            if why.reason in _CONFIRMED_REASONS:
                uid = str(pod["metadata"].get("uid") or "")
                self._unconfirmed.add(uid)
                if uid not in unconfirmed:
                    return  # the first cycle to find it so
            conditions = self._wanted(pod, why.reason, why.message[:MAX_CONDITION_MESSAGE], now)
            if conditions is not None:
                call = self._write(pod, conditions)
                calls.append(self.effects.limited(call, report, f"status of Pod {key}"))

        for job, message in result.unschedulable.items():
            pods = live.job_pods.get(job)
            if job in placed_jobs or pods is None:
                continue
            group = live.pod_groups.get(job)
            if group is not None and (group.get("spec") or {}).get("markUnschedulable") is False:
                continue  # KAI leaves such pods' PodScheduled condition alone
            why: Waiting | None = None
            for key in pods.waiting:
                pod = live.pods.get(key)
                # (A pod at the queue-admission gate waits for no node: never Unschedulable, design D4.)
                if pod is None or busy(key) or key in stray or not waits_for_scheduler(pod):
                    continue
                if why is None:
                    why = job_waiting(job, message, pod, live.pod_groups, live.invalid_groups)
                    if group is not None:
                        why = Waiting(why.reason, message_on(group, why.message, self.label_key))
                say(key, pod, why)
        cached = self.informers.pods.cache
        for key, why in live.rejected.items():
            pod = cached.get(key)
            if pod is not None and waits_for_scheduler(pod):
                say(key, pod, why)
        for key, message in stray.items():
            pod = cached.get(key)
            if pod is not None and waits_for_scheduler(pod):
                say(key, pod, Waiting(POD_REASON_UNSCHEDULABLE, message))
        return calls

    def _wanted(self, pod: JsonObject, reason: str, message: str, now: float) -> list[JsonObject] | None:
        """The pod's new `conditions` with PodScheduled False, or None when it (or what this loop wrote
        last, newer than the cache for a moment) says so already."""
        wanted = ("False", reason, message)
        uid = str(pod["metadata"].get("uid") or "")
        current: list[JsonObject] = list((pod.get("status") or {}).get("conditions") or [])
        ours = next((cond for cond in current if cond.get("type") == POD_SCHEDULED), None)
        shown = None if ours is None else (ours.get("status"), ours.get("reason"), ours.get("message"))
        if shown == wanted or self.written.get(uid) == wanted:
            return None
        stamp = self.effects.clock.stamp(now)
        if ours is not None and ours.get("status") == "False" and ours.get("lastTransitionTime"):
            stamp = str(ours["lastTransitionTime"])  # the status did not change: nor does the time
        condition: JsonObject = {
            "type": POD_SCHEDULED,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": stamp,
        }
        return [condition if cond is ours else cond for cond in current] if ours else [*current, condition]

    async def _write(self, pod: JsonObject, conditions: list[JsonObject]) -> None:
        meta = pod["metadata"]
        try:
            await self.effects.client.patch(
                PODS,
                meta["name"],
                {"status": {"conditions": conditions}},
                meta.get("namespace") or "default",
                subresource="status",
            )
        except ApiStatusError as error:
            if error.code != 404:  # gone: nothing to mark
                raise
            return
        ours = next(cond for cond in conditions if cond.get("type") == POD_SCHEDULED)
        uid = str(meta.get("uid") or "")
        reason, message = str(ours["reason"]), str(ours["message"])
        self.written[uid] = (str(ours["status"]), reason, message)
        evented = self.evented.setdefault(uid, {})
        if not self.effects.record_events or (reason, message) in evented:
            return
        evented[(reason, message)] = None
        if len(evented) > MAX_EVENTS_REMEMBERED:
            del evented[next(iter(evented))]
        await self.effects.event(pod, "Warning", reason, message)

    def _watch_pods(self) -> None:
        """Forget what was written to a pod once it is gone (or replaced by a new pod of the same name)."""

        def uid(pod: JsonObject) -> str:
            return str(metadata_of(pod).get("uid") or "")

        def pod_replaced(old: JsonObject, new: JsonObject) -> None:
            if uid(old) != uid(new):
                self.written.pop(uid(old), None)
                self.evented.pop(uid(old), None)

        def pod_gone(pod: JsonObject) -> None:
            self.written.pop(uid(pod), None)
            self.evented.pop(uid(pod), None)

        self.informers.pods.add_handler(on_update=pod_replaced, on_delete=pod_gone)


__all__ = [
    "MAX_CONDITION_MESSAGE",
    "POD_REASON_UNSCHEDULABLE",
    "POD_SCHEDULED",
    "PodScheduledConditions",
    "stray_pods",
]
