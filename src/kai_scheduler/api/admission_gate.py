"""Queue admission gating's names on the pod (KAI's design `queue-admission-gating`, issue #1615): the
scheduling gate our webhook adds to the pods of an opted-in queue, and the annotation the scheduler stamps
when it removes it (the start of the pod's quota reservation). Which gates a pod carries decides what the
scheduler may do with it: only the pods whose sole gate is ours are the scheduler's to admit; a pod with
any other gate belongs to that gate's owner (design D9)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

QUEUE_ADMISSION_GATE: Final = "kai.scheduler/queue-admission"
# RFC 3339, written in the same patch that removes the gate (design D12's expiry anchor).
QUEUE_ADMITTED_ANNOTATION: Final = "kai.scheduler/queue-admitted-timestamp"


def gate_names(gates: Iterable[Any]) -> list[str]:
    """The names of a pod's `spec.schedulingGates`, as model objects or as JSON mappings."""
    return [str(g.get("name", "")) if isinstance(g, Mapping) else str(g.name) for g in gates]


def has_our_gate(gates: Iterable[Any]) -> bool:
    return QUEUE_ADMISSION_GATE in gate_names(gates)


def only_our_gate(gates: Iterable[Any]) -> bool:
    """Whether the queue-admission gate is the pod's only gate (the only pods `ungate` admits)."""
    names = gate_names(gates)
    return bool(names) and all(name == QUEUE_ADMISSION_GATE for name in names)


def gets_gate(*, ours: bool, queue_opts_in: bool | None, gates: Iterable[Any]) -> bool:
    """The webhook's rule at a pod's creation (design D2, D8, D10), with the feature switched on: a pod for
    our scheduler gets the gate when its queue opts in, or does not exist (`queue_opts_in` None: the
    opt-in cannot be read, and a pod of no queue could never run); no quota is looked at."""
    return ours and queue_opts_in is not False and not has_our_gate(gates)
