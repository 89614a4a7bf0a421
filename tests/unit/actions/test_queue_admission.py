"""Allocate's admission (`queue_admission.admissible`): a job's answer follows what its queue's checks read
as placements move the queue, whether the answer was kept (a refusal, with the inputs it read) or worked
out afresh (a job the queue admits is not kept: its attempt mostly places it)."""

from __future__ import annotations

from helpers import node, open_session, pod, queue
from kai_scheduler.actions.queue_admission import admissible
from kai_scheduler.framework.gang import tasks_to_allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo


def _session() -> Session:
    # A queue limited to 2 GPUs, a job of 2 GPUs and one of 1.
    return open_session(
        [node("n0", gpus=8), queue("q", gpu_limit=2), pod("big", "q", gpus=2), pod("small", "q", gpus=1)]
    )


def _job(session: Session, gpus: int) -> JobInfo:
    return next(job for job in session.snapshot.jobs.values() if job.tasks[0].request.whole_gpus == gpus)


def _admissible(session: Session, job: JobInfo) -> bool:
    return admissible(session, job, tasks_to_allocate(session, job))


def test_a_job_admitted_then_refused_as_its_queue_fills_is_admitted_again_as_it_empties() -> None:
    session = _session()
    big, small = _job(session, 2), _job(session, 1)
    assert _admissible(session, small)
    assert small not in session.admissions  # admitted: not kept
    statement = session.statement("allocate")
    statement.allocate(big.tasks[0], 0, (), "test")
    assert not _admissible(session, small)  # the queue is at its limit
    assert "OverLimit" in session.unschedulable[small.key]
    assert small in session.admissions  # refused: kept with what the checks read
    assert not _admissible(session, small)  # (given again)
    statement.discard()
    assert _admissible(session, small)  # the kept refusal read the queue full: not given now
