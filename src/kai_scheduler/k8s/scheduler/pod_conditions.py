"""The scheduler's `PodScheduled` effect: each pending pod of a job that ends the cycle unschedulable gets
the pod condition `PodScheduled` = `False`, reason `Unschedulable`, the job's reason as message (module doc
of `loop.py`), written only when it changes (what was written is remembered per pod uid)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kai_scheduler.api import constants as c
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState
from kai_scheduler.k8s.scheduler.pod_groups import message_on

POD_SCHEDULED = "PodScheduled"
POD_REASON_UNSCHEDULABLE = "Unschedulable"  # kube's v1.PodReasonUnschedulable
MAX_CONDITION_MESSAGE = 1024


class PodScheduledConditions:
    def __init__(self, effects: Effects, informers: InformerSet, label_key: str = c.NODE_POOL_LABEL) -> None:
        self.effects = effects
        self.informers = informers
        self.label_key = label_key  # the node-pool label (`message_on`)
        self.written: dict[str, tuple[str, str, str]] = {}  # pod uid -> PodScheduled as written
        self._watch_pods()

    def calls(
        self,
        live: LiveState,
        result: SessionResult,
        placed_jobs: set[str],
        busy: Callable[[str], bool],
        now: float,
        report: CycleReport,
    ) -> list[Awaitable[None]]:
        """The `PodScheduled` = False writes for the pending pods of unschedulable jobs (jobs placed
        this cycle and `busy` pods, decided on, nominated or being bound, are left alone)."""
        calls: list[Awaitable[None]] = []
        for job, message in result.unschedulable.items():
            pods = live.job_pods.get(job)
            if job in placed_jobs or pods is None:
                continue
            group = live.pod_groups.get(job)
            if group is not None:
                if (group.get("spec") or {}).get("markUnschedulable") is False:
                    continue  # KAI leaves such pods' PodScheduled condition alone
                message = message_on(group, message, self.label_key)
            for key in pods.waiting:
                pod = live.pods.get(key)
                if pod is None or busy(key):
                    continue
                conditions = self._wanted(pod, message[:MAX_CONDITION_MESSAGE], now)
                if conditions is not None:
                    call = self._write(pod, conditions)
                    calls.append(self.effects.limited(call, report, f"status of Pod {key}"))
        return calls

    def _wanted(self, pod: JsonObject, message: str, now: float) -> list[JsonObject] | None:
        """The pod's new `conditions` with PodScheduled False, or None when it (or what this loop wrote
        last, newer than the cache for a moment) says so already."""
        wanted = ("False", POD_REASON_UNSCHEDULABLE, message)
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
            "reason": POD_REASON_UNSCHEDULABLE,
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
        self.written[str(meta.get("uid") or "")] = (
            str(ours["status"]),
            str(ours["reason"]),
            str(ours["message"]),
        )

    def _watch_pods(self) -> None:
        """Forget what was written to a pod once it is gone (or replaced by a new pod of the same name)."""

        def uid(pod: JsonObject) -> str:
            return str(metadata_of(pod).get("uid") or "")

        def pod_replaced(old: JsonObject, new: JsonObject) -> None:
            if uid(old) != uid(new):
                self.written.pop(uid(old), None)

        def pod_gone(pod: JsonObject) -> None:
            self.written.pop(uid(pod), None)

        self.informers.pods.add_handler(on_update=pod_replaced, on_delete=pod_gone)


__all__ = ["MAX_CONDITION_MESSAGE", "POD_REASON_UNSCHEDULABLE", "POD_SCHEDULED", "PodScheduledConditions"]
