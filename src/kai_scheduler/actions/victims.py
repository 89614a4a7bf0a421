"""The victim solver that consolidation, reclaim and preempt share (KAI's job solver).

For a pending job (the preemptor) it takes victims unit by unit in victim order (`order_victims`) and
simulates each growing scenario on a Statement:

1. the victims so far are evicted, virtually;
2. the allocation routine places the preemptor and every victim job again, in queue order, all pipelined
   (`placement.place_pipelined`, KAI's AllocateJob in a simulation): it sees idle and releasing capacity
   on every node and checks each queue's limits against the allocations as the scenario left them. A
   victim placed back where it was keeps running, one placed elsewhere moves there (evicted and
   pipelined), one that cannot be placed stays evicted; the preemptor must be placed;
3. the action's validator judges the outcome (consolidation: no victim stays evicted; reclaim: the queues'
   fairness; preempt: nothing more).

The first valid scenario is committed. KAI tries the victims node by node, so a victim on a node the
preemptor does not use is never even evicted; here, once the preemptor fits with every victim so far
gone, the scenario is simulated with only the victims on the nodes it took (whole victim jobs).
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import numpy as np

from kai_scheduler.actions.job_queue import QueueOrderedJobs, with_pending
from kai_scheduler.actions.placement import place_pipelined
from kai_scheduler.actions.replays import Prefix, Replays, Step, alone_in_branch, last_for
from kai_scheduler.framework.gang import request_of, scheduling_signature, tasks_to_allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import ACTIVE_ALLOCATED, JobInfo, PodSet, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import BoolArray, NodeTable
from kai_scheduler.model.resources import EPSILON, Resources

# Scenarios simulated per preemptor at most: a bound on the work one pending job can cause per cycle.
MAX_SCENARIOS = 64
# Committable scenarios compared after the first when a plugin judges outcomes (see `_Choice`).
ALTERNATIVES = 8

# Checks a simulated scenario: the preemptor, and the victims in the order they were taken (each still
# RELEASING if it stays evicted, else placed again).
ScenarioValidator = Callable[[JobInfo, Sequence[TaskInfo]], bool]


@dataclass(frozen=True, slots=True)
class VictimUnit:
    """What one step of the search takes from a victim job: one pod above its minMember, or the rest of
    its pods (the gang) at once."""

    job: JobInfo
    tasks: list[TaskInfo]


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
    known: dict[JobInfo, tuple[int, list[TaskInfo]]] = session.scratch.setdefault("victims.active", {})
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
Heaps = dict[str, list[tuple[_Last, int, JobInfo]]]


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
        heapq.heapify(heap)
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
    the newest). From that job one unit (`_next_unit`); a job with pods left goes back into its queue and
    is ranked again with what it has left.

    A job is passed over when `admit` refuses it, when it is the preemptor itself, when none of its pods
    runs on a node the preemptor's `tasks` may use at all (freeing other nodes cannot help), or when its
    minimum runtime protects it and it runs no pod above its minMember (a protected job gives only
    those).

    Lazy: the solver usually needs only the first few units. A job is ranked again with the pods it has
    left (`Session.victim_order_key`), as KAI ranks the job's remaining pods."""
    usable = session.usable_nodes(tasks)
    source = jobs if isinstance(jobs, dict) else victim_heaps(session, jobs, usable)
    order = _VictimOrder(session, action, preemptor, usable, source, admit)
    while (leaf := order.next_leaf()) is not None:
        job = order.pop(leaf)
        unit = _next_unit(session, order.left_of[job], job in order.protected)
        if unit:
            yield VictimUnit(job, unit)
            order.took(leaf, job, unit)


class _VictimOrder:
    """The state of one `order_victims`: the heaps it hands jobs out from (copies), what each job looked
    at has left, and each queue's rank, kept until a victim is taken below it (a unit changes only the
    queues on its leaf's path). A class rather than closures: mutually recursive closures would make a
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
        self.heaps = {name: list(heap) for name, heap in source.items()}  # copies are heaps too
        self.left_of: dict[JobInfo, list[TaskInfo]] = {}  # the job's victim pods left, once looked at
        self.passed: set[JobInfo] = set()  # looked at, and passed over
        self.protected: set[JobInfo] = set()
        self.counter = sum(len(heap) for heap in self.heaps.values())
        self.allocated = {queue.name: queue.allocated.copy() for queue in self.queues}
        self.taken: dict[str, Resources] = {queue.name: Resources() for queue in self.queues}
        self.ranks: dict[str, tuple[tuple[Any, ...], str] | None] = {}
        self.held_of: dict[JobInfo, Resources] = {}  # what each job looked at holds of what it has left

    def next_leaf(self) -> str | None:
        """The leaf queue whose job goes next (None: no job left that may give anything)."""
        best = self._last_child(self.queues.roots)
        return None if best is None else best[1]

    def pop(self, leaf: str) -> JobInfo:
        job = heapq.heappop(self.heaps[leaf])[2]
        for queue in self.queues.ancestry(leaf):
            self.ranks.pop(queue.name, None)
        return job

    def took(self, leaf: str, job: JobInfo, unit: list[TaskInfo]) -> None:
        """Account a unit handed out; a job with pods left goes back, ranked with what it has left."""
        amount = self._held(unit)
        for queue in self.queues.ancestry(leaf):
            self.taken[queue.name].add(amount)
        gone = {id(task) for task in unit}
        rest = [task for task in self.left_of[job] if id(task) not in gone]
        self.left_of[job] = rest
        self.held_of.pop(job, None)
        if rest and (job not in self.protected or _above_min(rest)):
            self.counter += 1
            key = _Last(self.session.victim_order_key(job, len(rest)))
            heapq.heappush(self.heaps[leaf], (key, self.counter, job))

    def _held(self, tasks: list[TaskInfo]) -> Resources:
        nodes = self.session.snapshot.nodes
        total = Resources()
        for task in tasks:
            total.add(task.request.queue_resources(float(nodes.gpu_memory_mib[task.node])))
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
            ok = _above_min(active)
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
            while heap and not self._eligible(heap[0][2]):
                heapq.heappop(heap)
            if not heap:
                return None
            leaf = name
        else:
            best = self._last_child(queue.children)
            if best is None:
                return None
            leaf = best[1]
        victim_key = self.session.points.victim_queue_order
        if victim_key is None:
            return (queue.rank,), leaf
        remaining = self.allocated[name].copy()
        remaining.sub(self.taken[name])
        next_job = self.heaps[leaf][0][2]
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


def _above_min(tasks: list[TaskInfo]) -> bool:
    """Whether some pod set of these pods' job has more of them than its minMember."""
    counts: dict[int, int] = {}
    podsets: dict[int, PodSet] = {}
    for task in tasks:
        counts[id(task.podset)] = counts.get(id(task.podset), 0) + 1
        podsets[id(task.podset)] = task.podset
    return any(count > podsets[key].min_member for key, count in counts.items())


def _next_unit(session: Session, tasks: list[TaskInfo], protected: bool) -> list[TaskInfo]:
    """What to take next from a job whose victim pods left are `tasks` (KAI's GetTasksToEvict): if a pod
    set runs above its minMember, one pod of it (the pod set furthest above, its pod last in task order:
    the newest); else every pod left at once (the gang), unless the job is protected (then nothing)."""
    by_podset: dict[int, tuple[PodSet, list[TaskInfo]]] = {}
    for task in tasks:
        by_podset.setdefault(id(task.podset), (task.podset, []))[1].append(task)
    above = [(podset, members) for podset, members in by_podset.values() if len(members) > podset.min_member]
    if above:
        _, members = max(above, key=lambda entry: len(entry[1]) / max(entry[0].min_member, 1))
        return [max(members, key=session.task_order_key)]
    if protected:
        return []
    return sorted(tasks, key=session.task_order_key, reverse=True)


@dataclass(frozen=True, slots=True)
class Scenario:
    """How one preemptor's scenarios are built and judged."""

    action: str
    preemptor: JobInfo
    tasks: list[TaskInfo]
    validate: ScenarioValidator
    reason: Callable[[TaskInfo], str]  # why a victim is evicted
    max_victims: int = -1  # most pods a committed scenario evicts; -1: no bound
    # The validator only gets stricter as victims are added (reclaim's fairness rules judge each victim
    # by what was taken before it), so the first invalid scenario ends the search.
    invalid_is_final: bool = False
    # Search a one-pod preemptor's victims node by node (`_search_by_node`), as KAI; otherwise (and for
    # gangs) accumulated (`_search`): what consolidation does, whose candidates are few (bounded by
    # maxConsolidationPreemptees) and whose victims' gangs span nodes, each of which would be a scenario.
    by_node: bool = True
    # What re-placing victim sets did before earlier preemptors' turns (`replays`), kept by the action
    # until the cluster changes; None: nothing is remembered.
    replays: Replays | None = None


class Outcome(Enum):
    COMMITTABLE = "committable"
    UNPLACEABLE = "unplaceable"  # the preemptor does not fit yet
    INVALID = "invalid"  # placed, but the validator rejects it


def solve(session: Session, scenario: Scenario, victims: Iterable[VictimUnit]) -> bool:
    """Find and commit the smallest prefix of victims (in order) that lets the preemptor's pods run.

    Cheap filter first: a scenario is only simulated once the GPUs that are free, releasing or taken from
    the victims add up to what the preemptor asks for; and at most MAX_SCENARIOS are simulated."""
    for hook in session.points.on_solution_start:
        hook()
    released = [task for task in scenario.tasks if session.state.release_reservation(task)]
    if released and scenario.replays is not None:
        # The cluster is not the one the replays were recorded on, nor will it be for the next preemptor.
        scenario = replace(scenario, replays=None)
    search = _search_by_node if scenario.by_node and len(scenario.tasks) == 1 else _search
    if search(session, scenario, victims):
        return True
    for task in released:
        session.state.restore_reservation(task)
    return False


def _search_by_node(session: Session, scenario: Scenario, victims: Iterable[VictimUnit]) -> bool:
    """KAI's search for one pod (the job solver's scenarios, tried node by node): victims accumulate in
    victim order, and after each one, for every node of its job, the scenario evicts the victims so far
    that have a pod on that node (their whole jobs' units) and nothing else. Victims elsewhere are never
    touched, so a scenario costs what its node holds, however many victims came before."""
    statement = session.statement(scenario.action)
    (task,) = scenario.tasks
    needed = 0.0 if task.request.mig_instances else request_of(session, scenario.tasks).gpu
    nodes = session.snapshot.nodes
    available = float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
    taken: dict[JobInfo, list[TaskInfo]] = {}  # the units so far, by job
    on_node: dict[int, dict[JobInfo, None]] = {}  # the jobs with a unit's pod on each node
    # The victim sets simulated already: the same set evicts the same pods from the same cluster, so it
    # fails the same way again.
    tried: set[frozenset[str]] = set()
    simulated = 0
    counts = session.counts[scenario.action]
    replays = scenario.replays
    # Whether the pod fits anywhere as the cluster is (without evicting anything): if not, a scenario
    # whose victims all go back where they were before its turn cannot place it either.
    fits_now = replays is not None and bool(session.candidate_nodes(task).any())
    choice = _Choice(session, statement)
    for victim in victims:
        if not choice.still_looking(victim):
            break
        taken.setdefault(victim.job, []).extend(victim.tasks)
        for victim_task in victim.tasks:
            on_node.setdefault(victim_task.node, {})[victim.job] = None
        available += request_of(session, victim.tasks).gpu
        if available + EPSILON < needed:
            counts.scenarios_filtered += 1
            continue
        for node in sorted({t.node for t in active_tasks(session, victim.job)}):
            jobs_here = on_node.get(node)
            if not jobs_here:
                continue
            evicted = [t for job in jobs_here for t in taken[job]]
            if 0 <= scenario.max_victims < len(evicted):
                continue  # more pods than a scenario may evict
            same = frozenset(t.key for t in evicted)
            if same in tried:
                continue
            tried.add(same)
            # The room the scenario makes is on its victims' nodes (the pod fit nowhere else before);
            # plain resources first, without evicting anything, then everything.
            if not _room_on_a_node(nodes, task, evicted):
                counts.scenarios_filtered += 1
                continue
            for victim_task in evicted:
                statement.evict(victim_task, scenario.reason(victim_task))
            freed = sorted({t.node for t in evicted})
            if not session.candidate_nodes(task)[freed].any():
                counts.scenarios_filtered += 1
                statement.discard()
                continue
            simulated += 1
            counts.scenarios_simulated += 1
            known = replays.get(tuple(t.key for t in evicted)) if replays is not None else None
            if known is not None and known.all_home and not fits_now and last_for(session, task.job, known):
                # Every victim goes back where it was before its turn (see `replays`): the cluster is then
                # as it is now, where it fits nowhere.
                outcome = Outcome.UNPLACEABLE
            else:
                outcome = _simulate(session, statement, scenario, evicted)
            if outcome is Outcome.COMMITTABLE:
                if choice.judge is None:
                    statement.commit()
                    return True
                choice.offer(victim, evicted)  # (and undone)
            else:
                statement.discard()
            if simulated >= MAX_SCENARIOS or (outcome is Outcome.INVALID and scenario.invalid_is_final):
                return choice.commit(scenario)
    return choice.commit(scenario)


class _Choice:
    """Which committable scenario of a one-pod search to take. KAI takes the first. A plugin that judges
    outcomes (`outcome_stranded`, gpufragmentation's) makes the search go on among victims KAI's order
    ranks alike (the same rank but for age: priority, elastic state), for at most ALTERNATIVES more
    committable scenarios, and takes the one that leaves the fewest GPUs stranded on the nodes it
    touches (the change against the cluster as it was; ties: the first found)."""

    def __init__(self, session: Session, statement: Statement) -> None:
        self.session = session
        self.statement = statement
        self.judge = session.points.outcome_stranded
        self.best: tuple[float, list[TaskInfo]] | None = None
        self.rank: tuple[Any, ...] | None = None  # the rank of the first committable scenario's victim
        self.found = 0

    def _rank(self, victim: VictimUnit) -> tuple[Any, ...]:
        job = victim.job
        return self.session.victim_order_key(job, len(active_tasks(self.session, job)))[:-2]

    def still_looking(self, victim: VictimUnit) -> bool:
        return self.rank is None or (self.found <= ALTERNATIVES and self._rank(victim) == self.rank)

    def offer(self, victim: VictimUnit, evicted: list[TaskInfo]) -> None:
        """Judge the committable scenario now on the statement, then undo it."""
        assert self.judge is not None
        touched = sorted({t.node for t in evicted} | {n for _, n, _ in self.statement.placements_since(0)})
        after = self.judge(touched)
        self.statement.discard()
        cost = after - self.judge(touched)
        if self.rank is None:
            self.rank = self._rank(victim)
        self.found += 1
        if self.best is None or cost < self.best[0] - EPSILON:
            self.best = (cost, list(evicted))

    def commit(self, scenario: Scenario) -> bool:
        """Simulate the chosen scenario again (the same cluster, the same outcome) and commit it."""
        if self.best is None:
            return False
        evicted = self.best[1]
        for task in evicted:
            self.statement.evict(task, scenario.reason(task))
        outcome = _simulate(self.session, self.statement, scenario, evicted)
        assert outcome is Outcome.COMMITTABLE, "a scenario simulated again must end as before"
        self.statement.commit()
        return True


def _search(session: Session, scenario: Scenario, victims: Iterable[VictimUnit]) -> bool:
    """The search for several pods (a gang): victims accumulate, evicted, in victim order; once the
    preemptor could fit, the scenario is simulated (`_try_scenario`)."""
    statement = session.statement(scenario.action)
    evicted: list[TaskInfo] = []
    # (MIG instances are not among the free GPUs counted here: a preemptor asking for some is not
    # filtered by this count.)
    uses_mig = any(task.request.mig_instances for task in scenario.tasks)
    needed = 0.0 if uses_mig else request_of(session, scenario.tasks).gpu
    nodes = session.snapshot.nodes
    available = float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
    simulated = 0
    counts = session.counts[scenario.action]
    tried: set[frozenset[str]] = set()  # the victim sets simulated already (see `_search_by_node`)
    for victim in victims:
        step = victim.tasks
        for task in step:
            statement.evict(task, scenario.reason(task))
        evicted.extend(step)
        available += request_of(session, step).gpu
        if available + EPSILON < needed or not _enough_whole_gpu_slots(nodes, scenario.tasks):
            counts.scenarios_filtered += 1
            continue
        simulated += 1
        counts.scenarios_simulated += 1
        outcome = _try_scenario(session, statement, scenario, evicted, tried)
        if outcome is Outcome.COMMITTABLE:
            statement.commit()
            return True
        if simulated >= MAX_SCENARIOS or (outcome is Outcome.INVALID and scenario.invalid_is_final):
            break
    statement.discard()
    return False


def _room_on_a_node(nodes: NodeTable, task: TaskInfo, victims: list[TaskInfo]) -> bool:
    """Whether some node of `victims` would have the CPU, memory, pod slots and whole GPUs `task` asks
    for, free or releasing, once they are gone: a cheap necessary condition (no eviction, no mask), lenient
    to rounding, that rules out most victim sets on a node short of CPU or memory."""
    request = task.request
    room: dict[int, list[float]] = {}
    for victim in victims:
        freed = room.get(victim.node)
        if freed is None:
            freed = room[victim.node] = [0.0, 0.0, 0.0, 0.0]
        asked = victim.request
        shared = asked.gpu_devices if asked.is_shared_gpu else 0
        freed[0] += asked.cpu
        freed[1] += asked.memory
        # (A shared GPU comes back whole once its last holder goes, with its reservation pod's slot: count
        # each as a whole GPU and a slot.)
        freed[2] += 1 + shared
        freed[3] += asked.whole_gpus + shared
    for node, (cpu, memory, pods, gpus) in room.items():
        if (
            _at_least(
                nodes.cap_cpu.item(node) - nodes.used_cpu.item(node) + nodes.rel_cpu.item(node) + cpu,
                request.cpu,
            )
            and _at_least(
                nodes.cap_memory.item(node)
                - nodes.used_memory.item(node)
                + nodes.rel_memory.item(node)
                + memory,
                request.memory,
            )
            and _at_least(
                nodes.cap_pods.item(node) - nodes.used_pods.item(node) + nodes.rel_pods.item(node) + pods, 1
            )
            and _at_least(nodes.free_gpus.item(node) + nodes.rel_gpus.item(node) + gpus, request.whole_gpus)
        ):
            return True
    return False


def _at_least(room: float, asked: float) -> bool:
    # Looser than the node table's own test by far more than rounding: a necessary condition only.
    return room >= asked - EPSILON - 1e-9 * abs(asked)


def _enough_whole_gpu_slots(nodes: NodeTable, tasks: list[TaskInfo]) -> bool:
    """Cheap per-node filter: pods asking for whole GPUs need nodes with that many free or releasing GPUs
    each; counting slots for the smallest such pod never rejects a scenario that could work."""
    whole = [task.request.whole_gpus for task in tasks if task.request.whole_gpus > 0]
    if not whole:
        return True
    smallest = min(whole)
    slots = np.floor((nodes.free_gpus + nodes.rel_gpus + EPSILON) / smallest).sum()
    return bool(slots >= len(whole))


def _try_scenario(
    session: Session,
    statement: Statement,
    scenario: Scenario,
    evicted: list[TaskInfo],
    tried: set[frozenset[str]],
) -> Outcome:
    """Simulate the scenario of `evicted` (all virtually evicted on `statement`) as KAI's node-by-node
    search would: with only the victim jobs that have a pod on the nodes the preemptor takes when every
    victim so far is gone (the others keep running, untouched). Unless committable, everything it did is
    rolled back (the evictions stay)."""
    checkpoint = statement.checkpoint()
    preemptor = scenario.preemptor
    if place_pipelined(session, statement, preemptor, scenario.tasks, _takes(preemptor)) is not None:
        statement.rollback(checkpoint)
        return Outcome.UNPLACEABLE
    taken_nodes = {task.node for task in scenario.tasks}
    statement.rollback(checkpoint)
    on_those = {id(task.job) for task in evicted if task.node in taken_nodes}
    needed = [task for task in evicted if id(task.job) in on_those]
    if 0 <= scenario.max_victims < len(needed):
        return Outcome.UNPLACEABLE  # not within the bound on the pods evicted
    same = frozenset(task.key for task in needed)
    if same in tried:
        return Outcome.UNPLACEABLE  # simulated already: it would fail the same way
    tried.add(same)
    for task in evicted:
        if id(task.job) not in on_those:
            statement.keep(task)
    outcome = _simulate(session, statement, scenario, needed)
    if outcome is not Outcome.COMMITTABLE:
        statement.rollback(checkpoint)
    return outcome


def _simulate(session: Session, statement: Statement, scenario: Scenario, victims: list[TaskInfo]) -> Outcome:
    """Place the preemptor and every victim job again in queue order (KAI's
    TryToVirtuallyAllocatePreemptorAndGetVictims), then validate. The caller rolls back on failure.

    When the same victims were placed again before another preemptor's turn and this one would come
    after all of them too, their placements are replayed (see `replays`); when they all come before the
    preemptor, that prefix is kept for the next one."""
    preemptor = scenario.preemptor
    jobs = [preemptor]
    seen = {id(preemptor)}
    for task in victims:
        if id(task.job) not in seen:
            seen.add(id(task.job))
            jobs.append(task.job)
    moved = _moved(preemptor)
    replays = scenario.replays
    key = tuple(task.key for task in victims)
    known = replays.get(key) if replays is not None else None
    if known is not None and last_for(session, preemptor, known):
        names = session.snapshot.nodes.names
        for step in known.steps:
            for task, node, groups in step.placed:
                statement.pipeline(task, node, groups, moved(task, names[node]))
        if place_pipelined(session, statement, preemptor, scenario.tasks, _takes(preemptor)) is not None:
            return Outcome.UNPLACEABLE
        return Outcome.COMMITTABLE if scenario.validate(preemptor, victims) else Outcome.INVALID
    order = QueueOrderedJobs(session, jobs)
    recording = replays is not None and alone_in_branch(session, preemptor, jobs[1:])
    home = {id(task): (task.node, task.gpu_groups) for task in victims} if recording else {}
    steps: list[Step] = []
    new_groups = len(session.snapshot.existing_gpu_groups)
    # Once the preemptor is placed, the most whole GPUs any node has free or releasing: placing pods
    # only lowers it, and a victim job none of whose pods fits it cannot be placed again (most often
    # none of them can: the preemptor took what they released).
    room = -1.0
    popped: set[int] = set()
    while (job := order.pop()) is not None:
        popped.add(id(job))
        if job is preemptor:
            if recording and len(steps) == len(jobs) - 1:
                _remember(session, replays, key, victims, home, steps, new_groups)
            if place_pipelined(session, statement, job, scenario.tasks, _takes(job)) is not None:
                return Outcome.UNPLACEABLE
            nodes = session.snapshot.nodes
            room = float((nodes.free_gpus + nodes.rel_gpus).max(initial=0.0))
            left = [victim for victim in jobs if id(victim) not in popped]
            if all(_smallest_whole_gpus(session, victim) > room + EPSILON for victim in left):
                break
        elif not (0 <= room + EPSILON < _smallest_whole_gpus(session, job)):
            # Its victims that cannot be placed again stay evicted.
            mark = statement.checkpoint()
            place_pipelined(session, statement, job, tasks_to_allocate(session, job), moved)
            if recording:
                steps.append(Step(job, order.popped_rank, tuple(statement.placements_since(mark))))
    if not scenario.validate(preemptor, victims):
        return Outcome.INVALID
    return Outcome.COMMITTABLE


def _remember(
    session: Session,
    replays: Replays | None,
    key: tuple[str, ...],
    victims: list[TaskInfo],
    home: dict[int, tuple[int, tuple[str, ...]]],
    steps: list[Step],
    groups_before: int,
) -> None:
    """Keep what placing every victim job again did before the preemptor's turn (`home`: each victim's
    node and GPUs before), unless it handed out a new shared-GPU id (a replay would hand out that one
    again)."""
    if replays is None or len(session.snapshot.existing_gpu_groups) != groups_before:
        return
    back = {
        id(task)
        for step in steps
        for task, node, groups in step.placed
        if home.get(id(task)) == (node, groups)
    }
    replays.record(key, Prefix(tuple(steps), tuple(task for task in victims if id(task) not in back)))


def _smallest_whole_gpus(session: Session, job: JobInfo) -> float:
    """The fewest whole GPUs any pod of the job still to place asks for (0 if one asks for none: a
    CPU-only, shared-GPU or MIG pod)."""
    return float(min((task.request.whole_gpus for task in tasks_to_allocate(session, job)), default=0))


def _takes(preemptor: JobInfo) -> Callable[[TaskInfo, str], str]:
    def reason(task: TaskInfo, node: str) -> str:
        return f"{preemptor.key} (queue {preemptor.queue}) takes resources being released on {node}"

    return reason


def _moved(preemptor: JobInfo) -> Callable[[TaskInfo, str], str]:
    def reason(task: TaskInfo, node: str) -> str:
        return f"moved to {node} to make room for {preemptor.key}"

    return reason


def stays_evicted(task: TaskInfo) -> bool:
    """Whether a victim of a simulated scenario could not be placed again (it will be stopped)."""
    return task.status is TaskStatus.RELEASING


class VictimAction(ABC):
    """The loop reclaim, preempt and consolidation share: pending jobs in queue order, one attempt each
    (again while an elastic job keeps growing), skipping jobs shaped like one that already failed in
    this action.

    The jobs that could be victims are kept by queue (`by_queue`) and brought up to date after every
    commit; each queue's victim heap, made when first needed, serves every attempt until then (`heaps`):
    most attempts fail, and each ordered every candidate job again."""

    name = ""
    gave_up = ""  # why a job still waits after this action found no valid scenario for it

    def __init__(self) -> None:
        self.by_queue: dict[str, dict[JobInfo, None]] = {}
        self.replays = Replays()  # valid until the next commit
        self.shared_orders: dict[tuple[object, ...], SharedVictims] = {}  # likewise
        self._leaves: dict[str, LeafVictims] = {}
        self._heaps: dict[tuple[str, bytes], list[tuple[_Last, int, JobInfo]]] = {}

    def execute(self, session: Session) -> None:
        self.by_queue.clear()
        self._leaves.clear()
        self._heaps.clear()
        self.replays.clear()
        self.shared_orders.clear()
        # Running at session open, or placed since by an earlier action (among the jobs that were waiting).
        at_open = session.snapshot.jobs_at_open()
        candidates = [
            j
            for j in dict.fromkeys((*at_open.preemptible_running, *at_open.waiting))
            if self.could_be_victim(session, j)
        ]
        # Without any (a cluster running only non-preemptible jobs) there is nothing to do, not even
        # ordering jobs.
        if not candidates:
            return
        for candidate in candidates:
            self.by_queue.setdefault(candidate.queue, {})[candidate] = None
        self.started(session, candidates)
        pending = [j for j in with_pending(session.snapshot) if j.invalid_reason is None]
        queue = QueueOrderedJobs(session, pending, session.config.queue_depth_per_action.get(self.name))
        failed: set[tuple[object, ...]] = set()
        counts = session.counts[self.name]
        while (job := queue.pop()) is not None:
            counts.acted_on += 1
            tasks = tasks_to_allocate(session, job)
            if not tasks:
                continue
            signature = None
            if session.config.use_scheduling_signatures:
                signature = self.signature(session, job, tasks)
            if signature in failed or self.blocked(session, job, request_of(session, tasks)):
                continue
            decided = len(session.decisions)
            if self.attempt(session, job, tasks):
                session.unschedulable.pop(job.key, None)
                queue.refresh()
                self._committed(session, decided)
                if job.has_pending():
                    queue.push(job)
                continue
            session.add_reason(job.key, f"{self.name}: {self.gave_up}")
            if signature is not None:
                failed.add(signature)

    def _committed(self, session: Session, decided: int) -> None:
        """Bring the candidates up to date after a commit (its decisions are those from `decided` on):
        pods it placed (and victims it moved) may be victims of the next attempt; victims that stopped may
        leave their job with none."""
        self.replays.clear()
        self.shared_orders.clear()
        tasks_of = session.snapshot.tasks
        touched = list(dict.fromkeys(tasks_of[d.pod].job for d in session.decisions[decided:]))
        # Only the queues of the jobs it changed need their victims ordered again.
        changed = {job.queue for job in touched}
        for leaf in changed:
            self._leaves.pop(leaf, None)
        for key in [key for key in self._heaps if key[0] in changed]:
            del self._heaps[key]
        for job in touched:
            if self.could_be_victim(session, job):
                self.by_queue.setdefault(job.queue, {})[job] = None
            elif job in self.by_queue.get(job.queue, {}):
                del self.by_queue[job.queue][job]
        self.committed(session, touched)

    def heaps(self, session: Session, leaves: Iterable[str], tasks: Sequence[TaskInfo]) -> Heaps:
        """The victim heaps of these leaf queues' candidates with a pod on a node `tasks` may use, each
        queue's made once until the next commit (`LeafVictims`), and cut to those nodes once per set of
        nodes."""
        usable = session.usable_nodes(tasks)
        mask = usable.tobytes()
        found: Heaps = {}
        for leaf in leaves:
            heap = self._heaps.get((leaf, mask))
            if heap is None:
                victims = self._leaves.get(leaf)
                if victims is None:
                    victims = self._leaves[leaf] = LeafVictims(session, self.by_queue.get(leaf, {}))
                heap = self._heaps[(leaf, mask)] = victims.heap(usable)
            found[leaf] = heap
        return found

    @staticmethod
    def could_be_victim(session: Session, job: JobInfo) -> bool:
        """Preemptible, in a known queue, with an active pod."""
        return job.preemptible and job.queue in session.snapshot.queues and job.active_allocated() > 0

    def started(self, session: Session, candidates: list[JobInfo]) -> None:
        """Called once the candidate victims of the action are known (before its first attempt)."""
        return None

    def committed(self, session: Session, touched: list[JobInfo]) -> None:
        """Called after a scenario was committed (and `by_queue` brought up to date), with the jobs it
        changed."""
        return None

    def signature(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> tuple[object, ...]:
        """Jobs with equal signatures fare alike in this action within a cycle (see
        `scheduling_signature`)."""
        return scheduling_signature(job, tasks)

    @abstractmethod
    def blocked(self, session: Session, job: JobInfo, request: Resources) -> bool:
        """Whether the job may not even try (what the action checks before looking for victims)."""

    @abstractmethod
    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        """Search victims (among the candidates, `by_queue`) for the job's next pods and commit the first
        valid scenario."""
