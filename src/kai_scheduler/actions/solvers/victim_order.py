"""Victims in the reverse of the scheduling order (KAI's victim queue), unit by unit.

`order_victims` hands out, lazily, what the victim solver takes next: down the queue tree the child that
ranks last, in the leaf the job that ranks last, and from that job one unit (`VictimUnit`: one pod above
its minMember, or the rest of its pods at once). The per-queue candidate lists (`LeafVictims`) are ordered
once and kept until a commit changes the queue; `SharedVictims` lets preemptors alike share one order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kai_scheduler.actions.solvers.gang_eviction import has_elastic_surplus, tasks_to_evict
from kai_scheduler.framework.gang import request_of
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import ACTIVE_ALLOCATED, JobInfo, TaskInfo
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.resources import Resources


@dataclass(frozen=True, slots=True)
class VictimUnit:
    """What one step of the search takes from a victim job: one pod above its minMember, or the rest of
    its pods (the gang) at once; and the GPUs they free, as a search counts them (`request_of`), worked
    out once for every search that takes the unit (`SharedVictims` hands one to many)."""

    job: JobInfo
    tasks: list[TaskInfo]
    gpus: float


class SharedVictims:
    """One victim order, handed to every attempt that would compute it alike: the units it produced so
    far, then more from the underlying (lazy) order as an attempt needs them. Valid while the cluster
    stays as it was when the order started (the owner drops it on a commit), and only when every unit is
    asked for with the cluster as it was (one-pod preemptors: each scenario is undone before the next)."""

    def __init__(self, source: Iterator[VictimUnit]) -> None:
        self._source = source
        self._units: list[VictimUnit] = []

    def __iter__(self) -> Iterator[VictimUnit]:
        index = 0
        while True:
            if index == len(self._units):
                unit = next(self._source, None)
                if unit is None:
                    return
                self._units.append(unit)
            yield self._units[index]
            index += 1


def active_tasks(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The pods that may be victims: running ones, and ones placed earlier in this cycle (allocated or
    pipelined), as KAI's active-allocated pods. Kept per job until one of its pods changes status: every
    attempt of every victim action looks at every candidate job."""
    return _active(_active_kept(session), job)


def active_nodes(session: Session, jobs: Iterable[JobInfo]) -> list[int]:
    """The nodes of the jobs' `active_tasks`, in job order (a node once per pod). Why: preempt asks where
    the candidates of a queue run, 700 jobs a queue at 20,000 nodes, with the kept pods looked up once."""
    known = _active_kept(session)
    return [task.node for job in jobs for task in _active(known, job)]


def active_tasks_each(session: Session, jobs: Iterable[JobInfo]) -> Iterator[tuple[JobInfo, list[TaskInfo]]]:
    """Each of `jobs` with its `active_tasks`, the kept pods looked up once. Why: consolidation indexes
    every candidate by node (16,000 jobs in a first cycle at 5,000 nodes)."""
    known = _active_kept(session)
    for job in jobs:
        yield job, _active(known, job)


_ActiveKept = dict[JobInfo, tuple[int, list[TaskInfo]]]


def _active_kept(session: Session) -> _ActiveKept:
    kept: _ActiveKept = session.scratch.setdefault("victims.active", {})
    return kept


def _active(known: _ActiveKept, job: JobInfo) -> list[TaskInfo]:
    lone = job.lone_task
    if lone is not None:  # (a bare pod's plain job, its one pod: as cheap to read as to look up)
        return [lone] if lone.status in ACTIVE_ALLOCATED else []
    cached = known.get(job)
    if cached is None or cached[0] != job.version:
        cached = known[job] = (job.version, [t for t in job.tasks if t.status in ACTIVE_ALLOCATED])
    return cached[1]


class _Last:
    """A job order key that sorts in reverse: the victim queue hands out the job that ranks last."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key

    def __lt__(self, other: _Last) -> bool:
        return other.key < self.key


# Per leaf queue, its candidate jobs as a heap in reverse job order (the entries: the job's order key,
# reversed; a tie-breaking counter; the job).
VictimEntry = tuple[_Last, int, JobInfo]
Heaps = dict[str, list[VictimEntry]]


def victim_heaps(session: Session, jobs: Iterable[JobInfo], usable: BoolArray | None = None) -> Heaps:
    """`jobs` by leaf queue, each queue's as a heap in reverse job order (see `order_victims`), leaving out
    jobs with no pod on a `usable` node."""
    heaps: Heaps = {}
    for count, job in enumerate(jobs):
        if usable is not None and not any(usable[task.node] for task in active_tasks(session, job)):
            continue
        key = session.victim_order_key(job, len(active_tasks(session, job)))
        heaps.setdefault(job.queue, []).append((_Last(key), count, job))
    for heap in heaps.values():
        heap.sort()  # sorted: a heap, and what `_LeafQueue` takes
    return heaps


class LeafVictims:
    """One leaf queue's candidate victims in reverse job order, ready to be cut down to the jobs with a
    pod on the nodes some preemptor may use (`heap`): the order does not depend on the preemptor, so one
    of these serves every attempt until the cluster changes."""

    __slots__ = ("entries", "nodes", "starts")

    def __init__(self, session: Session, jobs: Iterable[JobInfo]) -> None:
        # Each job's order key and nodes, kept until one of its pods changes status: a commit orders its
        # queues' victims again, most of them unchanged.
        known: dict[JobInfo, tuple[int, tuple[Any, ...], list[int]]] = session.scratch.setdefault(
            "victims.entries", {}
        )
        rows: list[tuple[tuple[Any, ...], list[int], JobInfo]] = []
        for job in jobs:
            cached = known.get(job)
            if cached is None or cached[0] != job.version:
                active = active_tasks(session, job)
                key = session.victim_order_key(job, len(active))
                cached = known[job] = (job.version, key, [task.node for task in active])
            rows.append((cached[1], cached[2], job))
        # Sorted in reverse job order (keys are unique: they end with the job's key), so a heap as it is,
        # and so is any selection of it, in order.
        rows.sort(key=lambda row: row[0], reverse=True)
        self.entries = [(_Last(key), 0, job) for key, _, job in rows]
        nodes: list[int] = []
        starts: list[int] = []
        for _, job_nodes, _ in rows:
            starts.append(len(nodes))
            nodes.extend(job_nodes)
        self.nodes = np.array(nodes, dtype=np.intp)
        self.starts = np.array(starts, dtype=np.intp)

    def heap(self, usable: BoolArray) -> list[tuple[_Last, int, JobInfo]]:
        """The jobs with a pod on a `usable` node, as a heap (sorted)."""
        if not self.entries:
            return []
        on_usable = np.logical_or.reduceat(usable[self.nodes], self.starts)
        return [self.entries[i] for i in np.flatnonzero(on_usable).tolist()]


def order_victims(
    session: Session,
    action: str,
    preemptor: JobInfo,
    tasks: Sequence[TaskInfo],
    jobs: Sequence[JobInfo] | Heaps,
    admit: Callable[[JobInfo], bool] | None = None,
) -> Iterator[VictimUnit]:
    """Victims in the reverse of the scheduling order (KAI's victim queue), from `jobs` (or their heaps,
    made earlier with `victim_heaps` for the nodes `tasks` may use). Down the queue tree, at every level
    the child that ranks last in queue order (over its fair share, above its quota, low priority, large
    dominant share: see proportion's `victim_queue_key`); in the leaf reached, the job that ranks last in
    job order (the lowest priority; among equals one running above its minMember before one at it; then
    the newest). From that job one unit (`gang_eviction.tasks_to_evict`); a job with pods left goes back
    into its queue and is ranked again with what it has left.

    A job is passed over when `admit` refuses it, when it is the preemptor itself, when none of its pods
    runs on a node the preemptor's `tasks` may use at all (freeing other nodes cannot help), or when its
    minimum runtime protects it and it runs no pod above its minMember (a protected job gives only
    those).

    Lazy: the solver usually needs only the first few units. A job is ranked again with the pods it has
    left (`Session.victim_order_key`), as KAI ranks the job's remaining pods."""
    usable = session.usable_nodes(tasks)
    source = jobs if isinstance(jobs, dict) else victim_heaps(session, jobs, usable)
    if _nothing_to_order(source):
        return
    order = _VictimOrder(session, action, preemptor, usable, source, admit)
    while (leaf := order.next_leaf()) is not None:
        job = order.pop(leaf)
        unit = tasks_to_evict(session, job, order.left_of[job], job in order.protected)
        if unit:
            yield VictimUnit(job, unit, request_of(session, unit).gpu)
            order.took(leaf, job, unit)


def _nothing_to_order(source: Heaps) -> bool:
    """Whether no candidate runs on a node the preemptor may use: then the order hands out nothing, and
    ranking the queue tree for it is skipped. Why: most attempts that fail end so (590 of consolidation's
    643 in a first cycle at 20,000 nodes), and each ranked every queue."""
    return not any(source.values())


class _LeafQueue:
    """One leaf's candidates in victim order: the sorted entries it started with, read in order, and a
    small heap of the jobs put back with what they have left. The same order as one heap of both, without
    the heap's comparisons (each a Python call) on every pop: most jobs are taken whole and never return."""

    __slots__ = ("_next", "_returned", "_sorted")

    def __init__(self, entries: list[VictimEntry]) -> None:
        self._sorted = entries  # sorted, never changed (it may be shared)
        self._next = 0
        self._returned: list[VictimEntry] = []

    def __bool__(self) -> bool:
        return self._next < len(self._sorted) or bool(self._returned)

    def _from_returned(self) -> bool:
        if not self._returned:
            return False
        return self._next >= len(self._sorted) or self._returned[0] < self._sorted[self._next]

    def first(self) -> JobInfo:
        return self._returned[0][2] if self._from_returned() else self._sorted[self._next][2]

    def pop(self) -> JobInfo:
        if self._from_returned():
            return heapq.heappop(self._returned)[2]
        self._next += 1
        return self._sorted[self._next - 1][2]

    def push(self, entry: VictimEntry) -> None:
        heapq.heappush(self._returned, entry)


# What a pod on a node takes of its queue (`PodRequest.queue_resources` with the node's GPU memory), by pod,
# with the node it was worked out for (read only).
_QueueAmounts = dict[TaskInfo, tuple[int, Resources]]


def _queue_amounts(session: Session) -> _QueueAmounts:
    """The session's `_QueueAmounts`. Why: every victim order works out what each job it ranks holds, pod
    by pod, and a commit starts the orders afresh: a first cycle over a deep backlog at 5,000 nodes makes
    some 560 orders of much the same pods, and working the amounts out again was a fifth of their cost."""
    amounts: _QueueAmounts = session.scratch.setdefault("victims.amounts", {})
    return amounts


class _VictimOrder:
    """The state of one `order_victims`: the heaps it hands jobs out from (copies), what each job looked
    at has left, and each queue's rank, kept until a victim is taken below it (a unit changes only the
    queues on its leaf's path). Only the queues with a candidate below them are ranked, and their
    allocations kept: a queue without one never gives anything (its rank would be None), and most queues
    have none within a preemptor's reach (each order ranked and copied all 55 queues of a first cycle's
    workload, at every size). A class rather than closures: mutually recursive closures would make a
    reference cycle holding the session."""

    def __init__(
        self,
        session: Session,
        action: str,
        preemptor: JobInfo,
        usable: BoolArray,
        source: Heaps,
        admit: Callable[[JobInfo], bool] | None,
    ) -> None:
        self.session = session
        self.action = action
        self.preemptor = preemptor
        self.usable = usable
        self.admit = admit
        self.queues = session.snapshot.queues
        self.heaps = {name: _LeafQueue(entries) for name, entries in source.items() if entries}
        self.left_of: dict[JobInfo, list[TaskInfo]] = {}  # the job's victim pods left, once looked at
        self.passed: set[JobInfo] = set()  # looked at, and passed over
        self.protected: set[JobInfo] = set()
        self.counter = sum(len(entries) for entries in source.values())
        self.paths: dict[str, list[str]] = {}  # leaf -> the names of the leaf and its ancestors
        # The queues with a candidate below them (the leaves with a heap and their ancestors): the roots
        # among them, and of each parent among them, its children that are (in order), once asked.
        self.live = {name for leaf in self.heaps for name in self._path(leaf)}
        self.live_roots = [name for name in self.queues.roots if name in self.live]
        self.live_children: dict[str, list[str]] = {}
        self.allocated = {name: self.queues[name].allocated.copy() for name in self.live}
        self.taken: dict[str, Resources] = {name: Resources() for name in self.live}
        self.ranks: dict[str, tuple[tuple[Any, ...], str] | None] = {}
        self.held_of: dict[JobInfo, Resources] = {}  # what each job looked at holds of what it has left
        self.amounts = _queue_amounts(session)

    def next_leaf(self) -> str | None:
        """The leaf queue whose job goes next (None: no job left that may give anything)."""
        best = self._last_child(self.live_roots)
        return None if best is None else best[1]

    def _children_live(self, parent: str) -> list[str]:
        """The children of `parent` with a candidate below them, in order."""
        found = self.live_children.get(parent)
        if found is None:
            children = self.queues[parent].children
            found = self.live_children[parent] = [name for name in children if name in self.live]
        return found

    def _path(self, leaf: str) -> list[str]:
        path = self.paths.get(leaf)
        if path is None:
            path = self.paths[leaf] = [queue.name for queue in self.queues.ancestry(leaf)]
        return path

    def pop(self, leaf: str) -> JobInfo:
        job = self.heaps[leaf].pop()
        for name in self._path(leaf):
            self.ranks.pop(name, None)
        return job

    def took(self, leaf: str, job: JobInfo, unit: list[TaskInfo]) -> None:
        """Account a unit handed out; a job with pods left goes back, ranked with what it has left."""
        amount = self._held(unit)
        for name in self._path(leaf):
            self.taken[name].add(amount)
        gone = {id(task) for task in unit}
        rest = [task for task in self.left_of[job] if id(task) not in gone]
        self.left_of[job] = rest
        self.held_of.pop(job, None)
        if rest and (job not in self.protected or has_elastic_surplus(self.session, job, rest)):
            self.counter += 1
            key = _Last(self.session.victim_order_key(job, len(rest)))
            self.heaps[leaf].push((key, self.counter, job))

    def _held(self, tasks: list[TaskInfo]) -> Resources:
        nodes = self.session.snapshot.nodes
        amounts = self.amounts
        total = Resources()
        for task in tasks:
            kept = amounts.get(task)
            if kept is None or kept[0] != task.node:
                amount = task.request.queue_resources(float(nodes.gpu_memory_mib[task.node]))
                kept = amounts[task] = (task.node, amount)
            total.add(kept[1])
        return total

    def _eligible(self, job: JobInfo) -> bool:
        """Whether the job may give anything at all (asked once, when it first comes up)."""
        if job in self.left_of:
            return True
        if job in self.passed:
            return False
        session = self.session
        active = active_tasks(session, job)
        ok = job is not self.preemptor and (self.admit is None or self.admit(job))
        ok = ok and bool(active) and any(self.usable[task.node] for task in active)
        if ok and session.is_protected(self.action, self.preemptor, job):
            ok = has_elastic_surplus(session, job, active)
            self.protected.add(job)
        if ok:
            self.left_of[job] = active
        else:
            self.passed.add(job)
        return ok

    def _rank(self, name: str) -> tuple[tuple[Any, ...], str] | None:
        """The queue's victim-order key (forward: the largest is handed out first) and the leaf below it
        whose job would go; None when no job below it may give anything."""
        if name not in self.ranks:
            self.ranks[name] = self._ranked(name)
        return self.ranks[name]

    def _ranked(self, name: str) -> tuple[tuple[Any, ...], str] | None:
        queue = self.queues[name]
        if queue.is_leaf:
            heap = self.heaps.get(name)
            while heap and not self._eligible(heap.first()):
                heap.pop()
            if not heap:
                return None
            leaf = name
        else:
            best = self._last_child(self._children_live(name))
            if best is None:
                return None
            leaf = best[1]
        victim_key = self.session.points.victim_queue_order
        if victim_key is None:
            return (queue.rank,), leaf
        remaining = self.allocated[name].copy()
        remaining.sub(self.taken[name])
        next_job = self.heaps[leaf].first()
        held = self.held_of.get(next_job)
        if held is None:
            held = self.held_of[next_job] = self._held(self.left_of[next_job])
        remaining.sub(held)
        return victim_key(queue, self.allocated[name], remaining), leaf

    def _last_child(self, names: list[str]) -> tuple[str, str] | None:
        best: tuple[tuple[Any, ...], str, str] | None = None
        for name in names:
            found = self._rank(name)
            if found is not None and (best is None or best[0] < found[0]):
                best = (found[0], name, found[1])
        return None if best is None else (best[1], best[2])
