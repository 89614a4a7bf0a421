"""Jobs ordered through the queue tree (KAI's hierarchical job queue).

At every level of the tree the child queue that ranks first (by the session's queue order, which looks at
the queue's allocation and at the job it would hand out next) is chosen, down to a leaf, whose best job
(by job order) is popped. A queue's rank changes only when its own jobs are popped or pushed back, so
each queue's rank and the child it would descend to are kept on a node of the tree (`_Node`, made only
for the queues that have jobs at or below them), and ranked again along the path that changed, children
first, at the next pop: a pop costs one scan of the children of each queue on that path, however many
jobs wait. (The nodes link to their parents and children directly: looked up by name in a dict of
cached ranks, the same walk cost some 12 us a pop in the trickle cycle at 5,000 nodes, now 8.5.)
Where the queue order ranks a queue's children by a strict weak ordering
(`ExtensionPoints.queue_order_weak`), even that scan is mostly spared: the children but the first wait in
a heap by rank and place, and while only the first was ranked again (a first cycle places most jobs it
pops, which moves the ranks of the path it came from and no other) it is compared with the heap's first
alone (`_Siblings`).

A leaf's jobs are sorted once as the queue is made and taken from the end of that list; a job pushed back
goes to a small heap beside it, and a pop takes the smaller of the two heads. A heap of every job cost a
pop some twenty key comparisons spread over memory that the rest of the cycle had long evicted: 2.7 us a
pop at 500 nodes, 12 us at 20,000 (a first cycle's backlog of 1,600 jobs a leaf). The order is the same:
the entries' keys never tie (a job order key ends with the job's rank and key, then a push counter), so
"the smallest stored entry" names one job however they are kept.

A walk mostly pops one leaf many times in a row (a trickle cycle at 5,000 nodes: some 55 pops a leaf, then
another leaf wins), and a pop that places nothing moves no allocation: the other queues' ranks stay, so
whether the leaf's path still wins depends only on what the queue order reads of the leaf's next job
(`ExtensionPoints.queue_order_reads`: proportion's, the job's next request). That answer is kept per value
read for the stretch (`_firsts`), and each queue's ranks by that value while its allocation stays
(`_Node.ranks`), so that most pops rank nothing: the path is settled in full only when the leaf loses,
runs out, or something else moved (a push, `refresh`, an allocation on the path).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Final, cast

from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import MovedQueueOrderKey, QueueOrderKey, Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.snapshot import ClusterSnapshot

# A leaf's entry: the job order key, then the push counter (never compares two jobs).
JobEntry = tuple[tuple[Any, ...], int, JobInfo]
# Each leaf queue's entries by its name: how the job queue and the quiet order (`actions.quiet_order`)
# hand one another the jobs left, keyed once a walk.
KeyedJobs = dict[str, list[JobEntry]]
_UNKNOWN: Final = object()  # a value read not yet asked in the stretch (`_firsts`)


class _LeafJobs:
    """One leaf queue's waiting jobs, smallest entry first: those given at the start, sorted once (the
    smallest last), and those pushed back since, in a heap."""

    __slots__ = ("_pushed", "_sorted")

    def __init__(self, initial: list[JobEntry], ascending: bool = False) -> None:
        if ascending:  # sorted already, smallest first
            initial.reverse()
        else:
            initial.sort(reverse=True)
        self._sorted = initial
        self._pushed: list[JobEntry] = []

    def push(self, entry: JobEntry) -> None:
        heapq.heappush(self._pushed, entry)

    def head(self) -> JobInfo | None:
        """The job of the smallest entry, left in place."""
        entries, pushed = self._sorted, self._pushed
        if not pushed:
            return entries[-1][2] if entries else None
        if entries and entries[-1] < pushed[0]:
            return entries[-1][2]
        return pushed[0][2]

    def pop(self) -> JobInfo:
        """The job of the smallest entry, taken out."""
        entries, pushed = self._sorted, self._pushed
        if pushed and (not entries or pushed[0] < entries[-1]):
            return heapq.heappop(pushed)[2]
        return entries.pop()[2]

    def __bool__(self) -> bool:
        return bool(self._sorted) or bool(self._pushed)

    def entries(self) -> list[JobEntry]:
        """The entries left, smallest first."""
        entries = self._sorted[::-1]
        if self._pushed:
            entries += self._pushed
            entries.sort()  # two sorted runs
        return entries


class _Node:
    """A queue with jobs at or below it (the others never hand one out), and what it would hand out next:
    `job`, the head of the leaf `source`, at `rank` (None: nothing); a parent queue also keeps its children
    with nodes and the one it descends to (`children`); `siblings`: the children of its parent (or the
    roots) it is one of; `path`: itself and its ancestors, children first. `stale`: to be ranked again
    before the next pop. `ranks`: the queue's ranks by what the order reads of a job, for the allocation
    `ranked_at` (`QueueOrderedJobs._kept_rank`), but for the job `unread`, ranked at `rank` as the
    allocation moved, whose read is asked only when the ranks are (a first cycle moves the allocation at
    most pops, and its ranks are then never asked)."""

    __slots__ = (
        "children",
        "job",
        "jobs",
        "level",
        "parent",
        "path",
        "position",
        "queue",
        "rank",
        "ranked_at",
        "ranks",
        "siblings",
        "source",
        "stale",
        "unread",
    )

    def __init__(
        self, queue: QueueInfo, parent: _Node | None, position: int, siblings: _Siblings, children: _Siblings
    ) -> None:
        self.queue = queue
        self.parent = parent  # None: a root queue
        self.position = position  # among the parent's children (or the roots), in the tree's order
        self.siblings = siblings
        self.level: int = 0 if parent is None else parent.level + 1
        self.path: tuple[_Node, ...] = (self,) if parent is None else (self, *parent.path)  # to its root
        self.jobs: _LeafJobs | None = None  # a leaf queue's waiting jobs
        self.children = children  # (a leaf's stay empty)
        self.rank: tuple[Any, ...] | None = None
        self.job: JobInfo | None = None
        self.source: _Node | None = None
        self.stale = False
        self.ranks: dict[Hashable, tuple[Any, ...]] = {}
        self.ranked_at: tuple[float, float, float] | None = None
        self.unread: JobInfo | None = None


# A child waiting in its siblings' heap: its rank, its place among them (ranks that tie go by place), itself.
_Waiting = tuple[tuple[Any, ...], int, _Node]


class _Siblings:
    """The children with nodes of one queue (or the root queues), in the tree's order, and the first of them
    with the smallest rank (`best`, found by `first`).

    Where the queue order ranks them by a strict weak ordering (`weak_of` their queues' names: asked once
    needed), the others with a rank wait in a heap by rank and place (`others`) while the first's rank
    alone moves: the heap's first is then the one a scan with `<` finds among the others, and `best` stays
    first unless that one overtakes it (`overtakes`). The heap is built at a `first` after which only
    `best` had been ranked again (`others_kept`), not at every one: a victim action ranks every queue
    again after each attempt (`QueueOrderedJobs.refresh`), and a heap made for one pop costs more than
    the scan."""

    __slots__ = ("best", "heaped", "names", "nodes", "others", "others_kept", "weak", "weak_of")

    def __init__(self, names: list[str], weak_of: Callable[[list[str]], bool] | None) -> None:
        self.names = names  # every child queue's name (or every root's), in the tree's order
        self.weak_of = weak_of  # None: not known to be a strict weak ordering
        self.weak: bool | None = None
        self.nodes: list[_Node] = []
        self.best: _Node | None = None
        self.others: list[_Waiting] = []
        self.heaped = False  # `others` holds each child but `best` that has a rank, at that rank
        self.others_kept = False  # no child but `best` was ranked again since the last `first`

    def add(self, node: _Node) -> None:
        """A node made for one more of the children (to be ranked before the next `first`)."""
        self.nodes.append(node)
        self.nodes.sort(key=lambda sibling: sibling.position)
        self.others_kept = self.heaped = False

    def first(self) -> _Node | None:
        """The first child with the smallest rank, their ranks as they stand (`_first_smallest`). (The
        heap's part written out: asked at each level of the path of most pops.)"""
        best = self.best
        if self.heaped and best is not None:
            rank, others = best.rank, self.others
            if rank is None:
                best = heapq.heappop(others)[2] if others else None
            elif others:
                top = others[0]  # (`overtakes`)
                if top[0] < rank or (top[1] < best.position and not rank < top[0]):
                    best = heapq.heapreplace(others, (rank, best.position, best))[2]
        else:
            best = _first_smallest(self.nodes)
            if self.others_kept and self._is_weak():
                self.others = [
                    (node.rank, node.position, node)
                    for node in self.nodes
                    if node.rank is not None and node is not best
                ]
                heapq.heapify(self.others)
                self.heaped = True
        self.best = best
        self.others_kept = True
        return best

    def stays_first(self, node: _Node, rank: tuple[Any, ...]) -> bool:
        """Whether `node`, the first child, stays first ranked at `rank` (no other ranked again since)."""
        if self.heaped:
            others = self.others
            return not others or not overtakes(others[0], rank, node.position)
        kept, node.rank = node.rank, rank  # (ranked at `rank` for the scan, its own rank kept)
        first = _first_smallest(self.nodes)
        node.rank = kept
        return first is node

    def _is_weak(self) -> bool:
        weak = self.weak
        if weak is None:
            weak = self.weak = self.weak_of is not None and self.weak_of(self.names)
        return weak


class QueueOrderedJobs:
    """`depth` (KAI's queueDepthPerAction) bounds how many distinct jobs of one queue are handed out."""

    def __init__(self, session: Session, jobs: Iterable[JobInfo], depth: int | None = None) -> None:
        self._depth = depth
        self._handed_out: dict[str, set[str]] = {}
        self._queues = session.snapshot.queues
        self._order: QueueOrderKey = session.points.queue_order or session.queue_order_key
        self._reads: Callable[[JobInfo], Hashable] | None = (
            session.points.queue_order_reads if session.points.queue_order is not None else None
        )
        # The order key of a queue whose allocation moved since it was ranked (read only with `_reads`).
        moved = session.points.queue_order_moved if self._reads is not None else None
        order = self._order  # (not `self`: see `queues` below)
        self._moved: MovedQueueOrderKey = (
            moved if moved is not None else lambda queue, job, allocation: order(queue, job)
        )
        weak = session.points.queue_order_weak if session.points.queue_order is not None else None
        queues = self._queues  # (not `self`: the siblings hold it, and a cycle would keep the session)
        # Whether the order ranks the queues named by a strict weak ordering (None: not known to).
        self._weak_of: Callable[[list[str]], bool] | None = (
            None if weak is None else lambda names: weak([queues[name] for name in names])
        )
        self._verify = session.verify_carried
        self._job_order_key = session.job_order_key
        self._leaves: dict[str, _LeafJobs] = {}
        self._counter = 0
        self._nodes: dict[str, _Node] = {}
        self._roots = _Siblings(self._queues.roots, self._weak_of)
        self._best_root: _Node | None = None
        # The nodes to rank again, each once, children before their parent (`_settle`).
        self._stale: list[_Node] = []
        self._mixed = False  # `_stale` holds more than one path: to be sorted by level first
        # The leaf popped last while only its path may have moved since (its nodes' `job` and `rank` are
        # those of the job popped), and by what the order reads of its next job, the rank of the root
        # queue when its path still wins (None: it does not): see the module doc.
        self._lead: _Node | None = None
        self._firsts: dict[Hashable, object] = {}
        # The rank the root queue the last job came from had when it was handed out.
        self.popped_rank: tuple[Any, ...] = ()
        self._start(keyed_by_leaf(session, jobs), ascending=False)

    @classmethod
    def of_keyed(cls, session: Session, keyed: KeyedJobs, depth: int | None = None) -> QueueOrderedJobs:
        """The job queue of the jobs `keyed` (each leaf's entries smallest first, keyed by this session's
        job order: a job's key moves only when it is pushed back), without keying them again."""
        queue = cls(session, (), depth)
        queue._start(keyed, ascending=True)
        return queue

    def _start(self, keyed: KeyedJobs, ascending: bool) -> None:
        for name, entries in keyed.items():
            self._counter += len(entries)  # (entries never tie on their keys: see the module doc)
            self._leaves[name] = _LeafJobs(entries, ascending)
            self._mark(self._node(name))

    def push(self, job: JobInfo) -> None:
        self._counter += 1
        self._leaf(job.queue).push((self._job_order_key(job), self._counter, job))
        self._mark(self._node(job.queue))

    def pop(self) -> JobInfo | None:
        lead = self._lead
        if lead is not None:
            if not self._stale and _path_unmoved(lead):
                job = self._next_job(lead)
                if job is not None:
                    assert self._reads is not None
                    read = self._reads(job)
                    rank = self._firsts.get(read, _UNKNOWN)
                    if rank is _UNKNOWN:
                        rank = self._firsts[read] = self._root_rank_if_first(lead, read, job)
                    if rank is not None:
                        return self._take(lead, cast(tuple[Any, ...], rank))
            self._lead = None
            if self._stale:
                self._mark(lead)
            else:
                # Only the lead's path may have moved, each of its nodes the first of its siblings (as
                # `_best_root` found them): ranked again as marked and settled, without the marking.
                if self._verify:
                    _check_path_first(lead)
                self._rank_again(lead.path)
        if self._stale:
            self._settle()
        root = self._best_root
        if root is None:
            return None
        leaf = root.source
        assert root.rank is not None and leaf is not None and leaf.jobs is not None
        if self._reads is None:
            self._mark(leaf)
        else:
            self._lead = leaf
            if self._firsts:  # (a first cycle's stretches end at their first pop: no new dict)
                self._firsts = {}
        return self._take(leaf, root.rank)

    def _take(self, leaf: _Node, rank: tuple[Any, ...]) -> JobInfo:
        """Pop the head of `leaf`, its root queue at `rank`."""
        assert leaf.jobs is not None
        self.popped_rank = rank
        job = leaf.jobs.pop()
        if self._depth is not None:  # only a depth reads what was handed out
            self._handed_out.setdefault(leaf.queue.name, set()).add(job.key)
        return job

    def _root_rank_if_first(self, leaf: _Node, read: Hashable, job: JobInfo) -> tuple[Any, ...] | None:
        """The rank of the root queue when `job`, the next job of `leaf`, ranks `leaf` and each of its
        ancestors first among its siblings (all else as it stands: nothing else moved since the path
        was settled), else None: what `_settle` would find along the path, without changing it."""
        node = leaf
        while True:
            # (The path's allocation is the one its ranks are kept for: `_path_unmoved`.)
            rank = self._kept_rank(node, read, job)
            if not node.siblings.stays_first(node, rank):
                return None
            parent = node.parent
            if parent is None:
                return rank
            node = parent

    def _kept_rank(self, node: _Node, read: Hashable, job: JobInfo) -> tuple[Any, ...]:
        """The order key of `node`'s queue on `job` (`read`: what the order reads of it), kept by `read`
        while the queue's allocation is the one its ranks are kept for (`_Node.ranked_at`)."""
        ranks, unread = node.ranks, node.unread
        if unread is not None:  # (`rank` is still the one worked out on it: see `_settle`)
            assert self._reads is not None and node.rank is not None
            node.unread = None
            ranks[self._reads(unread)] = node.rank
        rank = ranks.get(read)
        if rank is None:
            rank = ranks[read] = self._order(node.queue, job)
        return rank

    def refresh(self) -> None:
        """Rank every queue again (after changes to queues other than the popped job's)."""
        for node in self._nodes.values():
            self._mark(node)

    def __bool__(self) -> bool:
        return any(self._leaves.values())

    def waiting_keyed(self) -> KeyedJobs:
        """The entries not handed out yet by leaf, smallest first (for another order of them:
        `actions.quiet_order`)."""
        keyed: KeyedJobs = {}
        for name, leaf in self._leaves.items():
            if leaf:
                keyed[name] = leaf.entries()
        return keyed

    def _leaf(self, name: str) -> _LeafJobs:
        leaf = self._leaves.get(name)
        if leaf is None:
            leaf = self._leaves[name] = _LeafJobs([])
        return leaf

    def _node(self, name: str) -> _Node | None:
        """The node of queue `name`, made (with its ancestors') on first use; None for a queue the tree
        does not have."""
        node = self._nodes.get(name)
        if node is not None or name not in self._queues:
            return node
        queue = self._queues[name]
        parent = None if queue.parent is None else self._node(queue.parent)
        siblings = self._roots if parent is None else parent.children
        children = _Siblings(queue.children, self._weak_of)
        node = self._nodes[name] = _Node(queue, parent, siblings.names.index(name), siblings, children)
        if queue.is_leaf:
            node.jobs = self._leaf(name)
        siblings.add(node)
        return node

    def _mark(self, node: _Node | None) -> None:
        """`node` and its ancestors are to be ranked again."""
        if node is None or node.stale:
            return
        stale = self._stale
        if stale:
            self._mixed = True
        while node is not None and not node.stale:  # a stale node's ancestors are stale already
            node.stale = True
            stale.append(node)
            siblings = node.siblings
            if node is not siblings.best:  # (the heap holds the others at their ranks: `_Siblings`)
                siblings.others_kept = siblings.heaped = False
            node = node.parent

    def _settle(self) -> None:
        """Rank the stale nodes again, children first: a leaf by the job it would hand out next, a parent
        by the first of its children with the smallest rank (a scan with `<`: see proportion's queue
        order), on the job that child would hand out."""
        stale = self._stale
        if self._mixed:
            stale.sort(key=lambda node: node.level, reverse=True)
            self._mixed = False
        self._rank_again(stale)
        stale.clear()

    def _rank_again(self, nodes: Sequence[_Node]) -> None:
        """Rank `nodes` again, children first (`_settle`), then find the first root queue."""
        order, reads, depth, moved = self._order, self._reads, self._depth, self._moved
        # What the order reads of the job last ranked: a path settled after a pop ranks the leaf and each
        # of its ancestors on the same job, which is read once.
        read_job: JobInfo | None = None
        read: Hashable = None
        for node in nodes:
            node.stale = False
            jobs = node.jobs
            if jobs is not None:
                job = jobs.head() if depth is None else self._next_job(node)  # (a call less a pop)
                node.job, node.source = job, node
            else:
                best = node.children.first()
                if self._verify:
                    _check_first(node.children)
                job = None if best is None else best.job
                node.job, node.source = job, None if best is None else best.source
            if job is None:
                node.rank = node.unread = None  # (its kept ranks stay: `unread` was ranked at `rank`)
            elif reads is None:
                node.rank = order(node.queue, job)
            else:
                # (A first cycle settles a path after most pops, its allocation moved: its kept ranks go,
                # and what the order reads of the job is asked only if they are: `_Node.unread`.)
                allocated = node.queue.allocated
                at = (allocated.gpu, allocated.cpu, allocated.memory)
                if at != node.ranked_at:
                    node.ranked_at = at
                    node.rank = moved(node.queue, job, at)
                    node.unread = job
                    if node.ranks:  # (mostly never asked: no new dict)
                        node.ranks = {}
                else:
                    if job is not read_job:
                        read_job, read = job, reads(job)
                    node.rank = self._kept_rank(node, read, job)
        self._best_root = self._roots.first()
        if self._verify:
            _check_first(self._roots)

    def _next_job(self, leaf: _Node) -> JobInfo | None:
        """The job this leaf queue would hand out next."""
        assert leaf.jobs is not None
        job = leaf.jobs.head()
        if job is None:
            return None
        if self._depth is not None:
            handed_out = self._handed_out.get(leaf.queue.name, set())
            if len(handed_out) >= self._depth and job.key not in handed_out:
                return None
        return job


def _first_smallest(nodes: list[_Node]) -> _Node | None:
    """The first of `nodes` with the smallest rank, by one scan with `<` (see proportion's queue order)."""
    best, best_rank = None, None
    for node in nodes:
        rank = node.rank
        if rank is not None and (best_rank is None or rank < best_rank):
            best, best_rank = node, rank
    return best


def _check_first(siblings: _Siblings) -> None:
    """With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`): the first of `siblings` found by a scan too, and a
    difference raises `CarriedMismatch`."""
    if siblings.best is not _first_smallest(siblings.nodes):
        names = [node.queue.name for node in siblings.nodes]
        raise CarriedMismatch(f"the job queue's first of the queues {names} differs from a scan's")


def _check_path_first(leaf: _Node) -> None:
    """With `verify`: each node on `leaf`'s path is the first of its siblings, as a pop that ranks only that
    path again takes them to be; a difference raises `CarriedMismatch`."""
    for node in leaf.path:
        if node.siblings.best is not node:
            raise CarriedMismatch(
                f"the job queue's queue {node.queue.name}, on the path popped last, is not first"
            )


def overtakes(top: tuple[tuple[Any, ...], int, object], rank: tuple[Any, ...], position: int) -> bool:
    """Whether `top` (rank, place, queue), the first of a heap of siblings, goes before a sibling at `rank`
    in place `position` (the first with the smallest rank, as a scan with `<` picks)."""
    return top[0] < rank or (top[1] < position and not rank < top[0])


def _path_unmoved(leaf: _Node) -> bool:
    """Whether the allocation of `leaf`'s queue and its ancestors' is the one their ranks were kept for."""
    node: _Node | None = leaf
    while node is not None:
        allocated = node.queue.allocated  # (`allocation_of`, written out: asked at every pop)
        if (allocated.gpu, allocated.cpu, allocated.memory) != node.ranked_at:
            return False
        node = node.parent
    return True


def allocation_of(queue: QueueInfo) -> tuple[float, float, float]:
    """A queue's allocation as the queue order's kept ranks are compared with: its bits."""
    allocated = queue.allocated
    return (allocated.gpu, allocated.cpu, allocated.memory)


def keyed_by_leaf(session: Session, jobs: Iterable[JobInfo]) -> KeyedJobs:
    """`jobs`' entries by leaf queue, in the order given (the counter counts from 1)."""
    keyed: KeyedJobs = {}
    key_of = session.job_order_key
    for counter, job in enumerate(jobs, 1):
        entries = keyed.get(job.queue)
        if entries is None:
            entries = keyed[job.queue] = []
        entries.append((key_of(job), counter, job))
    return keyed


def sorted_by_leaf(session: Session, jobs: Iterable[JobInfo]) -> KeyedJobs:
    """`keyed_by_leaf`, each leaf's entries smallest first (for `QueueOrderedJobs.of_keyed`)."""
    keyed = keyed_by_leaf(session, jobs)
    for entries in keyed.values():
        entries.sort()  # (entries never tie on their keys: see the module doc)
    return keyed


def handed_out_by_leaf(session: Session, keyed: KeyedJobs, depth: int | None) -> dict[str, list[JobInfo]]:
    """The jobs a job queue of `keyed` (sorted: `sorted_by_leaf`) hands out of each leaf queue while no job
    is pushed back, in the order it hands them out: each leaf's jobs in job order, at most `depth` of them
    (a queue depth: distinct jobs), none of a queue the tree does not have as a leaf (it has no node to
    hand them out from). Only how the leaves' jobs interleave depends on the queue order."""
    queues = session.snapshot.queues
    handed_out: dict[str, list[JobInfo]] = {}
    for name, entries in keyed.items():
        if name in queues and queues[name].is_leaf:
            jobs = [job for _, _, job in entries]
            handed_out[name] = jobs if depth is None else jobs[: max(depth, 0)]
    return handed_out


def with_pending(snapshot: ClusterSnapshot) -> list[JobInfo]:
    """The jobs that have a pending pod now, in snapshot order."""
    return [job for job in snapshot.jobs_at_open().waiting if job.tally().pending]
