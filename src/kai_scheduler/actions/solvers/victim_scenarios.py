"""One scenario of the victim solver: what it is (`Scenario`) and how it is simulated (`simulate`).

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from kai_scheduler.actions.job_queue import QueueOrderedJobs
from kai_scheduler.actions.placement import place_pipelined
from kai_scheduler.actions.solvers.replays import Prefix, Replays, Step, alone_in_branch, last_for
from kai_scheduler.framework.gang import tasks_to_allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.resources import EPSILON

# Checks a simulated scenario: the preemptor, and the victims in the order they were taken (each still
# RELEASING if it stays evicted, else placed again).
ScenarioValidator = Callable[[JobInfo, Sequence[TaskInfo]], bool]


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


def simulate(session: Session, statement: Statement, scenario: Scenario, victims: list[TaskInfo]) -> Outcome:
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
    moved_reason = moved(preemptor)
    replays = scenario.replays
    key = tuple(task.key for task in victims)
    known = replays.get(key) if replays is not None else None
    if known is not None and last_for(session, preemptor, known):
        names = session.snapshot.nodes.names
        for step in known.steps:
            for task, node, groups in step.placed:
                statement.pipeline(task, node, groups, moved_reason(task, names[node]))
        if place_pipelined(session, statement, preemptor, scenario.tasks, takes(preemptor)) is not None:
            return Outcome.UNPLACEABLE
        return Outcome.COMMITTABLE if scenario.validate(preemptor, victims) else Outcome.INVALID
    order = QueueOrderedJobs(session, jobs)
    recording = replays is not None and alone_in_branch(session, preemptor, jobs[1:])
    home = {id(task): (task.node, task.gpu_groups) for task in victims} if recording else {}
    steps: list[Step] = []
    # Once the preemptor is placed, the most whole GPUs any node has free or releasing: placing pods
    # only lowers it, and a victim job none of whose pods fits it cannot be placed again (most often
    # none of them can: the preemptor took what they released).
    room = -1.0
    popped: set[int] = set()
    while (job := order.pop()) is not None:
        popped.add(id(job))
        if job is preemptor:
            if recording and len(steps) == len(jobs) - 1:
                _remember(session, replays, key, victims, home, steps)
            if place_pipelined(session, statement, job, scenario.tasks, takes(job)) is not None:
                return Outcome.UNPLACEABLE
            nodes = session.snapshot.nodes
            room = float((nodes.free_gpus + nodes.rel_gpus).max(initial=0.0))
            left = [victim for victim in jobs if id(victim) not in popped]
            if all(_smallest_whole_gpus(session, victim) > room + EPSILON for victim in left):
                break
        elif not (0 <= room + EPSILON < _smallest_whole_gpus(session, job)):
            # Its victims that cannot be placed again stay evicted.
            mark = statement.checkpoint()
            place_pipelined(session, statement, job, tasks_to_allocate(session, job), moved_reason)
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
) -> None:
    """Keep what placing every victim job again did before the preemptor's turn (`home`: each victim's
    node and GPUs before), and what the nodes the victims left have free then. A shared-GPU id it handed
    out is kept too: ids are a function of the cluster as it is (`Session.new_gpu_group_id`), so a fresh
    search would hand out the same one."""
    if replays is None:
        return
    back = {
        id(task)
        for step in steps
        for task, node, groups in step.placed
        if home.get(id(task)) == (node, groups)
    }
    left = tuple(task for task in victims if id(task) not in back)
    nodes = session.snapshot.nodes
    rooms = tuple(nodes.soon_room(node) for node in sorted({home[id(task)][0] for task in left}))
    replays.record(key, Prefix(tuple(steps), left, rooms))


def _smallest_whole_gpus(session: Session, job: JobInfo) -> float:
    """The fewest whole GPUs any pod of the job still to place asks for (0 if one asks for none: a
    CPU-only, shared-GPU or MIG pod)."""
    return float(min((task.request.whole_gpus for task in tasks_to_allocate(session, job)), default=0))


def takes(preemptor: JobInfo) -> Callable[[TaskInfo, str], str]:
    def reason(task: TaskInfo, node: str) -> str:
        return f"{preemptor.key} (queue {preemptor.queue}) takes resources being released on {node}"

    return reason


def moved(preemptor: JobInfo) -> Callable[[TaskInfo, str], str]:
    def reason(task: TaskInfo, node: str) -> str:
        return f"moved to {node} to make room for {preemptor.key}"

    return reason


def stays_evicted(task: TaskInfo) -> bool:
    """Whether a victim of a simulated scenario could not be placed again (it will be stopped)."""
    return task.status is TaskStatus.RELEASING
