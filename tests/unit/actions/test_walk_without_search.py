"""A victim action whose pending jobs would all be passed over or refused before any victim search walks
them without a job queue (`VictimAction._walked_without_search`): it writes the same reasons and counts
the same jobs acted on as the walk in queue order, which it takes instead whenever the order could
matter (a job that may search, a job with no reason yet, a failed signature shared by two leaf queues)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import node, open_session, pod, queue, waiting_jobs
from kai_scheduler.actions.consolidation import Consolidation
from kai_scheduler.actions.job_queue import QueueOrderedJobs
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.actions.solvers import victims
from kai_scheduler.actions.solvers.victims import VictimAction
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session

EARLIER = "allocate: no node has room"


def _same_priority_cluster() -> list[Any]:
    """Two queues, each with a running train pod and train pods waiting: none of a lower priority to
    preempt, so every attempt is refused before a search; a's waiting pods share one signature."""
    return [
        node("n0", gpus=2),
        queue("a", gpu=1),
        queue("b", gpu=1),
        pod("a-run", "a", gpus=1, node_name="n0", priority_class="train"),
        pod("b-run", "b", gpus=1, node_name="n0", priority_class="train"),
        *[pod(f"a-{i}", "a", gpus=1, priority_class="train") for i in range(3)],
        *[pod(f"b-{i}", "b", gpus=1 + i, priority_class="train") for i in range(2)],
    ]


def _session(objects: list[Any], config: SchedulerConfig | None = None, *, reasoned: bool = True) -> Session:
    """A session on `objects` whose waiting jobs have a reason already (`reasoned`), as allocate leaves
    the jobs it could not place."""
    session = open_session(objects, config)
    if reasoned:
        for job in waiting_jobs(session):
            session.add_reason(job.key, EARLIER)
    return session


def _outcome(session: Session, action: VictimAction) -> tuple[dict[str, str], int, list[str]]:
    action.execute(session)
    reasons = {key: str(reason) for key, reason in session.unschedulable.items()}
    return reasons, session.counts[action.name].acted_on, list(session.unschedulable)


def _in_queue_order(monkeypatch: pytest.MonkeyPatch, make: type[VictimAction]) -> None:
    monkeypatch.setattr(make, "blocks_quietly", False)


def _no_job_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: QueueOrderedJobs) -> None:
        raise AssertionError("the job queue was popped")

    monkeypatch.setattr(QueueOrderedJobs, "pop", refuse)


def test_preempt_refused_everywhere_walks_without_the_job_queue_and_does_as_the_queue_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as patch:
        _in_queue_order(patch, Preempt)
        expected = _outcome(_session(_same_priority_cluster()), Preempt())
    _no_job_queue(monkeypatch)
    assert _outcome(_session(_same_priority_cluster()), Preempt()) == expected
    reasons, acted_on, _ = expected
    assert acted_on == 5
    gave_up = [key for key, reason in reasons.items() if "preempt:" in reason]
    # a's three alike: the first in job order is refused, the others pass over for its signature.
    assert gave_up == ["default/pg-a-0", "default/pg-b-0", "default/pg-b-1"]


def test_a_queue_depth_bounds_the_jobs_walked_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    config = SchedulerConfig(queue_depth_per_action={"preempt": 1})
    with monkeypatch.context() as patch:
        _in_queue_order(patch, Preempt)
        expected = _outcome(_session(_same_priority_cluster(), config), Preempt())
    _no_job_queue(monkeypatch)
    assert _outcome(_session(_same_priority_cluster(), config), Preempt()) == expected
    assert expected[1] == 2


def test_consolidation_with_every_job_blocked_counts_them_without_the_job_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The node is full: no job asks GPUs that exist free anywhere.
    objects = [
        node("n0", gpus=1),
        queue("a", gpu=1),
        queue("b", gpu=1),
        pod("a-run", "a", gpus=1, node_name="n0", priority_class="train"),
        *[pod(f"{q}-{i}", q, gpus=1, priority_class="train") for q in "ab" for i in range(2)],
    ]
    with monkeypatch.context() as patch:
        _in_queue_order(patch, Consolidation)
        expected = _outcome(_session(objects), Consolidation())
    _no_job_queue(monkeypatch)
    assert _outcome(_session(objects), Consolidation()) == expected
    assert expected[1] == 4


def _popped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the job queue's pops (one item per pop)."""
    pops: list[int] = []
    pop = QueueOrderedJobs.pop

    def counted(self: QueueOrderedJobs) -> Any:
        pops.append(1)
        return pop(self)

    monkeypatch.setattr(QueueOrderedJobs, "pop", counted)
    return pops


def test_a_job_with_no_reason_yet_is_walked_in_queue_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its reason would be a new entry, placed among the others in the order of the walk."""
    pops = _popped(monkeypatch)
    _outcome(_session(_same_priority_cluster(), reasoned=False), Preempt())
    assert len(pops) == 6  # five jobs, then the end


def _two_leaves(*, b_priority: str) -> list[Any]:
    """Two leaves of one GPU each on a two-GPU node: a's job runs, a's and b's (at `b_priority`) wait."""
    return [
        node("n0", gpus=2),
        queue("a", gpu=1),
        queue("b", gpu=1),
        pod("a-run", "a", gpus=1, node_name="n0", priority_class="train"),
        pod("a-0", "a", gpus=1, priority_class="train"),
        pod("b-0", "b", gpus=1, priority_class=b_priority),
    ]


def _blocked(session: Session) -> Session:
    """`session` where a victim-invariant pre-predicate refuses every pod."""
    session.points.victim_invariant_pre_predicates.append(lambda task: "blocked")
    return session


def test_a_failed_signature_of_two_leaves_is_walked_in_queue_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consolidation's signatures leave the queue out: which leaf's job goes first decides which is
    refused and which passes over."""
    objects = _two_leaves(b_priority="train")
    with monkeypatch.context() as patch:
        _in_queue_order(patch, Consolidation)
        expected = _outcome(_blocked(_session(objects)), Consolidation())
    pops = _popped(monkeypatch)
    assert _outcome(_blocked(_session(objects)), Consolidation()) == expected
    assert len(pops) == 3
    assert sum("consolidation:" in reason for reason in expected[0].values()) == 1


def test_consolidation_passes_over_a_blocked_job_before_asking_its_signature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Consolidation's walk asks `blocked` first (`blocked_before_signature`): a job it passes over is not
    asked its signature, and one of another leaf sharing a failed signature (b's non-preemptible build
    job asks what a's refused job asks; consolidation's signatures leave the queue and preemptibility
    out) does not send the walk to the job queue, which would pass it over too."""
    objects = _two_leaves(b_priority="build")
    with monkeypatch.context() as patch:
        _in_queue_order(patch, Consolidation)
        expected = _outcome(_blocked(_session(objects)), Consolidation())
    asked: list[str] = []
    signature = Consolidation.signature

    def noted(self: Consolidation, session: Session, job: Any) -> tuple[object, ...]:
        asked.append(job.name)
        return signature(self, session, job)

    monkeypatch.setattr(Consolidation, "signature", noted)
    _no_job_queue(monkeypatch)
    assert _outcome(_blocked(_session(objects)), Consolidation()) == expected
    assert asked == ["pg-a-0"]
    assert sum("consolidation:" in reason for reason in expected[0].values()) == 1


def test_a_job_that_may_search_is_walked_in_queue_order(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = [*_same_priority_cluster(), pod("a-build", "a", gpus=1, priority_class="build")]
    pops = _popped(monkeypatch)
    Preempt().execute(_session(objects))
    assert pops


def test_verify_mode_compares_the_walk_with_the_job_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(_same_priority_cluster())
    session.verify_carried = True
    Preempt().execute(session)  # the same jobs both ways
    handed_out = victims.handed_out_by_leaf

    def one_short(*args: Any) -> dict[str, list[Any]]:
        return {leaf: jobs[:-1] for leaf, jobs in handed_out(*args).items()}

    monkeypatch.setattr(victims, "handed_out_by_leaf", one_short)
    session = _session(_same_priority_cluster())
    session.verify_carried = True
    with pytest.raises(CarriedMismatch, match="preempt: the jobs a job queue hands out by leaf differ"):
        Preempt().execute(session)
