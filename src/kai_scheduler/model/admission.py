"""What a job's pods say about queue admission gating (`api.admission_gate`), as the snapshot hands it to
the `ungate` action and to queue accounting: the pods held back by our gate alone (with what each would
ask of its queue), those held by ours and another's, and when each admitted pod that still waits had
its gate removed (its quota reservation, design D6). Most jobs have none of these: `JobInfo.admission`
is then None and costs nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from kai_scheduler.model.resources import PodRequest

if TYPE_CHECKING:  # (jobs.py imports this module)
    from kai_scheduler.model.jobs import Placement


class PodAsk(Protocol):
    """What a pod asks, as checks that judge gated pods and tasks alike read it (a `GatedPod`, a
    `TaskInfo`): what its queue is charged and the nodes it may use."""

    @property
    def key(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def request(self) -> PodRequest: ...
    @property
    def placement(self) -> Placement: ...


class GatedPod(NamedTuple):
    """A pending pod whose only scheduling gate is the queue-admission gate."""

    key: str  # namespace/name
    name: str
    rank: float  # creation order
    request: PodRequest
    placement: Placement


@dataclass(slots=True)
class AdmissionFacts:
    # Held by our gate alone, oldest first: the scheduler's to admit.
    gated: list[GatedPod] = field(default_factory=list)
    # Held by our gate and another's (pod keys): only a feature switched off removes ours from them.
    also_foreign: list[str] = field(default_factory=list)
    # Pods without our gate, pending, stamped admitted: pod key -> when (session-clock seconds).
    admitted: dict[str, float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.gated or self.also_foreign or self.admitted)
