"""consolidation: make room for a pending job by moving running pods, never by stopping them.

When a preemptible job does not fit anywhere although the cluster has enough free GPUs in total (the free
GPUs are scattered), consolidation looks for preemptible running jobs to move: each scenario evicts
victims and places the pending job and the victims again, in queue order, with the allocation routine (a
victim may land back where it was, or move); a scenario in which any victim would have to stop is
invalid. At most `maxConsolidationPreemptees` pods are evicted for one job (0 turns consolidation off).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from kai_scheduler.actions.solvers.victim_order import (
    SharedVictims,
    VictimUnit,
    active_tasks_each,
    order_victims,
)
from kai_scheduler.actions.solvers.victim_scenarios import Scenario, stays_evicted
from kai_scheduler.actions.solvers.victims import VictimAction
from kai_scheduler.framework.gang import kept_tasks, lone_next_pod, next_request, next_signature
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import FloatArray, IntArray, NodeTable
from kai_scheduler.model.queues import is_unlimited
from kai_scheduler.model.resources import EPSILON, PodRequest

# Nodes turned into ints at a time by `_each`.
_SLICE = 64


class Consolidation(VictimAction):
    name = "consolidation"
    gave_up = "moving running pods (at most maxConsolidationPreemptees) does not make room"
    blocks_quietly = True  # (preemptibility and the free GPUs only answer)
    # (No job's search fails in a walk without one, and a deep backlog's jobs nearly all ask more GPUs
    # than the cluster has free: its walk asked 9,000 signatures at 5,000 nodes for nothing.)
    blocked_before_signature = True

    def __init__(self) -> None:
        super().__init__()
        # The candidate victims by node (each job under every node it has an active pod on), kept up to
        # date after every commit: victims are looked for node by node (`_closest_to_room_first`), and
        # going through every running job for each of hundreds of pending jobs was most of a busy cycle.
        # Made at the first attempt (most pending jobs are blocked: no attempt, no index), from the
        # candidates in the order the action found them.
        self._on_node: dict[int, dict[JobInfo, None]] = {}
        self._nodes_of: dict[JobInfo, list[int]] = {}
        self._unindexed: list[JobInfo] | None = None
        # The nodes of `_on_node` in index order, once asked, brought up to date by commits
        # (`_nodes_with_jobs`).
        self._with_jobs: IntArray | None = None
        # The jobs `_closest_to_room_first` considers for any preemptor and the free GPUs they were found
        # by, while those stay, until a commit (`_considered`), with the node table's usage version then.
        self._considered_jobs: list[JobInfo] | None = None
        self._considered_by: FloatArray | None = None
        self._considered_at: tuple[NodeTable, int] | None = None
        # The cluster's free and releasing GPUs in all, with the usage version they were summed at
        # (`_free_gpus`).
        self._free: tuple[NodeTable, int, float] | None = None
        # Whether a queue's path has a limit (or the placement checks a queue's bounds), by leaf queue, for
        # the session (`signature`).
        self._limited: dict[str, bool] = {}
        # What a bare pod's plain job asks, by its pod's request, for the session (`_next_ask`).
        self._asks: dict[PodRequest, tuple[float, bool]] = {}

    def execute(self, session: Session) -> None:
        if session.config.max_consolidation_preemptees == 0:
            return
        self._on_node.clear()
        self._nodes_of.clear()
        self._unindexed = None
        self._with_jobs = None
        self._considered_jobs = None
        self._limited.clear()
        self._asks.clear()
        super().execute(session)

    def started(self, session: Session, candidates: list[JobInfo]) -> None:
        self._unindexed = candidates

    def committed(self, session: Session, touched: list[JobInfo]) -> None:
        # (A commit follows an attempt, which made the index.)
        left: list[int] = []
        for job in touched:
            for node in self._nodes_of.pop(job, ()):
                jobs = self._on_node[node]
                jobs.pop(job, None)
                if not jobs:
                    del self._on_node[node]
                    left.append(node)
        came = self._index(session, [job for job in touched if job in self.by_queue.get(job.queue, {})])
        if self._with_jobs is not None and (left or came):
            self._with_jobs = _moved(self._with_jobs, left, came)

    def _index(self, session: Session, jobs: list[JobInfo]) -> list[int]:
        """Index `jobs` by node (`_on_node`, `_nodes_of`); the nodes that had no candidate before."""
        self._considered_jobs = None
        came: list[int] = []
        on_node, nodes_of = self._on_node, self._nodes_of
        for job, active in active_tasks_each(session, jobs):
            # (Most jobs have one pod: no set to sort. A node's first job makes its dict at once, rather
            # than a dict thrown away for every job after it: 30,000 jobs at 20,000 nodes.)
            nodes = [active[0].node] if len(active) == 1 else sorted({task.node for task in active})
            nodes_of[job] = nodes
            for node in nodes:
                here = on_node.get(node)
                if here is None:
                    on_node[node] = {job: None}
                    came.append(node)
                else:
                    here[job] = None
        return came

    def signature(self, session: Session, job: JobInfo) -> tuple[object, ...]:
        # Whether moving pods makes room does not depend on the preemptor's queue (no queue may lose
        # resources to it), except through a limit on the queue's path, checked when the job is placed.
        # (Its signature without the queue is the one kept with its next pods.)
        limited = self._limited.get(job.queue)
        if limited is None:
            path = session.snapshot.queues.ancestry(job.queue)
            limited = self._limited[job.queue] = session.points.queue_bound_placement or any(
                not is_unlimited(limit) for queue in path for limit in queue.limit.values()
            )
        return (next_signature(session, job, by_queue=False), job.queue if limited else None)

    def blocked(self, session: Session, job: JobInfo) -> bool:
        if not job.preemptible:
            return True
        # Moving pods only helps when the GPUs exist, just not together (MIG instances are not counted: a
        # job asking for some is never blocked).
        gpus, asks_mig = self._next_ask(session, job)
        return self._free_gpus(session) + EPSILON < gpus and not asks_mig

    def _next_ask(self, session: Session, job: JobInfo) -> tuple[float, bool]:
        """The GPUs the job's next pods ask (`next_request`) and whether one of them asks a MIG instance
        (only a pod with extended resources may). A bare pod's plain job whose pod is all its next pods
        (`lone_next_pod`) answers by the pod's request, kept per request for the session (`_asks`): a
        deep backlog's walk asks thousands of jobs (9,000 at 5,000 nodes in a first cycle), each with
        the free GPUs short, of a few dozen requests."""
        lone = lone_next_pod(session, job)
        if lone is None:
            return self._ask_of(session, job)
        ask = self._asks.get(lone.request)
        if ask is None:
            ask = self._asks[lone.request] = self._ask_of(session, job)
        elif session.verify_carried and ask != self._ask_of(session, job):
            raise CarriedMismatch(f"consolidation's ask kept for {lone.request} differs from {job.key}'s")
        return ask

    @staticmethod
    def _ask_of(session: Session, job: JobInfo) -> tuple[float, bool]:
        """`_next_ask` worked out from the job's next pods."""
        tasks = kept_tasks(session, job)
        asks_mig = any(task.request.scalars and task.request.mig_instances for task in tasks)
        return next_request(session, job).gpu, asks_mig

    def _free_gpus(self, session: Session) -> float:
        """The free and releasing GPUs of the whole cluster, summed again only once the node table's usage
        changed (`NodeTable.version`). Why: each of 669 jobs asked in a first cycle at 20,000 nodes summed
        every node's, most of them with nothing changed since the last."""
        nodes = session.snapshot.nodes
        kept = self._free
        if kept is not None and kept[0] is nodes and kept[1] == nodes.version and not session.verify_carried:
            return kept[2]
        free = float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
        if kept is not None and kept[0] is nodes and kept[1] == nodes.version and kept[2] != free:
            raise CarriedMismatch(f"consolidation's free GPUs: kept {kept[2]}, now {free}")
        self._free = (nodes, nodes.version, free)
        return free

    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        if self._unindexed is not None:
            self._index(session, self._unindexed)
            self._unindexed = None

        def victims() -> Iterable[VictimUnit]:
            return self._closest_to_room_first(session, job, tasks)

        def reason(victim: TaskInfo) -> str:
            return f"consolidated to make room for {job.key} (queue {job.queue})"

        bound = session.config.max_consolidation_preemptees
        scenario = Scenario(self.name, job, tasks, _all_placed, reason, bound, by_node=False)
        return self.solve(session, scenario, victims)

    def _closest_to_room_first(
        self, session: Session, job: JobInfo, tasks: list[TaskInfo]
    ) -> Iterable[VictimUnit]:
        """The victims, in victim order, among the jobs considered at all.

        KAI considers maxConsolidationPreemptees + 1 of the preemptible jobs only (the first its job map
        hands out, in no particular order) and orders those as victims; so does this, choosing them
        deterministically and usefully: the jobs on the nodes with the most free GPUs first (moving them
        frees room soonest), then by node name. Without a bound every job is considered, as KAI."""
        cap = session.config.max_consolidation_preemptees + 1  # jobs considered; 0: no bound
        chosen = [victim for victim in self._considered(session, cap) if victim is not job]
        if cap:
            chosen = chosen[:cap]
        if session.points.victim_protection.get(self.name):
            # (A protection may depend on the preemptor: its order is its own.)
            return order_victims(session, self.name, job, tasks, chosen)
        return self._shared_order(session, job, tasks, chosen)

    def _shared_order(
        self, session: Session, job: JobInfo, tasks: list[TaskInfo], chosen: list[JobInfo]
    ) -> Iterable[VictimUnit]:
        """The victim order of `chosen` for the nodes `tasks` may use, shared by every attempt until the
        next commit (`SharedVictims`). Without a protection the order depends on the preemptor only
        through those two (it is not among `chosen`), and it reads nothing a search's evictions change:
        the queues' allocations as the order started, and each job's pods when it first comes up, before
        any of them is evicted. Why: the jobs of a queue at its limit fail one after the other, each
        search evicting and ranking the same 17 victims (8 searches of 17 in a first cycle at 500 nodes,
        more than half of consolidation's work there). With `verify_carried` each shared unit is checked
        against the order worked out again for the preemptor (`CarriedMismatch`)."""
        key = (tuple(chosen), session.usable_nodes(tasks).tobytes())
        shared = self.shared_orders.get(key)
        if shared is None:
            order = order_victims(session, self.name, job, tasks, chosen)
            shared = self.shared_orders[key] = SharedVictims(order)
        if session.verify_carried:
            return _checked(shared, order_victims(session, self.name, job, tasks, chosen))
        return shared

    def _considered(self, session: Session, cap: int) -> list[JobInfo]:
        """The first `cap` + 1 jobs (all without a bound) on the nodes with the most free GPUs, by name
        among equals (index order is name order): whichever the preemptor, the `cap` others it considers
        are among them. Kept while the candidates' index and every node's free GPUs stay (a failed attempt
        leaves the cluster as it found it, but a search frees its preemptor's own reservation while it
        runs). Why: each of 600 attempts at 20,000 nodes in a first cycle sorted every node with a
        candidate, and most attempts come between the same commits. While the node table's usage version
        stays, its free GPUs are not even compared (an attempt with no victim within reach changes none)."""
        nodes = session.snapshot.nodes
        kept, kept_by, at = self._considered_jobs, self._considered_by, self._considered_at
        unchanged = at is not None and at[0] is nodes and at[1] == nodes.version
        if kept is not None and unchanged and not session.verify_carried:
            return kept
        free = nodes.idle_gpus_total()
        same = kept is not None and kept_by is not None and np.array_equal(free, kept_by)
        if kept is not None and unchanged and not same:
            raise CarriedMismatch("consolidation's free GPUs changed while the node table's version stayed")
        if kept is not None and same and not session.verify_carried:
            self._considered_at = (nodes, nodes.version)
            return kept
        with_jobs = self._nodes_with_jobs()
        order = with_jobs[np.argsort(-free[with_jobs], kind="stable")]
        limit = cap + 1 if cap else -1
        considered: dict[JobInfo, None] = {}
        for node in _each(order):
            for victim in self._on_node[node]:
                considered[victim] = None
                if len(considered) == limit:
                    break
            if len(considered) == limit:
                break
        found = list(considered)
        if same and kept != found:
            raise CarriedMismatch(f"consolidation's considered jobs: kept {kept}, now {found}")
        self._considered_jobs, self._considered_by = found, free.copy()
        self._considered_at = (nodes, nodes.version)
        return found

    def _nodes_with_jobs(self) -> IntArray:
        """The nodes with a candidate, in index order: made once, then brought up to date by each commit
        at the nodes that lost their last candidate or gained a first one (`_moved`). Why: every attempt
        made it from every node with a candidate (20,000 at 20,000 nodes in a first cycle, for each of
        600 attempts), and then every commit did (45 at 20,000 nodes, a sort of 20,000 nodes each)."""
        if self._with_jobs is None:
            with_jobs = np.fromiter(self._on_node, dtype=np.intp, count=len(self._on_node))
            with_jobs.sort()
            self._with_jobs = with_jobs
        return self._with_jobs


def _moved(nodes: IntArray, left: list[int], came: list[int]) -> IntArray:
    """`nodes` (ascending) without the nodes of `left` (among them) and with those of `came` (not among
    them once `left` are out), ascending."""
    if left:
        nodes = np.delete(nodes, np.searchsorted(nodes, sorted(set(left))))
    if came:
        added = np.array(sorted(came), dtype=nodes.dtype)
        nodes = np.insert(nodes, np.searchsorted(nodes, added), added)
    return nodes


def _each(order: IntArray) -> Iterator[int]:
    """The nodes of `order` as ints, a slice at a time: the walk mostly stops within its first nodes."""
    for start in range(0, order.size, _SLICE):
        yield from order[start : start + _SLICE].tolist()


def _checked(shared: Iterable[VictimUnit], fresh: Iterator[VictimUnit]) -> Iterator[VictimUnit]:
    """The units of `shared`, each checked against the next of `fresh` (the same order worked out again)."""
    for unit in shared:
        again = next(fresh, None)
        if again is None or again.job is not unit.job or again.tasks != unit.tasks:
            raise CarriedMismatch(f"consolidation's shared victim order: {unit}, worked out again: {again}")
        yield unit
    again = next(fresh, None)
    if again is not None:
        raise CarriedMismatch(f"consolidation's shared victim order ended before {again}")


def _all_placed(preemptor: JobInfo, victims: Sequence[TaskInfo]) -> bool:
    """Valid only if every victim was placed again (moved, or back where it was): none stops."""
    return not any(stays_evicted(task) for task in victims)
