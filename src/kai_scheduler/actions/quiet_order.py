"""The job queue's order for a walk in which nothing moves, worked out as a merge (issue #23, point 1: a
trickle cycle pops ~8,000 jobs that all fail, at ~5 us of queue work each).

While no queue's allocation moves, each queue ranks on a job by what the queue order reads of it alone
(`ExtensionPoints.queue_order_reads`): the job queue then hands out, at every level of the tree, the
jobs of the children merged by the rank each child has on its next job (the first child on a tie, in the
tree's order), a leaf's jobs in job order. So the order is a merge of merges: each queue keeps its first
child apart and the others in a heap by their rank on their next job, and after a job is handed out the
queues on its path compare the new rank of the child that was first with the heap's first (one
comparison a level while it stays first), each rank looked up by what is read (`_Queue.ranks`).

The order holds only while nothing moves: the walk that reads it stops at the first attempt that moved
an allocation, and `remaining` gives the jobs not handed out yet, for a job queue of the usual kind to
carry on with (it hands them out as the queue of every job would from there on: its entries never tie).
The two hand one another each leaf's entries (job order key, counter, job) sorted, so that a walk keys a
job once (and again only when it is pushed back), as the queue of every job does.
A queue depth per action reads what was handed out, so it is not for this order. Nor is a queue order
that is not a strict weak ordering of some queue's children (`ExtensionPoints.queue_order_weak`): the job
queue picks the first child with the smallest rank by a scan with `<`, and where three siblings' ranks
make a cycle a heap picks another (allocate then reads the job queue).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Any

from kai_scheduler.actions.job_queue import JobEntry, KeyedJobs, overtakes
from kai_scheduler.framework.session import QueueOrderKey, Session
from kai_scheduler.framework.walk_facts import WalkFacts
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.queues import QueueInfo


class _Queue:
    """A queue with jobs at or below it, and the job it hands out next (`head`: what the order reads of
    it, the job, its leaf; None: none left). A leaf's jobs are `jobs` in job order from `taken` on; a
    parent queue's first child is `best`, the others with a job wait in a heap by their rank on their next
    job and their place (`others`). `ranks`: the queue's ranks by what the order reads of a job (its
    allocation does not move)."""

    __slots__ = (
        "best",
        "entries",
        "head",
        "jobs",
        "others",
        "parent",
        "position",
        "queue",
        "ranks",
        "taken",
    )

    def __init__(self, queue: QueueInfo | None, position: int, parent: _Queue | None) -> None:
        self.queue = queue  # None: the tree's roots, as the children of no queue
        self.position = position
        self.parent = parent
        self.ranks: dict[Hashable, tuple[Any, ...]] = {}
        self.head: tuple[Hashable, JobInfo, _Queue] | None = None
        self.entries: list[JobEntry] = []
        self.jobs: list[JobInfo] = []
        self.taken = 0
        self.best: _Queue | None = None
        self.others: list[tuple[tuple[Any, ...], int, _Queue]] = []


class QuietOrder:
    """The jobs `by_leaf` in the order a `QueueOrderedJobs` of them hands them out while nothing moves.
    `by_leaf`: each leaf's entries (`job_queue.keyed_by_leaf`; sorted here, by the orders `kept` keeps if
    given). `reads` is the session's `queue_order_reads`, whose queue order is
    `session.points.queue_order`."""

    def __init__(
        self,
        session: Session,
        by_leaf: KeyedJobs,
        reads: Callable[[JobInfo], Hashable],
        kept: WalkFacts | None = None,
    ) -> None:
        order = session.points.queue_order
        assert order is not None, "a queue order that reads jobs"
        self._order: QueueOrderKey = order
        self._reads = reads
        self._by_leaf = by_leaf
        self._leaves: dict[str, _Queue] = {}  # the leaves of the tree with jobs
        queues, verify = session.snapshot.queues, session.verify_carried  # (`fill` holds no session)
        self._forest = _Queue(None, 0, None)

        def fill(node: _Queue, names: list[str]) -> None:
            """The children `names` of `node` (in the tree's order) that have jobs at or below them."""
            children = []
            for position, name in enumerate(names):
                queue = queues[name]
                child = _Queue(queue, position, node)
                if queue.is_leaf:
                    entries = by_leaf.get(name)
                    if not entries:
                        continue
                    # As the job queue orders a leaf (keys never tie, so the keys alone sort the entries);
                    # with `kept`, in the order kept for the same keys (`WalkFacts.sorting`).
                    if kept is None:
                        entries.sort()
                    else:
                        keys = [key for key, _, _ in entries]
                        positions = kept.sorting(name, keys, keep=True, verify=verify)
                        entries = [entries[i] for i in positions]
                    child.entries = entries
                    child.jobs = [job for _, _, job in entries]
                    self._leaves[name] = child
                    first = child.jobs[0]
                    child.head = (reads(first), first, child)
                else:
                    fill(child, queue.children)
                if child.head is not None:
                    children.append((self._rank(child), position, child))
            if children:
                heapq.heapify(children)
                _, _, node.best = heapq.heappop(children)
                node.others = children
                node.head = node.best.head

        fill(self._forest, queues.roots)

    def _rank(self, node: _Queue) -> tuple[Any, ...]:
        """`node`'s rank on its head (which it has)."""
        assert node.head is not None
        read, job, _ = node.head
        return self._rank_on(node, read, job)

    def __iter__(self) -> Iterator[JobInfo]:
        forest, reads = self._forest, self._reads
        while (head := forest.head) is not None:
            # A run of the first leaf's jobs: while the leaf's next job ranks it first at every level
            # against the others' heaps as they stand (nothing else moves during the run), nothing above
            # it changes. Whether it does is asked once per value read in the run (`stays`): a trickle
            # cycle's leaf stays first for some 50 jobs of a few requests.
            read, job, leaf = head
            jobs, taken = leaf.jobs, leaf.taken
            stays: dict[Hashable, bool] = {}
            while True:
                taken += 1
                leaf.taken = taken
                yield job
                if taken == len(jobs):
                    break
                job = jobs[taken]
                read = reads(job)
                first = stays.get(read)
                if first is None:
                    first = stays[read] = self._stays_first(leaf, read, job)
                if not first:
                    break
            leaf.head = (read, job, leaf) if taken < len(jobs) else None
            self._find_first(leaf)

    def _stays_first(self, leaf: _Queue, read: Hashable, job: JobInfo) -> bool:
        """Whether `leaf`, first at every level, stays first with `job` (read as `read`) its next job:
        what `_find_first` would find, without changing anything. (Written out: asked for some 40% of
        a trickle cycle's jobs.)"""
        node, order = leaf, self._order
        while (parent := node.parent) is not None:
            others = parent.others
            if others:
                rank = node.ranks.get(read)
                if rank is None:
                    assert node.queue is not None
                    rank = node.ranks[read] = order(node.queue, job)
                top = others[0]
                if top[0] < rank or (top[1] < node.position and not rank < top[0]):
                    return False
            node = parent
        return True

    def _find_first(self, leaf: _Queue) -> None:
        """`leaf`, first among its siblings, has a new head (or none): each ancestor finds its first child
        again, the one that was first compared with the first of the others' heap (a leaf that stays
        first costs one comparison a level)."""
        node = leaf
        while (parent := node.parent) is not None:
            others, ahead = parent.others, node.head
            if ahead is None:
                parent.best = heapq.heappop(others)[2] if others else None
            else:
                rank = self._rank_on(node, ahead[0], ahead[1])
                if others and overtakes(others[0], rank, node.position):
                    parent.best = heapq.heapreplace(others, (rank, node.position, node))[2]
            best = parent.best
            parent.head = None if best is None else best.head
            node = parent

    def _rank_on(self, node: _Queue, read: Hashable, job: JobInfo) -> tuple[Any, ...]:
        """`node`'s rank on `job` (read as `read`), kept by what is read."""
        rank = node.ranks.get(read)
        if rank is None:
            assert node.queue is not None
            rank = node.ranks[read] = self._order(node.queue, job)
        return rank

    def leaves(self) -> list[str]:
        """The leaf queues whose jobs it hands out."""
        return list(self._leaves)

    def remaining(self) -> KeyedJobs:
        """The entries not handed out yet by leaf, smallest first (`QueueOrderedJobs.of_keyed`)."""
        left: KeyedJobs = {}
        for name, entries in self._by_leaf.items():
            leaf = self._leaves.get(name)
            rest = leaf.entries[leaf.taken :] if leaf is not None else sorted(entries)  # (not in the tree)
            if rest:
                left[name] = rest
        return left
