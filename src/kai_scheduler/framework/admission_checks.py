"""What queue admission (the `ungate` action) asks of the capacity checks that count more of a pod than its
`Resources` (the accounted-resource limits): KAI's queue-admission design applies to every queue-capacity
failure, and such a check can only judge pods it sees, not a sum of requests. The action opens them,
asks each about the pods it would admit, has them count what it admits and the admitted pods that still
wait as reserved, and closes them, which takes the reservations back, before the session ends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kai_scheduler.model.admission import PodAsk
from kai_scheduler.model.jobs import JobInfo


class AdmissionCheck(Protocol):
    def begin_admission(self) -> None:
        """From now until `end_admission`, the check's per-attempt answer leaves out what
        `admission_refusal` judges (the action's reservations already count the job's waiting pods)."""

    def admission_refusal(self, job: JobInfo, pods: Sequence[PodAsk]) -> str | None:
        """Why `pods` of `job` may not be admitted now (None: they may), on no node at all."""

    def reserve_admission(self, job: JobInfo, pods: Sequence[PodAsk]) -> None:
        """Count `pods` of `job` as held by its queues until `end_admission`."""

    def end_admission(self) -> None:
        """Take back every reservation and answer as before `begin_admission`."""
