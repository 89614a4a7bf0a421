"""The scheduler's ungate effect (queue admission gating, KAI's design `queue-admission-gating`): for each pod
the `ungate` action admitted, a JSON patch that removes the queue-admission gate, and only it, and stamps
`kai.scheduler/queue-admitted-timestamp` (the start of its quota reservation) in the same write. The patch
tests the gate's name at the index it removes, so a pod whose gates changed since the informer saw it is
not touched (422: looked at again next cycle). The patched pod goes into the informer's cache at once
(`Informer.assume`), so that the next cycle counts it as admitted even before the watch shows it.

One `Admitted` Normal event per pod group admitted (on its PodGroup; on the pod for a bare pod), written
with the patches: the design's "superseding condition and Admitted event in the same transition" (the
PodGroup's waiting condition goes with its reason, which the action drops)."""

from __future__ import annotations

from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE, QUEUE_ADMITTED_ANNOTATION, gate_names
from kai_scheduler.framework.decisions import Ungating
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState

ACCESS = (access(PODS, "patch"),)

ADMITTED = "Admitted"  # the design's event reason


def ungate_patch(pod: JsonObject, stamp: str) -> list[JsonObject] | None:
    """The JSON patch that removes our gate from `pod` and stamps its admission (None: it has no gate of
    ours). `~1` escapes the annotation key's `/` (RFC 6901)."""
    names = gate_names((pod.get("spec") or {}).get("schedulingGates") or [])
    if QUEUE_ADMISSION_GATE not in names:
        return None
    index = names.index(QUEUE_ADMISSION_GATE)
    path = f"/spec/schedulingGates/{index}"
    patch: list[JsonObject] = [
        {"op": "test", "path": f"{path}/name", "value": QUEUE_ADMISSION_GATE},
        {"op": "remove", "path": path},
    ]
    annotation = QUEUE_ADMITTED_ANNOTATION.replace("~", "~0").replace("/", "~1")
    if (pod.get("metadata") or {}).get("annotations") is None:
        patch.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    patch.append({"op": "add", "path": f"/metadata/annotations/{annotation}", "value": stamp})
    return patch


class Ungates:
    def __init__(self, effects: Effects, informers: InformerSet) -> None:
        self.effects = effects
        self.informers = informers

    async def ungate(self, live: LiveState, ungating: Ungating, report: CycleReport) -> None:
        clock = self.effects.clock
        stamp = clock.stamp(clock.now())
        patched: list[str] = []
        for key in ungating.pods:
            pod = live.pods.get(key)
            patch = None if pod is None else ungate_patch(pod, stamp)
            if pod is None or patch is None:
                continue
            meta = pod["metadata"]
            try:
                written = await self.effects.client.patch(
                    PODS, meta["name"], patch, meta.get("namespace") or "default", patch_type="json"
                )
            except ApiStatusError as error:
                if error.code in (404, 409, 422):  # gone, or its gates changed: looked at next cycle
                    report.errors.append(f"ungate {key}: {error}")
                    continue
                raise
            self.informers.pods.assume(written)
            patched.append(key)
        report.ungated.extend(patched)
        if patched and self.effects.record_events:
            target = live.pod_groups.get(ungating.job) or live.pods.get(ungating.pods[0])
            if target is not None:
                message = f"{len(patched)} pods admitted by queue {ungating.queue}: {ungating.reason}"
                await self.effects.event(target, "Normal", ADMITTED, message)


__all__ = ["ACCESS", "ADMITTED", "Ungates", "ungate_patch"]
