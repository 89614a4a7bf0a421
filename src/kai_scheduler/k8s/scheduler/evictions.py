"""The scheduler's evict effect: the pod's `eviction` subresource (policy/v1), the pod remembered as
terminating (`evicting`: pod key -> uid) until the informers show it so."""

from __future__ import annotations

from kai_scheduler.framework.decisions import Decision
from kai_scheduler.k8s.runtime.client import ApiStatusError
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState


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
            await self.effects.event(
                pod, "Normal", "Evict", f"Evicted by {decision.action}: {decision.reason}"
            )


__all__ = ["Evictions"]
