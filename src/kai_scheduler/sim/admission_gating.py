"""Queue admission gating in the simulator: what the webhook does to a pod when it is created (the gate, by
the same rule as live mode's: `api.admission_gate.gets_gate`) and what the scheduler's patch does when the
`ungate` action admits it (the gate removed, the admission stamped), so that a what-if with the feature
switched on shows what gating changes. The pod is schedulable from the next cycle, as on a cluster."""

from __future__ import annotations

from collections.abc import Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.api.admission_gate import QUEUE_ADMISSION_GATE, gets_gate
from kai_scheduler.api.objects import Pod, PodSchedulingGate, Queue


def queue_of(pod: Pod) -> str:
    """The queue a pod names (the pod grouper's default when it names none), as the webhook reads it."""
    return pod.metadata.labels.get(c.QUEUE_LABEL) or c.DEFAULT_QUEUE


def gated_at_creation(pod: Pod, queues: Mapping[str, Queue]) -> Pod:
    """The pod as the admission webhook lets it in."""
    queue = queues.get(queue_of(pod))
    opts_in = None if queue is None else bool(queue.spec.admission_gating)
    ours = pod.spec.scheduler_name == c.SCHEDULER_NAME
    if not gets_gate(ours=ours, queue_opts_in=opts_in, gates=pod.spec.scheduling_gates):
        return pod
    return _with_gates(pod, [*pod.spec.scheduling_gates, PodSchedulingGate(name=QUEUE_ADMISSION_GATE)])


def without_our_gate(pod: Pod) -> Pod:
    """The pod after the scheduler's patch: our gate gone, any other gate kept."""
    gates = [g for g in pod.spec.scheduling_gates if g.name != QUEUE_ADMISSION_GATE]
    return _with_gates(pod, gates)


def _with_gates(pod: Pod, gates: list[PodSchedulingGate]) -> Pod:
    return pod.model_copy(update={"spec": pod.spec.model_copy(update={"scheduling_gates": gates})})
