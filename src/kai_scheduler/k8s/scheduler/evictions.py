"""The scheduler's evict effect, as KAI's evictor does it (`pkg/scheduler/cache/evictor`): the pod gets the
condition `DisruptionTarget` (True, reason `PreemptionByScheduler`, the eviction's message) in a strategic
merge patch of its status, unless it has that very condition already, then it is deleted. A failed patch
fails the eviction (the pod is not deleted). The pod is remembered as terminating (`evicting`: pod key ->
uid) until the informers show it so, and an event on the pod names the action, the preemptor and the
reason (`eviction_event`).

KAI writes the condition only with `--update-pod-eviction-condition`; here it is always written, so that
the pod's own status says why it went (what kubectl and the workload's controller see)."""

from __future__ import annotations

from kai_scheduler.framework.decisions import Decision
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState

ACCESS = (access(PODS, "patch", subresource="status"), access(PODS, "delete"))

PREEMPTED = "Preempted"  # a victim of preempt, reclaim or consolidation (kube-scheduler's reason)
EVICTED = "Evicted"  # evicted for no other job (a stale gang)
DISRUPTION_TARGET = "DisruptionTarget"  # v1.DisruptionTarget
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"  # v1.PodReasonPreemptionByScheduler


def eviction_event(decision: Decision) -> tuple[str, str]:
    """(reason, message) of the event on an evicted pod: `Preempted by reclaim for ns/job on node-1:
    reclaimed for ns/job (queue b below fair share)`, or `Evicted by stalegangeviction on node-1: ...`."""
    if decision.for_job:
        return PREEMPTED, (
            f"Preempted by {decision.action} for {decision.for_job} on {decision.node}: {decision.reason}"
        )
    return EVICTED, f"Evicted by {decision.action} on {decision.node}: {decision.reason}"


def disruption_condition(pod: JsonObject, message: str, stamp: str) -> JsonObject | None:
    """The `DisruptionTarget` condition to write, or None when the pod has it already (Kubernetes'
    `UpdatePodCondition`: the transition time is kept while the status stays True)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    current = next((cond for cond in conditions if cond.get("type") == DISRUPTION_TARGET), None)
    wanted = ("True", PREEMPTION_BY_SCHEDULER, message, None)
    if current is not None:
        shown = tuple(current.get(key) for key in ("status", "reason", "message", "lastProbeTime"))
        if shown == wanted:
            return None
        if current.get("status") == "True" and current.get("lastTransitionTime"):
            stamp = str(current["lastTransitionTime"])
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": message,
        "lastProbeTime": None,
        "lastTransitionTime": stamp,
    }


class Evictions:
    def __init__(self, effects: Effects, informers: InformerSet) -> None:
        self.effects = effects
        self.informers = informers
        self.evicting: dict[str, str] = {}  # pod key -> uid evicted

    def forget_resolved(self) -> None:
        """Drop the pods the informers show terminating (or gone)."""
        pods = self.informers.pods
        for key, uid in list(self.evicting.items()):
            obj = pods.cache.get(key)
            if (
                obj is None
                or str(obj["metadata"].get("uid")) != uid
                or obj["metadata"].get("deletionTimestamp")
            ):
                del self.evicting[key]

    async def evict(self, live: LiveState, decision: Decision, report: CycleReport) -> None:
        pod = live.pods.get(decision.pod)
        if pod is None:
            return
        meta = pod["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        reason, message = eviction_event(decision)
        try:
            await self._evict(pod, namespace, name, message)
        except ApiStatusError as error:
            if error.code != 404:  # gone already: as good as evicted
                raise
        self.evicting[decision.pod] = str(meta.get("uid") or "")
        report.evictions.append(decision.pod)
        if self.effects.record_events:
            await self.effects.event(pod, "Normal", reason, message)

    async def _evict(self, pod: JsonObject, namespace: str, name: str, message: str) -> None:
        condition = disruption_condition(pod, message, self.effects.clock.stamp(self.effects.clock.now()))
        if condition is not None:
            await self.effects.client.patch(
                PODS,
                name,
                {"status": {"conditions": [condition]}},
                namespace,
                patch_type="strategic",
                subresource="status",
            )
        await self.effects.client.delete(PODS, name, namespace)


__all__ = [
    "ACCESS",
    "DISRUPTION_TARGET",
    "EVICTED",
    "PREEMPTED",
    "PREEMPTION_BY_SCHEDULER",
    "Evictions",
    "disruption_condition",
    "eviction_event",
]
