"""The victim solver that reclaim and preempt share.

For a pending job (the preemptor) it grows candidate victim sets job by job, in victim order, and
simulates each scenario on a Statement: evict the victims, then place the preemptor's pods (on releasing
capacity they are pipelined). A scenario that places the preemptor and passes the action's validator is
kept; anything else is rolled back. Elastic victims shrink one pod above their minMember at a time before
the gang itself is taken, and gangs are taken whole.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from kai_scheduler.actions.job_queue import QueueOrderedJobs, with_pending
from kai_scheduler.actions.placement import place_job
from kai_scheduler.framework.gang import request_of, scheduling_signature, tasks_to_allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES, Resources

# Scenarios simulated per preemptor at most: a bound on the work one pending job can cause per cycle.
MAX_SCENARIOS = 64

# Checks a scenario (victims already evicted, preemptor placed) before it is committed.
ScenarioValidator = Callable[[JobInfo, Sequence[TaskInfo]], bool]


@dataclass(frozen=True, slots=True)
class VictimJob:
    job: JobInfo
    running: list[TaskInfo]  # its running pods, newest first
    protected: bool = False  # only the pods above minMember may be taken (minimum runtime)


def victim_steps(victim: VictimJob) -> Iterator[list[TaskInfo]]:
    """The pods to take from one victim job, step by step: first the pods above minMember, one at a
    time (newest first), then the rest of the gang at once unless the job is protected."""
    above = len(victim.running) - victim.job.min_member
    for i in range(max(above, 0)):
        yield [victim.running[i]]
    rest = victim.running[max(above, 0) :]
    if rest and not victim.protected:
        yield rest


def running_tasks(job: JobInfo) -> list[TaskInfo]:
    return sorted((t for t in job.tasks if t.status is TaskStatus.RUNNING), key=lambda t: -t.rank)


def order_victims(
    session: Session, action: str, preemptor: JobInfo, tasks: Sequence[TaskInfo], jobs: Sequence[JobInfo]
) -> Iterator[VictimJob]:
    """Victim order, the reverse of the scheduling order: down the queue tree, at every level the child
    that ranks last (lowest queue priority, then furthest above its fair share), and in the leaf reached
    the lowest-priority, newest job. Jobs protected by their minimum runtime are kept only if they run
    pods above their minMember, and only jobs with a pod on a node the preemptor's `tasks` may use at all
    (a cheap filter: freeing other nodes cannot help).

    Lazy: the solver usually needs only the first few victims, so they are produced one at a time, and
    only the branch a victim was just taken from is re-ranked."""
    queues = session.snapshot.queues
    by_queue: dict[str, list[JobInfo]] = {}
    protected: set[str] = set()
    usable = session.usable_nodes(tasks)
    for job in jobs:
        if not any(usable[task.node] for task in running_tasks(job)):
            continue
        if session.is_protected(action, preemptor, job):
            if len(running_tasks(job)) <= job.min_member:
                continue
            protected.add(job.key)
        by_queue.setdefault(job.queue, []).append(job)
    left: dict[str, int] = {}  # candidate jobs left in each queue's subtree
    remaining: dict[str, Resources] = {}  # each queue's allocation once the victims so far are gone
    for name, queue_jobs in by_queue.items():
        queue_jobs.sort(key=lambda j: (j.priority, -j.rank), reverse=True)
        for queue in queues.ancestry(name):
            left[queue.name] = left.get(queue.name, 0) + len(queue_jobs)
            remaining.setdefault(queue.name, queue.allocated.copy())

    def giver(names: list[str]) -> str:
        candidates = [n for n in names if left.get(n, 0) > 0]
        return min(
            candidates,
            key=lambda n: (queues[n].priority, -_over_share(session, n, remaining[n]), queues[n].rank),
        )

    while any(left.get(root, 0) > 0 for root in queues.roots):
        name = giver(queues.roots)
        while not queues[name].is_leaf:
            name = giver(queues[name].children)
        job = by_queue[name].pop()
        tasks = running_tasks(job)
        yield VictimJob(job, tasks, job.key in protected)
        taken = request_of(session, tasks)
        for queue in queues.ancestry(name):
            remaining[queue.name].sub(taken)
            left[queue.name] -= 1


def _over_share(session: Session, queue_name: str, allocated: Resources) -> float:
    fair = session.snapshot.queues[queue_name].fair_share
    ratios = [
        allocated.get(r) / fair.get(r) if fair.get(r) > EPSILON else allocated.get(r) * 1000.0
        for r in RESOURCE_NAMES
        if allocated.get(r) > EPSILON
    ]
    return max(ratios, default=0.0)


class Relocation(Enum):
    """What happens to victims once the preemptor is placed."""

    NONE = "none"  # they stop
    TRY = "try"  # those that fit elsewhere move there; the rest stop (consolidating reclaim)
    ALL = "all"  # every one must move, or the scenario is invalid (consolidation)


@dataclass(frozen=True, slots=True)
class Scenario:
    """How one preemptor's scenarios are built and judged."""

    action: str
    preemptor: JobInfo
    tasks: list[TaskInfo]
    validate: ScenarioValidator
    reason: Callable[[TaskInfo], str]
    relocation: Relocation = Relocation.NONE
    max_victims: int = -1  # most pods evicted in one scenario; -1: no bound
    # The validator only gets stricter as victims are added (reclaim's fairness rules judge each victim
    # by what was taken before it), so the first invalid scenario ends the search.
    invalid_is_final: bool = False


class Outcome(Enum):
    COMMITTABLE = "committable"
    UNPLACEABLE = "unplaceable"  # the preemptor (or a victim that must move) does not fit yet
    INVALID = "invalid"  # placed, but the validator rejects it


def solve(session: Session, scenario: Scenario, victims: Iterable[VictimJob]) -> bool:
    """Find and commit the smallest prefix of victims (in order) that lets the preemptor's pods run.

    Cheap filter first: a scenario is only simulated once the GPUs that are free, releasing or taken from
    the victims add up to what the preemptor asks for; and at most MAX_SCENARIOS are simulated."""
    released = [task for task in scenario.tasks if session.state.release_reservation(task)]
    if _search(session, scenario, victims):
        return True
    for task in released:
        session.state.restore_reservation(task)
    return False


def _search(session: Session, scenario: Scenario, victims: Iterable[VictimJob]) -> bool:
    statement = session.statement(scenario.action)
    evicted: list[TaskInfo] = []
    needed = request_of(session, scenario.tasks).gpu
    nodes = session.snapshot.nodes
    available = float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())
    simulated = 0
    counts = session.counts[scenario.action]
    for victim in victims:
        for step in victim_steps(victim):
            if 0 <= scenario.max_victims < len(evicted) + len(step):
                statement.discard()
                return False
            for task in step:
                statement.evict(task, scenario.reason(task))
            evicted.extend(step)
            available += request_of(session, step).gpu
            if available + EPSILON < needed or not _enough_whole_gpu_slots(nodes, scenario.tasks):
                counts.scenarios_filtered += 1
                continue
            simulated += 1
            counts.scenarios_simulated += 1
            outcome = _try_scenario(session, statement, scenario, evicted)
            if outcome is Outcome.COMMITTABLE:
                statement.commit()
                return True
            if simulated >= MAX_SCENARIOS or (outcome is Outcome.INVALID and scenario.invalid_is_final):
                statement.discard()
                return False
    statement.discard()
    return False


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
    session: Session, statement: Statement, scenario: Scenario, evicted: list[TaskInfo]
) -> Outcome:
    checkpoint = statement.checkpoint()
    preemptor = scenario.preemptor

    def place_one(task: TaskInfo) -> str | None:
        placed = session.choose_node(task)
        if placed is None:
            return "unplaceable"
        node = session.snapshot.nodes.names[placed.node]
        message = f"{preemptor.key} (queue {preemptor.queue}) takes resources being released on {node}"
        statement.pipeline(task, placed.node, placed.gpu_groups, message)
        return None

    if place_job(session, statement, preemptor, scenario.tasks, place_one) is not None:
        statement.rollback(checkpoint)
        return Outcome.UNPLACEABLE
    stopped = _relocate(session, statement, scenario, _keep_unneeded(session, statement, evicted))
    if stopped is None:
        statement.rollback(checkpoint)
        return Outcome.UNPLACEABLE
    if not scenario.validate(preemptor, stopped):
        statement.rollback(checkpoint)
        return Outcome.INVALID
    return Outcome.COMMITTABLE


def _keep_unneeded(session: Session, statement: Statement, evicted: list[TaskInfo]) -> list[TaskInfo]:
    """Victims whose resources the preemptor did not need keep running where they are (KAI re-allocates
    the victims after placing the preemptor); the others are returned. A gang is kept only as a gang: a
    job is never left running below its minMember."""
    nodes = session.snapshot.nodes
    by_job: dict[int, list[TaskInfo]] = {}
    for victim in evicted:
        by_job.setdefault(id(victim.job), []).append(victim)
    needed: list[TaskInfo] = []
    for victims in by_job.values():
        job = victims[0].job
        checkpoint = statement.checkpoint()
        kept = [v for v in victims if _keep(nodes, statement, v)]
        if kept and job.active_allocated() < job.min_member:
            statement.rollback(checkpoint)
            kept = []
        needed.extend(v for v in victims if v not in kept)
    return needed


def _keep(nodes: NodeTable, statement: Statement, victim: TaskInfo) -> bool:
    if not nodes.can_keep(victim.node, victim.request, victim.key, victim.gpu_groups):
        return False
    statement.keep(victim)
    return True


def _relocate(
    session: Session, statement: Statement, scenario: Scenario, evicted: list[TaskInfo]
) -> list[TaskInfo] | None:
    """Move the victims that fit elsewhere; the ones left are stopped. None: a required move failed. A
    job's pods move together or not at all when moving only some would leave it below its minMember."""
    if scenario.relocation is Relocation.NONE:
        return list(evicted)
    by_job: dict[int, list[TaskInfo]] = {}
    for victim in evicted:
        by_job.setdefault(id(victim.job), []).append(victim)
    stopped: list[TaskInfo] = []
    for victims in by_job.values():
        job = victims[0].job
        checkpoint = statement.checkpoint()
        if job.has_topology():
            # Its constraints hold for its pods together: they move together (all in one domain) or stay.
            together = _move_together(session, statement, scenario, victims)
            left_behind = [] if together else list(victims)
        else:
            left_behind = [v for v in victims if not _move(session, statement, scenario, v)]
        moved = len(victims) - len(left_behind)
        if left_behind and 0 < job.active_allocated() + moved < job.min_member:
            statement.rollback(checkpoint)
            left_behind = victims
        if left_behind and scenario.relocation is Relocation.ALL:
            return None
        stopped.extend(left_behind)
    return stopped


def _move(session: Session, statement: Statement, scenario: Scenario, victim: TaskInfo) -> bool:
    """Move one victim to another node."""
    return _move_together(session, statement, scenario, [victim])


def _move_together(
    session: Session, statement: Statement, scenario: Scenario, victims: list[TaskInfo]
) -> bool:
    """Move victims of one job to other nodes (none back onto its own), all or none, where the job's
    topology constraints hold for them together with its pods that keep running."""
    origin = {}
    moved = []
    for victim in victims:
        copy = victim.recreated()
        origin[id(copy)] = victim.node
        moved.append(copy)

    def place_one(task: TaskInfo) -> str | None:
        placed = session.choose_node(task, avoid=origin[id(task)])
        if placed is None:
            return "unplaceable"
        node = session.snapshot.nodes.names[placed.node]
        reason = f"moved to {node} to make room for {scenario.preemptor.key}"
        statement.pipeline(task, placed.node, placed.gpu_groups, reason)
        return None

    return place_job(session, statement, victims[0].job, moved, place_one) is None


class VictimAction(ABC):
    """The loop reclaim and preempt share: pending jobs in queue order, one attempt each (again while
    an elastic job keeps growing), skipping jobs shaped like one that already failed in this action."""

    name = ""
    gave_up = ""  # why a job still waits after this action found no valid scenario for it

    def execute(self, session: Session) -> None:
        at_open = session.snapshot.jobs_at_open()
        # Jobs that could be victims at all; refreshed only when a scenario was committed. Without any
        # (a cluster running only non-preemptible jobs) there is nothing to do, not even ordering jobs.
        queues = session.snapshot.queues
        running = [j for j in at_open.preemptible_running if j.queue in queues and j.tally().running]
        if not running:
            return
        pending = [j for j in with_pending(session.snapshot) if j.invalid_reason is None]
        queue = QueueOrderedJobs(session, pending, session.config.queue_depth_per_action.get(self.name))
        failed: set[tuple[object, ...]] = set()
        counts = session.counts[self.name]
        while (job := queue.pop()) is not None:
            counts.acted_on += 1
            tasks = tasks_to_allocate(session, job)
            if not tasks:
                continue
            signature = self.signature(job, tasks) if session.config.use_scheduling_signatures else None
            if signature in failed or self.blocked(session, job, request_of(session, tasks)):
                continue
            if self.attempt(session, job, tasks, running):
                session.unschedulable.pop(job.key, None)
                queue.refresh()
                running = [j for j in running if j.tally().running]
                if job.has_pending():
                    queue.push(job)
                continue
            session.add_reason(job.key, f"{self.name}: {self.gave_up}")
            if signature is not None:
                failed.add(signature)

    def signature(self, job: JobInfo, tasks: list[TaskInfo]) -> tuple[object, ...]:
        """Jobs with equal signatures fare alike in this action within a cycle (see
        `scheduling_signature`)."""
        return scheduling_signature(job, tasks)

    @abstractmethod
    def blocked(self, session: Session, job: JobInfo, request: Resources) -> bool:
        """Whether the job may not even try (limits, fair share, quota)."""

    @abstractmethod
    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo], running: list[JobInfo]) -> bool:
        """Search victims (among the preemptible `running` jobs) for the job's next pods and commit the first
        valid scenario."""
