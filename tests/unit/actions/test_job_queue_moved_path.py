"""A pop after the job popped last was placed: only that job's path moved, so the job queue ranks that path
again without marking it (`QueueOrderedJobs.pop`), and asks the queue order for the key of each queue on it
as one whose allocation moved (`ExtensionPoints.queue_order_moved`: proportion does not check it again)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import node, open_session, pod, pop_and_place, queue, waiting_jobs
from kai_scheduler.actions.job_queue import QueueOrderedJobs
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo

DEPARTMENTS = ("d1", "d2")
LEAVES = ("d1-a", "d1-b", "d2-a", "d2-b")


def _session() -> Session:
    objects: list[Any] = [node(f"n{i}", gpus=8) for i in range(4)]
    objects += [queue(name, gpu=16) for name in DEPARTMENTS]
    objects += [queue(name, gpu=8, parent=name[:2]) for name in LEAVES]
    objects += [pod(f"{name}-{i}", name, gpus=1) for name in LEAVES for i in range(4)]
    return open_session(objects)


def _order_from_scratch(session: Session, pops: int) -> list[str]:
    """The leaves popped by a job queue that marks and settles every queue again before each pop."""
    return pop_and_place(session, QueueOrderedJobs(session, waiting_jobs(session)), pops, refresh_each=True)


def test_placing_the_jobs_popped_ranks_their_paths_again_without_marking_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marked: list[str] = []
    mark = QueueOrderedJobs._mark

    def counted(self: QueueOrderedJobs, node: Any) -> None:
        if node is not None:
            marked.append(node.queue.name)
        mark(self, node)

    expected = _order_from_scratch(_session(), 12)
    monkeypatch.setattr(QueueOrderedJobs, "_mark", counted)
    session = _session()
    queue = QueueOrderedJobs(session, waiting_jobs(session))
    marked.clear()  # (the leaves' nodes made as the queue starts)
    popped = pop_and_place(session, queue, 12)
    assert popped == expected
    assert len(set(popped)) > 2  # the first moved from queue to queue, and from department to department
    assert marked == []


def test_a_queue_whose_allocation_moved_is_ranked_by_the_orders_moved_key() -> None:
    session = _session()
    moved, order = session.points.queue_order_moved, session.points.queue_order
    assert moved is not None and order is not None
    asked: list[str] = []

    def counted(queue: Any, job: JobInfo | None, at: tuple[float, float, float]) -> tuple[Any, ...]:
        assert at == queue.allocated.values()
        asked.append(queue.name)
        key = moved(queue, job, at)
        assert key == order(queue, job)  # the same key, asked again at that allocation (and kept)
        return key

    session.points.queue_order_moved = counted
    queue = QueueOrderedJobs(session, waiting_jobs(session))
    popped = pop_and_place(session, queue, 3)
    # After each placement, the leaf it was placed in and its department, at their new allocations.
    assert {popped[0], popped[0][:2], popped[1], popped[1][:2]} <= set(asked)


def test_verify_mode_checks_the_path_ranked_again_is_first() -> None:
    session = _session()
    session.verify_carried = True
    queue = QueueOrderedJobs(session, waiting_jobs(session))
    pop_and_place(session, queue, 2)
    lead = queue._lead
    assert lead is not None and lead.parent is not None
    # The lead's department said not to be the first root: a pop that ranks only the lead's path would not
    # rank the root that is.
    lead.parent.siblings.best = None
    with pytest.raises(CarriedMismatch, match="on the path popped last, is not first"):
        pop_and_place(session, queue, 1)
