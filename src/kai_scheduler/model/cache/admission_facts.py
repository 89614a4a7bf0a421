"""A gated pod as queue admission gating sees it (`model.admission`), noted on its job when the cache makes
the job: the gated pod is no task, so its request is derived here, once per pod object as any task's."""

from __future__ import annotations

from kai_scheduler.api.admission_gate import has_our_gate, only_our_gate
from kai_scheduler.model.admission import AdmissionFacts, GatedPod
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.snapshot import PodState


def note_gated(facts: AdmissionFacts, state: PodState, asks: PodAsks) -> None:
    """Note a gated pod of the job on `facts` if it carries our gate (others' gates are not ours to read)."""
    gates = state.pod.spec.scheduling_gates
    if not has_our_gate(gates):
        return
    if not only_our_gate(gates):
        facts.also_foreign.append(state.pod.key)
        return
    request, placement, _ = asks.of(state.pod)
    facts.gated.append(GatedPod(state.pod.key, state.pod.metadata.name, state.rank, request, placement))
