"""The scheduler's evict effect: the pod's `eviction` subresource (policy/v1), the pod remembered as
terminating (`evicting`: pod key -> uid) until the informers show it so, and an event on the pod that names
the action, the preemptor and the reason (`eviction_event`)."""

from __future__ import annotations

from kai_scheduler.framework.decisions import Decision
from kai_scheduler.k8s.runtime.client import ApiStatusError
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState

PREEMPTED = "Preempted"  # a victim of preempt, reclaim or consolidation (kube-scheduler's reason)
EVICTED = "Evicted"  # evicted for no other job (a stale gang)


def eviction_event(decision: Decision) -> tuple[str, str]:
    """(reason, message) of the event on an evicted pod: `Preempted by reclaim for ns/job on node-1:
    reclaimed for ns/job (queue b below fair share)`, or `Evicted by stalegangeviction on node-1: ...`."""
    if decision.for_job:
        return PREEMPTED, (
            f"Preempted by {decision.action} for {decision.for_job} on {decision.node}: {decision.reason}"
        )
    return EVICTED, f"Evicted by {decision.action} on {decision.node}: {decision.reason}"


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
        try:
            await self.effects.client.evict(namespace, name)
        except ApiStatusError as error:
            if error.code != 404:  # gone already: as good as evicted
                raise
        self.evicting[decision.pod] = str(meta.get("uid") or "")
        report.evictions.append(decision.pod)
        if self.effects.record_events:
            reason, message = eviction_event(decision)
            await self.effects.event(pod, "Normal", reason, message)


__all__ = ["EVICTED", "PREEMPTED", "Evictions", "eviction_event"]
