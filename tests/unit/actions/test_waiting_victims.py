"""The victim actions find their candidates among the waiting jobs that may be victims (`WaitingJobs`):
the preemptible ones with an active pod as the session opened (a group of `JobsAtOpen`), and those a
decision touched since; the same candidates as among every waiting job (issue #23, point 1)."""

from __future__ import annotations

import pytest

from helpers import gang, node, open_session, pod, pod_group, queue
from kai_scheduler.actions.job_queue import with_pending
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.actions.solvers.victims import VictimInputs, WaitingJobs
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo


def _session() -> Session:
    """On a node of 2 GPUs, an elastic preemptible job with one pod running and one pending, a preemptible
    job with none running, and a non-preemptible pod of higher priority: all wait."""
    return open_session(
        [
            node("n0", gpus=2),
            queue("q", gpu=4),
            pod_group("elastic", min_member=1, priority_class="train"),
            pod("elastic-0", None, gpus=1, group="elastic", node_name="n0"),
            pod("elastic-1", None, gpus=1, group="elastic"),
            pod_group("later", min_member=1, priority_class="train"),
            pod("later-0", None, gpus=1, group="later"),
            pod("inference", gpus=1, priority_class="inference"),
        ]
    )


def _keys(jobs: list[JobInfo]) -> list[str]:
    return [job.key for job in jobs]


def _place_later(session: Session) -> None:
    """Place the pod of `later` (as an action before would): its job may be a victim from now on."""
    later = session.snapshot.jobs["default/later"]
    statement = session.statement("allocate")
    statement.allocate(later.tasks[0], 0, (), "placed")
    statement.commit()


def test_a_waiting_job_placed_since_may_be_a_victim() -> None:
    session = _session()
    waiting = WaitingJobs.of(session)
    assert WaitingJobs.of(session) is waiting  # once per session
    assert _keys(waiting.may_be_victims(session)) == ["default/elastic"]
    _place_later(session)
    assert _keys(waiting.may_be_victims(session)) == ["default/elastic", "default/later"]


def test_a_waiting_job_placed_before_the_first_ask_may_be_a_victim() -> None:
    """The groups are as the session opened: an action's placements before the victim actions first ask
    (allocate's) are brought in from the decisions."""
    session = _session()
    session.snapshot.jobs_at_open()
    _place_later(session)
    assert _keys(WaitingJobs.of(session).may_be_victims(session)) == ["default/elastic", "default/later"]


def test_verify_mode_compares_the_candidates_with_every_waiting_job(monkeypatch: pytest.MonkeyPatch) -> None:
    honest = _session()
    honest.verify_carried = True
    WaitingJobs.of(honest)
    _place_later(honest)
    Preempt().execute(honest)  # the same candidates both ways
    session = _session()
    session.verify_carried = True
    WaitingJobs.of(session)
    _place_later(session)
    monkeypatch.setattr(WaitingJobs, "may_be_victims", lambda self, session: [])
    with pytest.raises(CarriedMismatch, match=r"preempt: the candidate victims .* differ"):
        Preempt().execute(session)


def test_a_walk_of_every_waiting_job_finds_the_jobs_with_a_pending_pod_too() -> None:
    """With more decisions than waiting jobs (a first cycle's), `WaitingJobs` walks every waiting job and
    finds the jobs with a pending pod as it goes, which the candidates' first ask then reads as they are;
    a decision later they are brought up to date."""
    session = open_session(
        [
            node("n0", gpus=8),
            queue("q", gpu=8),
            *gang("elastic", size=5, min_member=1, gpus=1, priority_class="train"),
            *gang("single", size=1, gpus=1, priority_class="train"),
            pod("big", gpus=8, priority_class="train"),
        ]
    )
    jobs = session.snapshot.jobs
    elastic, single = jobs["default/elastic"], jobs["default/single"]
    session.snapshot.jobs_at_open()
    statement = session.statement("allocate")
    for task in elastic.tasks[:4]:  # four decisions for three waiting jobs; one of its pods left pending
        statement.allocate(task, 0, (), "placed")
    statement.commit()
    waiting = WaitingJobs.of(session)
    assert waiting.with_pending is not None
    decided, pending = waiting.with_pending
    assert decided == 4 and pending == with_pending(session.snapshot)
    assert _keys(pending) == ["default/elastic", "default/single", "default/pg-big"]
    assert _keys(waiting.may_be_victims(session)) == ["default/elastic"]
    inputs = VictimInputs.of(session)
    assert inputs.pending(session, waiting) is pending
    # The candidates among the jobs the walk found, asked only their queue: those of every job.
    assert _keys(inputs.candidates(session, waiting)) == ["default/elastic"]
    statement = session.statement("allocate")
    statement.allocate(elastic.tasks[4], 0, (), "placed")
    statement.allocate(single.tasks[0], 0, (), "placed")
    statement.commit()
    assert (
        _keys(inputs.pending(session, waiting)) == ["default/pg-big"] == _keys(with_pending(session.snapshot))
    )
