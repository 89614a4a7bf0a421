"""The victim solver that consolidation, reclaim and preempt share (KAI's job solver): which scenarios
are simulated, in which order, and which is committed.

For a pending job (the preemptor) it takes victims unit by unit in victim order (`victim_order`) and
simulates each growing scenario on a Statement (`victim_scenarios.simulate`): the victims so far evicted
virtually, the preemptor and every victim job placed again by the allocation routine, the action's
validator judging the outcome. The first valid scenario is committed (with a plugin that judges outcomes,
the best of a few among victims ranked alike: `_Choice`). Cheap filters skip scenarios that cannot free
what the preemptor asks for, and at most MAX_SCENARIOS are simulated per preemptor.

Which searches run is up to the scenario generator plugins (KAI v0.17's sg-nodelocalgreedy and
sg-multinodegang, `_searches`), in plugin order, each within its share of the action's time budget.
KAI v0.17 drives each generator through a search over how many of the job's pods to place (1, 2, 4, ...
then bisection, then all of them seeded with the best part's victims) and, for MultiNodeGang, node
subsets by the room their victims leave; the searches here place every pod at once and take victims in
victim order, and decide as KAI on every ported table (tests/kai), KAI's cases for that search among them
("Reclaim across many single-GPU nodes", the gang full drain, "jump over full nodes pods").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from kai_scheduler.actions.placement import pipeline_within_capacity
from kai_scheduler.actions.solvers.replays import last_for
from kai_scheduler.actions.solvers.search_budget import (
    ActionBudget,
    Deadline,
    JobBudget,
    SearchEnd,
    unlimited,
)
from kai_scheduler.actions.solvers.victim_order import VictimUnit, active_tasks
from kai_scheduler.actions.solvers.victim_scenarios import Outcome, Scenario, simulate, takes
from kai_scheduler.framework import ranked_nodes
from kai_scheduler.framework.gang import quota_request_of, request_of
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.search_budgets import MULTI_NODE_GANG, NODE_LOCAL_GREEDY
from kai_scheduler.framework.search_record import DUPLICATE, SIMULATED
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import Statement
from kai_scheduler.model.disruption import DisruptionBudgets
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import FloatArray, NodeTable
from kai_scheduler.model.resources import EPSILON, Resources

# Scenarios simulated per preemptor at most: a bound on the work one pending job can cause per cycle.
MAX_SCENARIOS = 64
# Committable scenarios compared after the first when a plugin judges outcomes (see `_Choice`).
ALTERNATIVES = 8
# Up to this many nodes changed since whole-GPU slots were last counted, only they are counted again
# (`_WholeGpuSlots`); more, and every node is.
_FEW_CHANGED_NODES = 64


def solve(
    session: Session,
    scenario: Scenario,
    victims: Callable[[], Iterable[VictimUnit]],
    budget: ActionBudget | None = None,
) -> SearchEnd:
    """Find and commit the smallest prefix of victims (in order) that lets the preemptor's pods run.
    `victims()` gives the victim order (called again for each search). Each enabled generator searches in
    turn (`_searches`), within its share of the action's `budget` (none: no limit); how the job's search
    ended is returned (SOLVED once a scenario is committed) and recorded, with each generator's scenarios
    and time, in the action's `ActionCounts.search` (for KAI v0.17's scenario-search metrics).

    Cheap filter first: a scenario is only simulated once the GPUs that are free, releasing or taken from
    the victims add up to what the preemptor asks for; and at most MAX_SCENARIOS are simulated.

    Where PodDisruptionBudgets cover candidate victims, the search first passes over the units that would
    take a budget beyond what it allows (best effort, as kube-scheduler's preemption); only when that finds
    nothing does it search the whole order, and the evictions beyond a budget say so (`Statement.commit`).
    Units are whole gangs or single pods above a job's minimum, so a gang is never left half evicted."""
    job = budget.begin_job() if budget is not None else None
    end = _search_job(session, scenario, victims, job)
    record = session.counts[scenario.action].search
    # (KAI labels a job not attempted as not reduced, whatever its budget.)
    reduced = job is not None and job.reduced and end is not SearchEnd.NOT_ATTEMPTED
    record.job(end.value, reduced)
    if end is SearchEnd.DEADLINE and budget is not None and budget.exhausted():
        record.action_budget_exhausted += 1
    return end


def _search_job(
    session: Session,
    scenario: Scenario,
    victims: Callable[[], Iterable[VictimUnit]],
    job: JobBudget | None,
) -> SearchEnd:
    # KAI's order: a job whose budget is spent is not attempted, whether or not a generator is enabled.
    if job is not None and job.exhausted():
        return SearchEnd.NOT_ATTEMPTED
    searches = _searches(session.points.scenario_generators, scenario)
    if not searches:
        return SearchEnd.NO_GENERATOR
    for hook in session.points.on_solution_start:
        hook()
    released = [task for task in scenario.tasks if session.state.release_reservation(task)]
    if released and scenario.replays is not None:
        # The cluster is not the one the replays were recorded on, nor will it be for the next preemptor.
        scenario = replace(scenario, replays=None)
    # The victim sets simulated already, by every generator: the same set evicts the same pods from the
    # same cluster, so it fails the same way again (KAI's fingerprints of failed scenarios).
    tried: set[frozenset[str]] = set()
    record = session.counts[scenario.action].search
    budgets = session.snapshot.disruption_budgets
    end = SearchEnd.EXHAUSTED
    for within_budgets in (True, False) if budgets is not None else (False,):
        passed_over = False
        for name, search in searches:
            units: Iterable[VictimUnit] = victims()
            if within_budgets:
                assert budgets is not None
                units = WithinBudgets(budgets, units)
            deadline = job.begin_generator(name) if job is not None else unlimited()
            record.generator = name
            started = time.perf_counter()
            end = search(session, scenario, units, tried, deadline)
            record.durations.append((name, end.value, time.perf_counter() - started))
            if end is SearchEnd.SOLVED:
                return end
            if end is SearchEnd.DEADLINE:
                break
            passed_over = passed_over or (isinstance(units, WithinBudgets) and units.passed_over)
        if end is SearchEnd.DEADLINE or not passed_over:
            break
    for task in released:
        session.state.restore_reservation(task)
    return SearchEnd.DEADLINE if end is SearchEnd.DEADLINE else SearchEnd.EXHAUSTED


# A generator's search: commits a scenario and says SOLVED, or says why it stopped (EXHAUSTED, DEADLINE).
Search = Callable[[Session, Scenario, Iterable[VictimUnit], set[frozenset[str]], Deadline], SearchEnd]


def _searches(generators: Sequence[str], scenario: Scenario) -> list[tuple[str, Search]]:
    """The searches the enabled generators own for this preemptor, in plugin order (none: nothing is
    found, as KAI without a generator plugin). NodeLocalGreedy is the node-by-node search of a one-pod
    preemptor (`_search_by_node`: KAI's by-pod solver of v0.13 did exactly this, and v0.17's
    NodeLocalGreedy still does); MultiNodeGang the accumulated search whose scenarios take the victims on
    every node the preemptor lands on (`_search`), which also serves gangs and consolidation. KAI tries
    MultiNodeGang after NodeLocalGreedy fails even for one pod, and so does this; with the failed victim
    sets shared (`tried`), it simulates only sets the node-by-node search had not reached. Not here:
    KAI's NodeLocalGreedy also serves a gang, growing it pod by pod on one node's victims at a time; with
    it alone, a gang (or consolidation) finds nothing here."""
    one_pod = scenario.by_node and len(scenario.tasks) == 1
    found: list[tuple[str, Search]] = []
    for name in generators:
        if name == NODE_LOCAL_GREEDY and one_pod:
            found.append((name, _search_by_node))
        elif name == MULTI_NODE_GANG:
            found.append((name, _search))
    return found


class WithinBudgets:
    """The victim units, in order, that keep every PodDisruptionBudget within what it still allows,
    counting the units handed out before them (a prefix of the order is what a scenario evicts at most);
    the others are passed over (`passed_over` says whether any was)."""

    def __init__(self, budgets: DisruptionBudgets, units: Iterable[VictimUnit]) -> None:
        self.budgets = budgets
        self.units = units
        self.passed_over = False

    def __iter__(self) -> Iterator[VictimUnit]:
        remaining = self.budgets.remaining()
        for unit in self.units:
            needs: dict[int, int] = {}
            for task in unit.tasks:
                for index in self.budgets.covers(task.key):
                    needs[index] = needs.get(index, 0) + 1
            if any(count > remaining[index] for index, count in needs.items()):
                self.passed_over = True
                continue
            for index, count in needs.items():
                remaining[index] -= count
            yield unit


def _search_by_node(
    session: Session,
    scenario: Scenario,
    victims: Iterable[VictimUnit],
    tried: set[frozenset[str]],
    deadline: Deadline,
) -> SearchEnd:
    """KAI's search for one pod (the job solver's scenarios, tried node by node): victims accumulate in
    victim order, and after each one, for every node of its job, the scenario evicts the victims so far
    that have a pod on that node (their whole jobs' units) and nothing else. Victims elsewhere are never
    touched, so a scenario costs what its node holds, however many victims came before."""
    statement = session.statement(scenario.action, scenario.preemptor.key)
    (task,) = scenario.tasks
    needed, available = _gpus_needed_and_free(session, scenario.tasks)
    nodes = session.snapshot.nodes
    taken: dict[JobInfo, list[TaskInfo]] = {}  # the units so far, by job
    on_node: dict[int, dict[JobInfo, None]] = {}  # the jobs with a unit's pod on each node
    simulated = 0
    counts = session.counts[scenario.action]
    replays = scenario.replays
    # Whether the pod fits anywhere as the cluster is (without evicting anything): if not, a scenario
    # whose victims all go back where they were before its turn cannot place it either, nor (when only
    # its own resources and labels choose its nodes) one where it fits none of the nodes they left.
    # Asked once a scenario's victims were placed again before (`replays`), before they are evicted: every
    # scenario before was undone, so the cluster is as the search found it. Why not at once: most searches
    # meet no such scenario, and the whole cluster's candidate mask was brought up to date over every node
    # the searches before had changed.
    fits_now: bool | None = None
    by_room = not task.job.has_topology() and not session.reads_other_pods(task)
    choice = _Choice(session, statement)
    for victim in victims:
        if not choice.still_looking(victim):
            break
        if (late := deadline.passed()) is not None:
            return SearchEnd.SOLVED if choice.commit(scenario) else late
        taken.setdefault(victim.job, []).extend(victim.tasks)
        for victim_task in victim.tasks:
            on_node.setdefault(victim_task.node, {})[victim.job] = None
        available += victim.gpus
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
                counts.search.scenario(DUPLICATE)
                continue
            tried.add(same)
            # The room the scenario makes is on its victims' nodes (the pod fit nowhere else before);
            # plain resources first, without evicting anything, then everything.
            if not _room_on_a_node(nodes, task, evicted):
                counts.scenarios_filtered += 1
                continue
            known = replays.get(tuple(t.key for t in evicted)) if replays is not None else None
            if known is not None and fits_now is None:
                fits_now = bool(session.candidate_nodes(task).any())
            for victim_task in evicted:
                statement.evict(victim_task, scenario.reason(victim_task))
            # (Asked of the victims' few nodes alone, as `candidate_nodes` answers at each: its mask of the
            # whole cluster was brought up to date over every node the scenarios before had changed.)
            freed = sorted({t.node for t in evicted})
            if session.refused_everywhere(task) or not session.any_candidate(task, freed):
                counts.scenarios_filtered += 1
                statement.discard()
                continue
            simulated += 1
            counts.scenarios_simulated += 1
            counts.search.scenario(SIMULATED)
            if (
                known is not None
                and not fits_now
                and (known.all_home or (by_room and known.rules_out(task.request)))
                and last_for(session, task.job, known)
            ):
                # At its turn the cluster is as it is now, where it fits nowhere, but for the nodes the
                # victims left, where it does not fit either (see `replays`).
                outcome = Outcome.UNPLACEABLE
            else:
                outcome = simulate(session, statement, scenario, evicted)
            if outcome is Outcome.COMMITTABLE:
                if choice.judge is None:
                    statement.commit()
                    return SearchEnd.SOLVED
                choice.offer(victim, evicted)  # (and undone)
            else:
                statement.discard()
            if simulated >= MAX_SCENARIOS or (outcome is Outcome.INVALID and scenario.invalid_is_final):
                return choice.end(scenario)
    return choice.end(scenario)


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

    def end(self, scenario: Scenario) -> SearchEnd:
        return SearchEnd.SOLVED if self.commit(scenario) else SearchEnd.EXHAUSTED

    def commit(self, scenario: Scenario) -> bool:
        """Simulate the chosen scenario again (the same cluster, the same outcome) and commit it."""
        if self.best is None:
            return False
        evicted = self.best[1]
        for task in evicted:
            self.statement.evict(task, scenario.reason(task))
        outcome = simulate(self.session, self.statement, scenario, evicted)
        assert outcome is Outcome.COMMITTABLE, "a scenario simulated again must end as before"
        self.statement.commit()
        return True


def _search(
    session: Session,
    scenario: Scenario,
    victims: Iterable[VictimUnit],
    tried: set[frozenset[str]],
    deadline: Deadline,
) -> SearchEnd:
    """The search for several pods (a gang): victims accumulate, evicted, in victim order; once the
    preemptor could fit, the scenario is simulated (`_try_scenario`)."""
    statement = session.statement(scenario.action, scenario.preemptor.key)
    evicted: list[TaskInfo] = []
    needed = available = 0.0
    slots = _WholeGpuSlots(session, scenario.tasks)
    capacity = _PreemptorCapacity(session, scenario.preemptor, scenario.tasks)
    landing = _Landing(session, scenario)
    simulated = 0
    counts = session.counts[scenario.action]
    end = SearchEnd.EXHAUSTED
    for taken, victim in enumerate(victims):
        if (late := deadline.passed()) is not None:
            end = late
            break
        if not taken:
            # (Summed over every node once a victim comes, before it is evicted: most searches get none.)
            needed, available = _gpus_needed_and_free(session, scenario.tasks)
        step = victim.tasks
        for task in step:
            statement.evict(task, scenario.reason(task))
        evicted.extend(step)
        available += victim.gpus
        if available + EPSILON < needed or not slots.enough():
            counts.scenarios_filtered += 1
            continue
        simulated += 1
        counts.scenarios_simulated += 1
        outcome = _try_scenario(session, statement, scenario, evicted, tried, capacity, landing)
        if outcome is Outcome.COMMITTABLE:
            statement.commit()
            return SearchEnd.SOLVED
        landing.settled()
        if simulated >= MAX_SCENARIOS or (outcome is Outcome.INVALID and scenario.invalid_is_final):
            break
    statement.discard()
    return end


def _gpus_needed_and_free(session: Session, tasks: list[TaskInfo]) -> tuple[float, float]:
    """The GPUs the preemptor's pods ask for and the cluster's free and releasing GPUs, before any victim:
    a scenario whose victims free fewer than the difference is not simulated. (MIG instances are not
    among the free GPUs counted here: a preemptor asking for some needs none by this count.)"""
    uses_mig = any(task.request.mig_instances for task in tasks)
    needed = 0.0 if uses_mig else request_of(session, tasks).gpu
    nodes = session.snapshot.nodes
    return needed, float(nodes.idle_gpus_total().sum() + nodes.rel_gpus.sum())


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


class _WholeGpuSlots:
    """Cheap per-node filter of a search's scenarios: pods asking for whole GPUs need nodes with that many
    free or releasing GPUs each; counting slots for the smallest such pod never rejects a scenario that
    could work (`enough`).

    The slots are counted on every node once, then again only on the nodes whose usage changed since
    (`NodeTable.changed_since`): a step of the search evicts one unit, on a node or a few. Each node's
    count is a whole number, so the total is exact whatever the order it is summed in. Why: every step of
    every search counted every node (146 steps in a first cycle at 500 nodes, most of them of preemptors
    their queue's limit refuses anyway). With `verify_carried` the total is checked against every node
    counted again (`CarriedMismatch`)."""

    def __init__(self, session: Session, tasks: list[TaskInfo]) -> None:
        whole = [task.request.whole_gpus for task in tasks if task.request.whole_gpus > 0]
        self._session = session
        self._pods = len(whole)
        self._smallest = min(whole) if whole else 1.0
        self._slots: FloatArray | None = None  # each node's, as the change log stood at `_seen`
        self._total = 0.0
        self._seen = 0

    def enough(self) -> bool:
        """Whether the nodes have a slot for each pod asking for whole GPUs."""
        if not self._pods:
            return True
        nodes = self._session.snapshot.nodes
        slots = self._slots
        changed = nodes.changed_since(self._seen) if slots is not None else None
        if slots is None or changed is None or len(changed) > _FEW_CHANGED_NODES:
            self._slots = self._counted(nodes)
            self._total = float(self._slots.sum())
        else:
            self._count_again(nodes, slots, changed)
            if self._session.verify_carried and self._total != self._counted(nodes).sum():
                raise CarriedMismatch(
                    f"whole-GPU slots counted at the nodes changed: {self._total}, "
                    f"at every node: {self._counted(nodes).sum()}"
                )
        self._seen = nodes.change_position()
        return self._total >= self._pods

    def _counted(self, nodes: NodeTable) -> FloatArray:
        slots: FloatArray = np.floor((nodes.free_gpus + nodes.rel_gpus + EPSILON) / self._smallest)
        return slots

    def _count_again(self, nodes: NodeTable, slots: FloatArray, changed: list[int]) -> None:
        free, releasing, smallest = nodes.free_gpus, nodes.rel_gpus, self._smallest
        for node in set(changed):
            now = math.floor((free.item(node) + releasing.item(node) + EPSILON) / smallest)
            self._total += now - slots.item(node)
            slots[node] = now


class _PreemptorCapacity:
    """Whether the preemptor's queue refuses its pods (`Session.check_job_capacity`, what `place_pipelined`
    asks first), a refusal kept through a search while the preemptor's version and what the checks read
    of the session (`Session.job_capacity_inputs`) stay: with those, a check answers alike. Why: the jobs
    of a queue at its limit are refused at every step of their searches (136 of the 146 scenarios of a
    first cycle at 500 nodes), their victims of other queues, and each refusal was worded again only to
    be thrown away. With `verify_carried` a kept refusal is checked against the check asked again
    (`CarriedMismatch`)."""

    def __init__(self, session: Session, preemptor: JobInfo, tasks: list[TaskInfo]) -> None:
        self._session = session
        self._preemptor = preemptor
        self._tasks = tasks
        self._request: Resources | None = None
        self._refused_at: tuple[int, object] | None = None  # the version and inputs of a refusal kept

    def refuses(self) -> bool:
        """Whether the capacity checks refuse the preemptor's pods as the cluster is now."""
        session, preemptor = self._session, self._preemptor
        kept = self._refused_at
        if kept is not None and kept[0] == preemptor.version:
            inputs = session.job_capacity_inputs(preemptor)
            if inputs is not None and inputs == kept[1]:
                if session.verify_carried and self._refusal() is None:
                    raise CarriedMismatch(f"{preemptor.key}: a capacity refusal kept, but the check takes it")
                return True
        refused = self._refusal() is not None
        inputs = session.job_capacity_inputs(preemptor) if refused else None
        self._refused_at = (preemptor.version, inputs) if inputs is not None else None
        return refused

    def _refusal(self) -> str | None:
        if self._request is None:
            self._request = quota_request_of(self._session, self._tasks)
        return self._session.check_job_capacity(self._preemptor, self._request)


def _nodes_it_takes(session: Session, statement: Statement, scenario: Scenario) -> set[int] | None:
    """The nodes the preemptor's pods take as the cluster is now (None: they do not fit), nothing of it left
    on `statement`. A gang's pods are placed in turn (where one goes, the next may no longer fit) and taken
    back. One pod, when nothing confines where it goes (no topology's node subsets, `Session.node_subsets`),
    lands where `Session.choose_node` puts it, which is all that placing it would ask: it is not placed.
    Why: most steps of a one-pod preemptor's accumulated search (after the node-by-node one) find where it
    lands only to see that the scenario there was simulated already, and placing and taking back the pod
    cost a third of finding its node."""
    if len(scenario.tasks) == 1 and not session.points.node_subsets and session.allowed is None:
        placed = session.choose_node(scenario.tasks[0])
        return None if placed is None else {placed.node}
    preemptor = scenario.preemptor
    checkpoint = statement.checkpoint()
    failure = pipeline_within_capacity(session, statement, preemptor, scenario.tasks, takes(preemptor))
    taken = {task.node for task in scenario.tasks}
    statement.rollback(checkpoint)
    return None if failure is not None else taken


class _Landing:
    """Where the preemptor's pods land at a step of a search (`_nodes_it_takes`), kept from the last step
    that found it while every node changed since (`NodeTable.changed_since`: the units evicted in between)
    holds none of its pods, even with everything releasing there gone. Such a node is no candidate of any
    of them (placing them only takes room), and the best-scored candidate does not depend on nodes that
    are not candidates: they land where they did. Kept too while each pod's node, chosen by the ranked
    index's walk over values (`ranked_nodes.Choice`, recorded as the pods were placed), stands despite the
    nodes changed: none of them is a node the pods took, so each pod finds the cluster as it was but at
    those nodes, one pod after the other. Kept only for pods whose
    candidates are decided by the node alone: no topology, no inter-pod rules (`Session.reads_other_pods`),
    no queue's usage read (`queue_bound_placement`), pre-predicates no eviction changes. Why: the
    accumulated searches of two gangs of a first cycle over a deep backlog at 5,000 nodes each take 64
    steps of a single-GPU victim, where each gang's 8 or 16 pods were placed and taken back to find the
    nodes, the same most steps. With `verify_carried` a kept answer is checked against the pods placed
    again (`CarriedMismatch`)."""

    def __init__(self, session: Session, scenario: Scenario) -> None:
        self._session = session
        self._scenario = scenario
        self._requests = list(dict.fromkeys(task.request for task in scenario.tasks))
        self._may_keep = _lands_by_room_alone(session, scenario)
        self._found: set[int] | None = None
        # How each pod's node was chosen when `_found` was found, if the ranked index's walk chose them all.
        self._choices: list[ranked_nodes.Choice] | None = None
        self._asked = False  # found at this step (its undoing not yet over: `settled`)
        self._position: int | None = None  # where the change log stood once the step that found it ended

    def nodes(self, statement: Statement) -> set[int] | None:
        """`_nodes_it_takes` as the cluster is now (read only)."""
        session, scenario = self._session, self._scenario
        self._asked = True
        if self._position is not None and self._lands_as_before():
            if session.verify_carried and _nodes_it_takes(session, statement, scenario) != self._found:
                raise CarriedMismatch(
                    f"{scenario.preemptor.key}: where its pods land was kept, but they land elsewhere now"
                )
            return self._found
        if not self._may_keep:
            self._found = _nodes_it_takes(session, statement, scenario)
            return self._found
        with ranked_nodes.recorded_choices(session) as choices:
            self._found = _nodes_it_takes(session, statement, scenario)
        self._choices = _all_chosen(choices, len(scenario.tasks)) if self._found is not None else None
        return self._found

    def settled(self) -> None:
        """The step is over and everything it placed or kept is undone: the cluster is as it was when the
        nodes were found (or kept) at it."""
        if self._asked and self._may_keep:
            self._position = self._session.snapshot.nodes.change_position()
        self._asked = False

    def _lands_as_before(self) -> bool:
        nodes = self._session.snapshot.nodes
        assert self._position is not None
        changed_log = nodes.changed_since(self._position)
        if changed_log is None:
            return False
        changed, requests, found = set(changed_log), self._requests, self._found
        if found is not None and not found.isdisjoint(changed):
            return False  # (a node a pod took changed: it may no longer hold it)
        if not any(nodes.node_fits(request, node, soon=True) for node in changed for request in requests):
            if self._choices is not None and any(not changed.isdisjoint(c.witnesses) for c in self._choices):
                self._choices = None  # (a witness changed: the lowest or highest value may have)
            return True
        choices = self._choices
        return choices is not None and all(choice.stands_despite(nodes, changed) for choice in choices)


def _all_chosen(choices: list[ranked_nodes.Choice | None], pods: int) -> list[ranked_nodes.Choice] | None:
    """`choices` when the ranked index's walk chose a node for each of the `pods`, else None."""
    chosen = [choice for choice in choices if choice is not None]
    return chosen if len(chosen) == pods == len(choices) else None


def _lands_by_room_alone(session: Session, scenario: Scenario) -> bool:
    """Whether the nodes the preemptor's pods may use are decided by each node's own resources and labels
    (see `_Landing`)."""
    points = session.points
    invariant = points.victim_invariant_pre_predicates
    return (
        not scenario.preemptor.has_topology()
        and not points.queue_bound_placement
        and session.allowed is None
        and all(check in invariant for check in points.pre_predicates)
        and not any(session.reads_other_pods(task) for task in scenario.tasks)
    )


def _try_scenario(
    session: Session,
    statement: Statement,
    scenario: Scenario,
    evicted: list[TaskInfo],
    tried: set[frozenset[str]],
    capacity: _PreemptorCapacity,
    landing: _Landing,
) -> Outcome:
    """Simulate the scenario of `evicted` (all virtually evicted on `statement`) as KAI's node-by-node
    search would: with only the victim jobs that have a pod on the nodes the preemptor takes when every
    victim so far is gone (the others keep running, untouched). Unless committable, everything it did is
    rolled back (the evictions stay)."""
    if capacity.refuses():
        return Outcome.UNPLACEABLE
    checkpoint = statement.checkpoint()
    taken_nodes = landing.nodes(statement)
    if taken_nodes is None:
        return Outcome.UNPLACEABLE
    on_those = {id(task.job) for task in evicted if task.node in taken_nodes}
    needed = [task for task in evicted if id(task.job) in on_those]
    if 0 <= scenario.max_victims < len(needed):
        return Outcome.UNPLACEABLE  # not within the bound on the pods evicted
    same = frozenset(task.key for task in needed)
    record = session.counts[scenario.action].search
    if same in tried:
        record.scenario(DUPLICATE)
        return Outcome.UNPLACEABLE  # simulated already: it would fail the same way
    tried.add(same)
    record.scenario(SIMULATED)
    for task in evicted:
        if id(task.job) not in on_those:
            statement.keep(task)
    outcome = simulate(session, statement, scenario, needed)
    if outcome is not Outcome.COMMITTABLE:
        statement.rollback(checkpoint)
    return outcome
