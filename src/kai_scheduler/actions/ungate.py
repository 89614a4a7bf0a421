"""ungate: remove the queue-admission gate from the pod groups their queues would admit (KAI's design
`queue-admission-gating`, issue #1615), last in the cycle, so that it sees the cycle's allocations and
evictions.

The gate caches the allocation-time quota verdict (design D1): a pod group loses it only when the same
capacity checks allocate runs (limits on the whole queue path, non-preemptible quota) pass for it, and
every gated pod group is looked at again each cycle. Pods admitted earlier that still wait hold their
queue's quota as reserved (D6) until `reservationTimeout` after their admission (D12), so admissions of
several cycles never exceed it together; within the cycle each admission is committed before the next is
judged. Reserved demand is added to the queues' allocation while the action runs (the capacity checks and
queue order then see allocated + reserved, D11) and taken off again before the session closes. Checks that
count more of a pod than its request (accounted-resource limits: `framework.admission_checks`) judge the
pods themselves and hold their own reservations alike, so every queue-capacity failure gates, as the
AccountedResource design asks (a queue naming a missing AccountedResource keeps its pods gated with
`AccountedResourceNotFound`).

Order: pod groups whose gang lost its gate part-way (a crash between patches) first, then the rest, each
through the queue tree in queue and job order (`QueueOrderedJobs`). A gang's minimum is admitted as one,
the pods past it (an elastic tail) one at a time, oldest first, until one does not fit.

Pods whose queue does not opt in are released unconditionally, and with the feature switched off every pod
carrying our gate is (even one that also has a foreign gate: only ours is removed). Pods whose queue does
not exist stay gated (D10). Nothing here writes to the cluster: the decisions are `Session.ungates`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai_scheduler.actions.job_queue import QueueOrderedJobs
from kai_scheduler.api.reasons import QUEUE_DOES_NOT_EXIST, WaitReason, code_of
from kai_scheduler.framework.admission_config import UNGATE_ACTION
from kai_scheduler.framework.decisions import Ungating
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.admission import AdmissionFacts, GatedPod, PodAsk
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import ClusterSnapshot

# The marker a gated pod group's wait reason starts with (design: "a distinct gated marker").
GATED_MARKER = "QueueAdmissionGated"
_TERMINAL = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})


def gated_jobs(snapshot: ClusterSnapshot, *, verify: bool = False) -> list[JobInfo]:
    """The jobs with a pod that meets our gate (gated, or admitted and waiting), in snapshot order: as the
    cluster cache keeps them (`ClusterSnapshot.admission_jobs`), else found among every job. With `verify`
    (`KAI_SCHEDULER_VERIFY_REUSE`) the kept ones are compared with those found, a difference raising
    `CarriedMismatch`."""
    kept = snapshot.admission_jobs
    if kept is not None and not verify:
        return kept
    found = [job for job in snapshot.jobs.values() if job.admission is not None]
    if kept is not None and [id(job) for job in kept] != [id(job) for job in found]:
        raise CarriedMismatch(
            f"the jobs kept as meeting the admission gate {[job.key for job in kept]} are not those found "
            f"among every job {[job.key for job in found]}"
        )
    return found


class Ungate:
    name = UNGATE_ACTION

    def execute(self, session: Session) -> None:
        jobs = gated_jobs(session.snapshot, verify=session.verify_carried)
        if not jobs:
            return
        if not session.config.admission_gating.enabled:
            for job in jobs:
                facts = _facts(job)
                pods = [pod.key for pod in facts.gated] + facts.also_foreign
                if pods:
                    _release(session, job, pods, "queue admission gating is switched off")
            return
        ledger = _Reservations(session)
        ledger.reserve_admitted(jobs)
        torn: list[JobInfo] = []
        rest: list[JobInfo] = []
        queues = session.snapshot.queues
        for job in jobs:
            facts = _facts(job)
            if not facts.gated:
                continue
            if job.queue not in queues:
                problem = job.invalid_reason or f"queue {job.queue} does not exist"
                session.unschedulable[job.key] = WaitReason(
                    f"{GATED_MARKER}: {problem}", QUEUE_DOES_NOT_EXIST
                )
            elif not queues[job.queue].admission_gating:
                _release(session, job, [pod.key for pod in facts.gated], f"queue {job.queue} does not opt in")
            else:
                (torn if 0 < _ungated_alive(job) < job.min_member else rest).append(job)
        counts = session.counts[self.name]
        for group in (torn, rest):
            order = QueueOrderedJobs(session, group)
            while (next_job := order.pop()) is not None:
                counts.acted_on += 1
                _admit(session, ledger, next_job)
        ledger.take_back()


def _facts(job: JobInfo) -> AdmissionFacts:
    assert job.admission is not None
    return job.admission


def _ungated_alive(job: JobInfo) -> int:
    return len(job.tasks) - job.count(_TERMINAL)


def _admit(session: Session, ledger: _Reservations, job: JobInfo) -> None:
    """Admit what of the job its queue takes: the gang's missing minimum as one, then one pod at a time."""
    gated = sorted(_facts(job).gated, key=lambda pod: pod.rank)
    alive = _ungated_alive(job)
    missing = max(0, job.min_member - alive)
    if alive + len(gated) < job.min_member:
        return  # the gang is not all there yet: its wait reason (waiting for pods) stands
    blocks = [gated[:missing]] if missing else []
    blocks.extend([pod] for pod in gated[missing:])
    admitted: list[str] = []
    for block in blocks:
        demand = ledger.demand(block)
        reason = ledger.refusal(job, demand, block)
        if reason is not None:
            if not admitted:
                session.unschedulable[job.key] = WaitReason(f"{GATED_MARKER}: {reason}", code_of(reason))
            break
        ledger.commit(job, demand, block)
        admitted.extend(pod.key for pod in block)
    if admitted:
        _release(session, job, admitted, f"queue {job.queue} admits it within its quota and limits")


def _release(session: Session, job: JobInfo, pods: list[str], reason: str) -> None:
    session.ungates.append(Ungating(job.key, job.queue, tuple(pods), reason))
    session.unschedulable.pop(job.key, None)


class _Reservations:
    """Reserved demand added to the queues' allocation (and non-preemptible allocation) on the whole queue
    path while the action runs, so that the session's capacity checks and queue order count it."""

    def __init__(self, session: Session) -> None:
        self._session = session
        # Each queue's own allocation before the action, put back as it was (not subtracted: floats).
        self._before: dict[str, tuple[QueueInfo, Resources, Resources]] = {}
        # Why a job of no task of its own (all its pods gated) was refused, by its queue, whether it is
        # preemptible and its demand: allocations only grow while the action runs, so the same ask of the
        # same queue is refused again, and a 50,000-pod backlog of alike pods is judged once per shape.
        self._refused: dict[tuple[str, bool, float, float, float], str] = {}
        self._checks = session.points.admission_checks
        for check in self._checks:
            check.begin_admission()

    def refusal(self, job: JobInfo, demand: Resources, pods: list[GatedPod]) -> str | None:
        """The session's capacity checks' reason against admitting `pods` (asking `demand`) of `job` now
        (None: admit)."""
        reason = self._capacity_refusal(job, demand)
        for check in self._checks:
            if reason is not None:
                break
            reason = check.admission_refusal(job, pods)
        return reason

    def _capacity_refusal(self, job: JobInfo, demand: Resources) -> str | None:
        if job.tasks:  # (a torn gang's own pending pods may count in a check)
            return self._session.check_job_capacity(job, demand)
        shape = (job.queue, job.preemptible, demand.gpu, demand.cpu, demand.memory)
        reason = self._refused.get(shape)
        if reason is None:
            reason = self._session.check_job_capacity(job, demand)
            if reason is not None:
                self._refused[shape] = reason
        return reason

    def demand(self, pods: list[GatedPod]) -> Resources:
        snapshot = self._session.snapshot
        total = Resources()
        for pod in pods:
            total.add(pod.request.queue_resources(None, snapshot.min_gpu_memory_mib))
        return total

    def reserve_admitted(self, jobs: list[JobInfo]) -> None:
        """Admitted pods still pending hold their queue's quota, until the reservation times out."""
        session = self._session
        timeout = session.config.admission_gating.reservation_timeout
        for job in jobs:
            admitted = _facts(job).admitted
            if not admitted or job.queue not in session.snapshot.queues:
                continue
            total = Resources()
            waiting: list[TaskInfo] = []
            for task in job.tasks:
                since = admitted.get(task.key)
                if since is not None and task.status is TaskStatus.PENDING and session.now - since < timeout:
                    total.add(task.request.queue_resources(None, session.snapshot.min_gpu_memory_mib))
                    waiting.append(task)
                    session.wake_at(since + timeout)  # the reservation lapses then: another may be admitted
            self.commit(job, total, waiting)

    def commit(self, job: JobInfo, demand: Resources, pods: Sequence[PodAsk]) -> None:
        for check in self._checks:
            check.reserve_admission(job, pods)
        non_preemptible = not job.preemptible
        before = self._before
        for queue in self._session.snapshot.queues.ancestry(job.queue):
            if queue.name not in before:
                before[queue.name] = (queue, queue.allocated.copy(), queue.allocated_non_preemptible.copy())
            queue.allocated.add(demand)
            if non_preemptible:
                queue.allocated_non_preemptible.add(demand)

    def take_back(self) -> None:
        for queue, allocated, non_preemptible in self._before.values():
            for now, was in (
                (queue.allocated, allocated),
                (queue.allocated_non_preemptible, non_preemptible),
            ):
                now.gpu, now.cpu, now.memory = was.gpu, was.cpu, was.memory
        self._before.clear()
        for check in self._checks:
            check.end_admission()
