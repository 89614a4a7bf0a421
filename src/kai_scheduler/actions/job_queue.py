"""Jobs ordered through the queue tree (KAI's hierarchical job queue).

At every level of the tree the child queue that ranks first (by the session's queue order, which looks at
the queue's allocation and at the job it would hand out next) is chosen, down to a leaf, whose best job
(by job order) is popped. A queue's rank changes only when its own jobs are popped or pushed back, so
ranks are cached and refreshed along the path that changed.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo


class QueueOrderedJobs:
    """`depth` (KAI's queueDepthPerAction) bounds how many distinct jobs of one queue are handed out."""

    def __init__(self, session: Session, jobs: Iterable[JobInfo], depth: int | None = None) -> None:
        self._session = session
        self._depth = depth
        self._handed_out: dict[str, set[str]] = {}
        self._queues = session.snapshot.queues
        self._heaps: dict[str, list[tuple[tuple[Any, ...], int, JobInfo]]] = {}
        self._counter = 0
        self._rank_cache: dict[str, tuple[Any, ...] | None] = {}
        for job in jobs:
            self.push(job)

    def push(self, job: JobInfo) -> None:
        self._counter += 1
        heapq.heappush(
            self._heaps.setdefault(job.queue, []), (self._session.job_order_key(job), self._counter, job)
        )
        self._invalidate(job.queue)

    def pop(self) -> JobInfo | None:
        level = self._queues.roots
        while True:
            best = self._best_child(level)
            if best is None:
                return None
            queue = self._queues[best]
            if queue.is_leaf:
                job = heapq.heappop(self._heaps[best])[2]
                self._handed_out.setdefault(best, set()).add(job.key)
                self._invalidate(best)
                return job
            level = queue.children

    def refresh(self) -> None:
        """Forget every cached rank (after changes to queues other than the popped job's)."""
        self._rank_cache.clear()

    def __bool__(self) -> bool:
        return any(self._heaps.values())

    def _best_child(self, names: list[str]) -> str | None:
        best_name, best_rank = None, None
        for name in names:
            rank = self._rank(name)
            if rank is not None and (best_rank is None or rank < best_rank):
                best_name, best_rank = name, rank
        return best_name

    def _rank(self, name: str) -> tuple[Any, ...] | None:
        if name in self._rank_cache:
            return self._rank_cache[name]
        job = self._next_job(name)
        rank = None if job is None else self._session.queue_order_key(self._queues[name], job)
        self._rank_cache[name] = rank
        return rank

    def _next_job(self, name: str) -> JobInfo | None:
        """The job this queue's subtree would hand out next."""
        queue = self._queues[name]
        if queue.is_leaf:
            heap = self._heaps.get(name)
            if not heap:
                return None
            job = heap[0][2]
            handed_out = self._handed_out.get(name, set())
            if self._depth is not None and len(handed_out) >= self._depth and job.key not in handed_out:
                return None
            return job
        child = self._best_child(queue.children)
        return None if child is None else self._next_job(child)

    def _invalidate(self, leaf: str) -> None:
        for queue in self._queues.ancestry(leaf):
            self._rank_cache.pop(queue.name, None)
