"""The job queue's first child among siblings ranked by a strict weak ordering (`job_queue._Siblings`): while
only the first child's rank moves (a walk placing the jobs it pops), the others wait in a heap and are not
scanned again; with the debug variable set each first is found by a scan too, and a difference raises."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import node, open_session, pod, pop_and_place, queue, waiting_jobs
from kai_scheduler.actions import job_queue
from kai_scheduler.actions.job_queue import QueueOrderedJobs
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session

LEAVES = ("a", "b", "c", "d")  # root queues of equal quotas: their shares are alike, a strict weak ordering


def _session() -> Session:
    objects: list[Any] = [node(f"n{i}", gpus=8) for i in range(4)]
    objects += [queue(name, gpu=8) for name in LEAVES]
    objects += [pod(f"{name}-{i}", name, gpus=1) for name in LEAVES for i in range(6)]
    return open_session(objects)


def test_placing_the_jobs_popped_scans_the_siblings_only_until_their_heap_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans = []
    scan = job_queue._first_smallest

    def counted(nodes: list[Any]) -> Any:
        scans.append(len(nodes))
        return scan(nodes)

    monkeypatch.setattr(job_queue, "_first_smallest", counted)
    session = _session()
    queue = QueueOrderedJobs(session, waiting_jobs(session))
    popped = pop_and_place(session, queue, 12)
    assert set(popped) == set(LEAVES)  # the first moved from queue to queue as they were placed
    # The first pop's ranking, and the second's, after which only the first's rank had moved: the heap.
    assert scans == [len(LEAVES), len(LEAVES)]


def test_verify_mode_finds_each_first_by_a_scan_too() -> None:
    session = _session()
    session.verify_carried = True
    queue = QueueOrderedJobs(session, waiting_jobs(session))
    pop_and_place(session, queue, 3)
    siblings = queue._roots
    assert siblings.heaped
    # The heap's first said to rank last: it no longer overtakes the first child, which a scan finds it does.
    rank, position, waiting = siblings.others[0]
    siblings.others[0] = ((True, *rank[1:]), position, waiting)
    with pytest.raises(CarriedMismatch, match="differs from a scan's"):
        pop_and_place(session, queue, 1)
