"""Allocate hands out jobs as the job queue's scan does when the queue order is not a strict weak ordering.

Proportion's criterion 7 (`SmallerAllocatableShare`) says only that neither queue's allocatable shares
dominate when they are incomparable, and the queue's rank decides; with three sibling queues that can be
cyclic (q3's shares dominate q1's, q1 ranks before q2, q2 before q3). The job queue picks the first child
with the smallest key by one scan with `<`; the quiet order's merge by heap picks another, so allocate's
walk reads the job queue there.
"""

from __future__ import annotations

from helpers import gang, node, open_session, queue
from kai_scheduler.actions.allocate import Allocate
from kai_scheduler.actions.job_queue import QueueOrderedJobs, keyed_by_leaf
from kai_scheduler.actions.quiet_order import QuietOrder
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo

SHARES = {"q1": (6, 2000, 4000), "q2": (3, 2000, 5000), "q3": (5, 2000, 3000)}


def _siblings(shares: dict[str, tuple[int, int, int]]) -> list[ApiObject]:
    """Leaves with quotas `shares` (GPUs, millicores, MB), in the tree's order, each with a job that
    asks one CPU and no room to place it (the node has too few pods' worth of CPU)."""
    objects: list[ApiObject] = [node("n0", gpus=8, cpu="0.5", memory="256Gi")]
    for name, (gpu, cpu, memory) in shares.items():
        objects.append(queue(name, gpu=gpu, cpu=cpu, memory=memory))
        objects += gang(f"{name}-job", name, size=1, gpus=0, cpu="1")
    return objects


def _scanned(session: Session) -> list[str]:
    jobs = sorted(session.snapshot.jobs.values(), key=lambda job: job.key)
    reference = QueueOrderedJobs(session, jobs, None)
    popped: list[str] = []
    while (job := reference.pop()) is not None:
        popped.append(job.key)
    return popped


def _merged(session: Session) -> list[str]:
    reads = session.points.queue_order_reads
    assert reads is not None
    jobs: list[JobInfo] = sorted(session.snapshot.jobs.values(), key=lambda job: job.key)
    return [job.key for job in QuietOrder(session, keyed_by_leaf(session, jobs), reads)]


def test_the_queue_order_of_these_siblings_is_cyclic() -> None:
    session = open_session(_siblings(SHARES))
    queues = session.snapshot.queues
    jobs = {job.queue: job for job in session.snapshot.jobs.values()}
    key = {name: session.queue_order_key(queues[name], jobs[name]) for name in SHARES}
    assert key["q3"] < key["q1"] and key["q1"] < key["q2"] and key["q2"] < key["q3"]
    weak = session.points.queue_order_weak
    assert weak is not None and not weak([queues[name] for name in SHARES])


def test_a_merge_would_hand_out_another_order_there_so_allocate_reads_the_scan() -> None:
    session = open_session(_siblings(SHARES))
    assert _merged(session) != _scanned(session)  # why the walk may not merge here
    expected = _scanned(session)
    Allocate().execute(session)
    assert list(session.unschedulable) == expected


def test_siblings_whose_shares_are_totally_ordered_merge_as_the_scan() -> None:
    chain = {"q1": (6, 2000, 4000), "q2": (3, 2000, 3000), "q3": (5, 2000, 3000)}
    session = open_session(_siblings(chain))
    queues = session.snapshot.queues
    weak = session.points.queue_order_weak
    assert weak is not None and weak([queues[name] for name in chain])
    assert _merged(session) == _scanned(session)
