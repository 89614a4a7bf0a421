"""The job queue's order for a walk in which nothing moves, worked out as a merge (issue #23, point 1: a
trickle cycle pops ~8,000 jobs that all fail, at ~5 us of queue work each).

While no queue's allocation moves, each queue ranks on a job by what the queue order reads of it alone
(`ExtensionPoints.queue_order_reads`): the job queue then hands out, at every level of the tree, the
jobs of the children merged by the rank each child has on its next job (the first child on a tie, in the
tree's order), a leaf's jobs in job order. So the order is a merge of merges: one heap step per level per
job (`heapq.merge` keeps each child's next job in a heap), with each queue's rank looked up by what is
read (`_Queue.ranks`), instead of a pop that asks whether the path still wins.

The order holds only while nothing moves: the walk that reads it stops at the first attempt that moved
an allocation, and `remaining` gives the jobs not handed out yet, for a job queue of the usual kind to
carry on with (it hands them out as the queue of every job would from there on: its entries never tie).
A queue depth per action reads what was handed out, so it is not for this order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from kai_scheduler.framework.session import QueueOrderKey, Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.queues import QueueInfo

# What a queue hands out: its rank on the job, its place among its siblings (ties go to the first; a place
# is never tied, so what follows is not compared), what the order reads of the job, the job.
_Item = tuple[tuple[Any, ...], int, Hashable, JobInfo]


class _Queue:
    """A queue's ranks by what the order reads of a job (its allocation does not move)."""

    __slots__ = ("order", "position", "queue", "ranks")

    def __init__(self, queue: QueueInfo, position: int, order: QueueOrderKey) -> None:
        self.queue = queue
        self.position = position
        self.order = order
        self.ranks: dict[Hashable, tuple[Any, ...]] = {}

    def items(self, below: Iterable[tuple[Hashable, JobInfo]]) -> Iterator[_Item]:
        """The queue's jobs (with what the order reads of each) as it hands them out, each with its rank."""
        ranks, position, queue, order = self.ranks, self.position, self.queue, self.order
        for read, job in below:
            rank = ranks.get(read)
            if rank is None:
                rank = ranks[read] = order(queue, job)
            yield rank, position, read, job


class QuietOrder:
    """`jobs` in the order a `QueueOrderedJobs` of them hands them out while nothing moves. `reads` is
    the session's `queue_order_reads`, whose queue order is `session.points.queue_order`."""

    def __init__(self, session: Session, jobs: list[JobInfo], reads: Callable[[JobInfo], Hashable]) -> None:
        order = session.points.queue_order
        assert order is not None, "a queue order that reads jobs"
        key_of = session.job_order_key
        by_leaf: dict[str, list[tuple[tuple[Any, ...], int, JobInfo]]] = {}
        for counter, job in enumerate(jobs):
            entries = by_leaf.get(job.queue)
            if entries is None:
                entries = by_leaf[job.queue] = []
            entries.append((key_of(job), counter, job))
        self._by_leaf = by_leaf
        self._handed_out: set[JobInfo] = set()
        queues = session.snapshot.queues

        def merged(names: list[str]) -> Iterator[tuple[Hashable, JobInfo]]:
            """The jobs of the queues `names` (siblings, in the tree's order), merged, with what the
            order reads of each."""
            parts = []
            for position, name in enumerate(names):
                queue = queues[name]
                if queue.is_leaf:
                    entries = by_leaf.get(name)
                    if not entries:
                        continue
                    entries.sort()  # as the job queue orders a leaf (keys never tie)
                    below: Iterable[tuple[Hashable, JobInfo]] = ((reads(job), job) for _, _, job in entries)
                else:
                    below = merged(queue.children)
                parts.append(_Queue(queue, position, order).items(below))
            return ((read, job) for _, _, read, job in heapq.merge(*parts))

        self._order = merged(queues.roots)

    def __iter__(self) -> Iterator[JobInfo]:
        handed_out = self._handed_out
        for _, job in self._order:
            handed_out.add(job)
            yield job

    def remaining(self) -> list[JobInfo]:
        """The jobs not handed out yet, a leaf's in job order (a job queue of them sorts them again in
        one pass)."""
        handed_out = self._handed_out
        return [job for entries in self._by_leaf.values() for _, _, job in entries if job not in handed_out]
