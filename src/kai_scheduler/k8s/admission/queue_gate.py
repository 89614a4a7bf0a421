"""The pod mutation's queue admission gate (KAI's design `queue-admission-gating`, D2/D8/D10): with the
feature switched on (`kai-scheduler run --queue-admission-gating`, the chart's `queueAdmissionGating`), a
new pod of this scheduler whose queue opts in (`spec.admissionGating: true`), or names a queue that does not
exist, gets the `kai.scheduler/queue-admission` scheduling gate; no quota is looked at (the scheduler's
`ungate` action decides). Gates can only be added at creation, so only a CREATE is mutated.

Which queues opt in comes from a Queue informer of the admission component (`QueueOptIns`), read from the
webhook server's threads: a lookup of one key in the informer's cache, never a write."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE, gets_gate
from kai_scheduler.k8s.runtime.client import QUEUES, KubeClient
from kai_scheduler.k8s.runtime.informer import Informer

# Queue name -> whether it opts in (None: no such queue).
OptIn = Callable[[str], bool | None]


class QueueOptIns:
    """Whether each queue opts in, from the Queues the informer holds."""

    def __init__(self, client: KubeClient) -> None:
        self.informer = Informer(client, QUEUES)

    def __call__(self, name: str) -> bool | None:
        queue = self.informer.cache.get(name)
        if queue is None:
            return None
        return (queue.get("spec") or {}).get("admissionGating") is True


def queue_gate_patch(obj: Mapping[str, Any], spec: Mapping[str, Any], opt_in: OptIn) -> list[dict[str, Any]]:
    """The JSONPatch operations that add our gate to a new pod of this scheduler (none: it gets none)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    queue = labels.get(c.QUEUE_LABEL) or c.DEFAULT_QUEUE
    gates = spec.get("schedulingGates") or []
    if not gets_gate(ours=True, queue_opts_in=opt_in(str(queue)), gates=gates):
        return []
    ours = {"name": QUEUE_ADMISSION_GATE}
    if gates:
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": ours}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [ours]}]
