"""Whether allocate may try a job's next attempt at all: a whole gang, within its queues' limits and
non-preemptible quota (`admissible`); the answer kept per job, carried across cycles while what it reads
stays."""

from __future__ import annotations

from collections.abc import Hashable

from kai_scheduler.framework.gang import kept_quota_request, lone_whole_gang, quota_request_of
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo


def admissible(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
    """Whether `tasks` (the job's next attempt) of `job` may be tried at all: a whole gang, within its
    queues' limits and quota; records why not. The answer depends on the job's version (its pods), the
    cluster's largest GPU memory (the request) and what the capacity checks read of the session, so it is
    kept by those (`Session.admissions`) and given again, in this cycle or a later one (issue #23,
    point 1: a job whose queue did not move is not checked again)."""
    refused, reason = admission(session, job, tasks)
    if reason is not None:
        session.unschedulable[job.key] = reason
    return not refused


def admission(
    session: Session, job: JobInfo, tasks: list[TaskInfo], inputs: Hashable | None = None
) -> tuple[bool, str | None]:
    """`admissible`'s answer without writing it: whether the queue's checks refuse `tasks` of `job`, and
    why (None with no pods to try: nothing is said). `inputs`: `Session.job_capacity_inputs` of the job,
    when the caller has it (the same for every job of a queue).

    Without `inputs`, a job with no answer kept at its version is checked without reading them, and its
    answer kept (with them) only when the queue refuses it: a job that may be tried is mostly placed by
    its attempt (a first cycle places most of the jobs it admits, 15,900 at 5,000 nodes), which moves its
    version, and its queue's inputs, worked out to keep its answer by, cost more than its check. (A job
    that then finds no node is checked again as it is next handed out, or kept by a caller that has the
    inputs: `walk_replay`.)"""
    if not tasks:
        return True, None
    kept = session.admissions.get(job)
    if inputs is None:
        if kept is None or kept[0][0] != job.version:
            return _fresh_admission(session, job, tasks)
        inputs = session.job_capacity_inputs(job)
    key = _kept_by(session, job, inputs)
    if inputs is not None and kept is not None and kept[0] == key:
        reason = kept[1]
        if session.verify_carried:
            _check_kept(session, job, tasks, reason)
    else:
        reason = _refusal(session, job, tasks)
        if session.verify_carried:
            _check_kept(session, job, tasks, reason)
        if inputs is not None:
            session.admissions[job] = (key, reason)
    return reason is not None, reason


def _fresh_admission(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> tuple[bool, str | None]:
    """`admission` of a job with no answer kept at its version, kept only when refused (see there)."""
    reason = _refusal(session, job, tasks)
    if session.verify_carried:
        _check_kept(session, job, tasks, reason)
    if reason is None:
        return False, None
    inputs = session.job_capacity_inputs(job)
    if inputs is not None:
        session.admissions[job] = (_kept_by(session, job, inputs), reason)
    return True, reason


def _kept_by(session: Session, job: JobInfo, inputs: Hashable | None) -> tuple[Hashable, ...]:
    """What a job's admission answer is kept by: its version, the cluster's largest GPU memory and its
    queue's capacity inputs."""
    return (job.version, session.snapshot.max_gpu_memory_mib, inputs)


def _refusal(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> str | None:
    """Why `tasks` of `job` may not be tried (None: they may); the gang's part kept by the job's version
    (`Session.gang_refusals`: a large gang's readiness reads every pod), but for a job of one pod, a whole
    gang (`lone_whole_gang`, asked first: most jobs, each asked once a version in a first cycle)."""
    if not lone_whole_gang(job, tasks):
        gang = session.gang_refusals.get(job)
        if gang is None or gang[0] != job.version:
            gang = session.gang_refusals[job] = (job.version, _counted_gang_refusal(job, tasks))
        if gang[1] is not None:
            return gang[1]
    return session.check_job_capacity(job, kept_quota_request(session, tasks))


def _plain_refusal(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> str | None:
    """`_refusal` worked out now, whatever is kept."""
    gang = _gang_refusal(job, tasks)
    return gang if gang is not None else session.check_job_capacity(job, quota_request_of(session, tasks))


def _gang_refusal(job: JobInfo, tasks: list[TaskInfo]) -> str | None:
    """Why `tasks` of `job` are not a gang that may be tried (None: they are): most jobs are one pod,
    which is a whole gang (`lone_whole_gang`) without counting their pods or making their sub-group tree."""
    return None if lone_whole_gang(job, tasks) else _counted_gang_refusal(job, tasks)


def _counted_gang_refusal(job: JobInfo, tasks: list[TaskInfo]) -> str | None:
    """`_gang_refusal` worked out from the job's counts and sub-group tree."""
    if not job.is_gang_satisfied():
        missing = job.min_member - job.active_allocated()
        if len(tasks) < missing:
            return f"waiting for pods: the gang needs {missing} more but has fewer pending"
        if not job.tree().is_ready():
            # KAI's IsReadyForScheduling: minSubGroup of each group's children have their pods.
            return "waiting for pods: too few sub-groups have the pods their minMember needs"
    return None


def _check_kept(session: Session, job: JobInfo, tasks: list[TaskInfo], reason: str | None) -> None:
    fresh = _plain_refusal(session, job, tasks)
    if fresh != reason:
        raise CarriedMismatch(
            f"{job.key}: whether its next attempt may be tried, kept from an earlier check ({reason!r}), "
            f"differs from the answer worked out again ({fresh!r})"
        )
