"""What reclaim, preempt and consolidation share: the loop over pending jobs and the candidate victims.

Each action supplies `blocked` and `attempt`; an attempt orders victims (`victim_order`) and hands them to
the solver (`victim_search.solve`), which simulates scenarios (`victim_scenarios`) and commits the first
valid one. As in KAI v0.17, a job one of whose pods fails a pre-predicate no eviction changes is passed
over without a search, and the search keeps to the action's time budget (`search_budget`): a job whose
search runs out of time ends the action for the cycle.
"""

from __future__ import annotations

import bisect
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence

from kai_scheduler.actions.job_queue import (
    KeyedJobs,
    QueueOrderedJobs,
    handed_out_by_leaf,
    sorted_by_leaf,
    with_pending,
)
from kai_scheduler.actions.solvers.replays import Replays
from kai_scheduler.actions.solvers.search_budget import ActionBudget, Clock, SearchEnd
from kai_scheduler.actions.solvers.victim_order import (
    Heaps,
    LeafVictims,
    SharedVictims,
    VictimEntry,
    VictimUnit,
)
from kai_scheduler.actions.solvers.victim_scenarios import Scenario
from kai_scheduler.actions.solvers.victim_search import solve
from kai_scheduler.api.durations import go_duration_text
from kai_scheduler.api.reasons import PREEMPTION_DELAY_NOT_ELAPSED, WaitReason
from kai_scheduler.framework.gang import (
    kept_tasks,
    next_signature,
    tasks_to_allocate,
)
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.snapshot import JobsAtOpen

# KAI's message for a job passed over for its preemption delay (`recordPreemptionDelayFitError`), up to
# where KAI names the end as a wall-clock time: the core's clock has no date, so it says how long is left.
DELAY_MESSAGE = "Workload is within its preemption delay window ({}) and may not trigger evictions"


# Why the job whose victim search ran out of time waits; the jobs after it are not looked at this cycle.
OUT_OF_TIME = "the victim search ran out of time (scenarioSearchBudgets); the action stops for this cycle"
# Why a job still waits when neither victim search generator plugin is enabled (KAI's
# SearchResultNoGenerator).
NO_GENERATOR = "no scenario generator plugin is enabled (sg-nodelocalgreedy, sg-multinodegang)"


def within_preemption_delay(session: Session, job: JobInfo) -> bool:
    """Whether the job may not evict anyone yet (KAI's `FilterWithinPreemptionDelay`): then it waits with
    KAI's reason (once per cycle, however many actions pass it over), and the cycle wakes when the delay
    ends."""
    end = job.preemption_delay_end()
    if end is None or session.now >= end:
        return False
    session.wake_at(end)
    message = DELAY_MESSAGE.format(go_duration_text(job.preemption_delay))
    if message not in session.unschedulable.get(job.key, ""):
        left = go_duration_text(end - session.now)
        session.add_reason(job.key, WaitReason(f"{message} for another {left}", PREEMPTION_DELAY_NOT_ELAPSED))
    return True


class WaitingJobs:
    """Of the jobs waiting at session open, in snapshot order, those that may be victims now (preemptible
    and with an active pod: placed before the session, or by an action since) and those with a
    preemption delay (only they may be within it). The session's job groups hold both as it opened
    (`JobsAtOpen`, carried across cycles), brought up to date here by the jobs of the decisions taken
    since (or asked again, when there are fewer of them than decisions): only a committed statement
    moves a pod (`Statement.commit`). Why: each of the three victim actions walked every waiting job
    twice (10,000 a trickle cycle at 5,000 nodes, issue #23 point 1), and then one of them once a
    session (2.4% of a trickle cycle)."""

    __slots__ = ("_decided", "_index", "_may_be_victims", "delayed", "of_groups", "with_pending")

    def __init__(self, session: Session, at_open: JobsAtOpen) -> None:
        self.of_groups = at_open
        self._may_be_victims = list(at_open.waiting_victims)
        self._decided = 0
        # The jobs with a pending pod (`with_pending`) when this walked every waiting job, and the decisions
        # they follow: `VictimInputs.pending` asks them next, with nothing decided in between.
        self.with_pending: tuple[int, list[JobInfo]] | None = None
        if len(session.decisions) > len(at_open.waiting):
            # Fewer jobs to ask than decisions to go through (a first cycle's allocate placed thousands):
            # each waiting job's tally read once for both.
            may_be_victims: list[JobInfo] = []
            pending: list[JobInfo] = []
            for job in at_open.waiting:
                tally = job.tally()
                if tally.pending:
                    pending.append(job)
                if job.preemptible and tally.active_allocated > 0:
                    may_be_victims.append(job)
            self._may_be_victims = may_be_victims
            self._decided = len(session.decisions)
            self.with_pending = (self._decided, pending)
        # Each preemptible waiting job's place, made once a decision touches one.
        self._index: dict[JobInfo, int] | None = None
        self.delayed = at_open.waiting_delayed

    @staticmethod
    def of(session: Session) -> WaitingJobs:
        at_open = session.snapshot.jobs_at_open()
        found = session.scratch.get(_WAITING)
        if not isinstance(found, WaitingJobs) or found.of_groups is not at_open:
            found = session.scratch[_WAITING] = WaitingJobs(session, at_open)
        return found

    def may_be_victims(self, session: Session) -> list[JobInfo]:
        """The preemptible waiting jobs that have had an active pod since the session opened, in snapshot
        order (callers ask each whether it has one now)."""
        decisions = session.decisions
        if self._decided < len(decisions):
            tasks_of = session.snapshot.tasks
            touched = {tasks_of[d.pod].job for d in decisions[self._decided :]}
            self._decided = len(decisions)
            touched = {job for job in touched if job.preemptible}.difference(self._may_be_victims)
            if touched:
                index = self._index
                if index is None:
                    waiting = self.of_groups.waiting
                    index = self._index = {job: i for i, job in enumerate(waiting) if job.preemptible}
                more = [job for job in touched if job in index]
                if more:
                    self._may_be_victims = sorted((*self._may_be_victims, *more), key=index.__getitem__)
        return self._may_be_victims


_WAITING = "victims.waiting"


class VictimInputs:
    """The candidate victims (`VictimAction.could_be_victim`, among the jobs running at session open and
    those that may be victims now, in that order) and the jobs with a pending pod (`with_pending`), as the
    last victim action of the session found them, brought up to date by the jobs of the decisions taken
    since: only a committed statement moves a pod, so a job no decision touched keeps both answers. Why:
    each of the three actions asked every waiting job again (63,000 in a first cycle at 20,000 nodes)
    and every candidate (30,000), most often with nothing decided in between."""

    __slots__ = ("_candidates", "_candidates_at", "_order", "_pending", "_pending_at", "of_groups")

    def __init__(self, at_open: JobsAtOpen) -> None:
        self.of_groups = at_open
        self._candidates: list[JobInfo] = []
        self._pending: list[JobInfo] = []
        self._candidates_at = self._pending_at = -1  # the decisions they follow (-1: not found yet)
        # Each job's place in the candidates' order and in the waiting jobs', made once a touched job has to
        # be put in its place.
        self._order: tuple[dict[JobInfo, int], dict[JobInfo, int]] | None = None

    @staticmethod
    def of(session: Session) -> VictimInputs:
        at_open = session.snapshot.jobs_at_open()
        found = session.scratch.get(_INPUTS)
        if not isinstance(found, VictimInputs) or found.of_groups is not at_open:
            found = session.scratch[_INPUTS] = VictimInputs(at_open)
        return found

    def candidates(self, session: Session, waiting: WaitingJobs) -> list[JobInfo]:
        """The candidate victims now, in order (a list of the caller's own)."""
        if self._candidates_at < 0:
            running = self.of_groups.preemptible_running
            may_be_victims = waiting.may_be_victims(session)
            found = waiting.with_pending
            if found is not None and found[0] == len(session.decisions):
                # Those the walk of every waiting job found preemptible with an active pod, nothing decided
                # since (a first cycle's 16,000 at 5,000 nodes): only their queue is asked.
                queues = session.snapshot.queues.queues
                candidates = [j for j in running if VictimAction.could_be_victim(session, j)]
                among = set(running)
                candidates += [j for j in may_be_victims if j.queue in queues and j not in among]
                self._candidates = candidates
            else:
                self._candidates = [
                    j
                    for j in dict.fromkeys((*running, *may_be_victims))
                    if VictimAction.could_be_victim(session, j)
                ]
        elif self._candidates_at < len(session.decisions):
            self._candidates = self._updated(
                session,
                self._candidates,
                self._candidates_at,
                0,
                lambda job: VictimAction.could_be_victim(session, job),
            )
        self._candidates_at = len(session.decisions)
        return list(self._candidates)

    def pending(self, session: Session, waiting: WaitingJobs) -> list[JobInfo]:
        """The jobs with a pending pod now, in snapshot order (not to be changed): as `waiting` found them
        when it walked every waiting job with nothing decided since."""
        if self._pending_at < 0:
            found = waiting.with_pending
            if found is not None and found[0] == len(session.decisions):
                self._pending = found[1]
            else:
                self._pending = with_pending(session.snapshot)
        elif self._pending_at < len(session.decisions):
            self._pending = self._updated(
                session, self._pending, self._pending_at, 1, lambda job: bool(job.tally().pending)
            )
        self._pending_at = len(session.decisions)
        return self._pending

    def _updated(
        self,
        session: Session,
        jobs: list[JobInfo],
        decided: int,
        order: int,
        holds: Callable[[JobInfo], bool],
    ) -> list[JobInfo]:
        """`jobs` (in the order `order` names) with each job of the decisions from `decided` on asked again
        whether it `holds`: kept, dropped or put in its place."""
        tasks_of = session.snapshot.tasks
        touched = {tasks_of[d.pod].job for d in session.decisions[decided:]}
        kept = [job for job in jobs if job not in touched or holds(job)]
        present = set(kept)
        added = [job for job in touched if job not in present and holds(job)]
        if not added:
            return kept
        if self._order is None:
            at_open = self.of_groups
            self._order = (
                {
                    job: i
                    for i, job in enumerate(dict.fromkeys((*at_open.preemptible_running, *at_open.waiting)))
                },
                {job: i for i, job in enumerate(at_open.waiting)},
            )
        place = self._order[order]
        # (A job that is not among them is never one: the full walk does not meet it.)
        for job in sorted((job for job in added if job in place), key=place.__getitem__):
            bisect.insort(kept, job, key=place.__getitem__)
        return kept


_INPUTS = "victims.inputs"


class VictimAction(ABC):
    """The loop reclaim, preempt and consolidation share: pending jobs in queue order, one attempt each
    (again while an elastic job keeps growing), skipping jobs shaped like one that already failed in
    this action.

    The jobs that could be victims are kept by queue (`by_queue`) and brought up to date after every
    commit; each queue's victim heap, made when first needed, serves every attempt until then (`heaps`):
    most attempts fail, and each ordered every candidate job again."""

    name = ""
    gave_up = ""  # why a job still waits after this action found no valid scenario for it
    # The clock of the search budgets (wall time, as KAI's); a test gives its own.
    clock: Clock = time.perf_counter

    def __init__(self) -> None:
        self.budget: ActionBudget | None = None
        self.search_end: SearchEnd | None = None  # how the last attempt's search ended
        self.by_queue: dict[str, dict[JobInfo, None]] = {}
        self.replays = Replays()  # valid until the next commit
        self.shared_orders: dict[tuple[object, ...], SharedVictims] = {}  # likewise
        self._leaves: dict[str, LeafVictims] = {}
        self._heaps: dict[tuple[str, bytes], list[VictimEntry]] = {}

    def execute(self, session: Session) -> None:
        record = session.counts[self.name].search
        self.budget = ActionBudget(session.config.scenario_search_budgets, self.name, self.clock, record)
        record.budgeted = True
        self.by_queue.clear()
        self._leaves.clear()
        self._heaps.clear()
        self.replays.clear()
        self.shared_orders.clear()
        # Only preemptible jobs may be victims: running at session open, or placed since by an earlier
        # action (among the jobs that were waiting).
        waiting = WaitingJobs.of(session)
        found = VictimInputs.of(session)
        candidates = found.candidates(session, waiting)
        if session.verify_carried:
            _check_candidates(self, session, candidates)
        # Without any (a cluster running only non-preemptible jobs) there is nothing to do, not even
        # ordering jobs: only the jobs within their preemption delay are told so, as the walk over the
        # pending jobs below tells them (the others it passes over without a word).
        if not candidates:
            for j in waiting.delayed:
                if j.tally().pending and j.invalid_reason is None:
                    within_preemption_delay(session, j)
            return
        with_pods_pending = found.pending(session, waiting)
        if session.verify_carried and with_pods_pending != with_pending(session.snapshot):
            raise CarriedMismatch(
                f"{self.name}: the jobs with a pending pod brought up to date "
                f"{[j.key for j in with_pods_pending]} differ from those found afresh "
                f"{[j.key for j in with_pending(session.snapshot)]}"
            )
        # Only a job with a preemption delay may be within it (`WaitingJobs.delayed`): the others are not
        # asked (some 9,400 jobs for each victim action of a first cycle over a deep backlog at 5,000 nodes).
        delayed = set(waiting.delayed)
        pending = [
            j
            for j in with_pods_pending
            if j.invalid_reason is None and (j not in delayed or not within_preemption_delay(session, j))
        ]
        # Nothing waits (most cycles of a cluster that keeps up): nothing to do.
        if not pending:
            return
        for candidate in candidates:
            self.by_queue.setdefault(candidate.queue, {})[candidate] = None
        self.started(session, candidates)
        depth = session.config.queue_depth_per_action.get(self.name)
        keyed = sorted_by_leaf(session, pending)
        if self.blocks_quietly and self._walked_without_search(session, keyed, depth):
            return
        queue = QueueOrderedJobs.of_keyed(session, keyed, depth)
        failed: set[tuple[object, ...]] = set()
        counts = session.counts[self.name]
        while (job := queue.pop()) is not None:
            counts.acted_on += 1
            tasks = tasks_to_allocate(session, job)
            if not tasks:
                continue
            signature = None
            if session.config.use_scheduling_signatures:
                signature = self.signature(session, job)
            if signature in failed or self.blocked(session, job):
                continue
            invariant_failure = self._invariant_failure(session, job, tasks)
            if invariant_failure is not None:
                session.add_reason(job.key, invariant_failure)
                # (Jobs of its shape fail alike: they wait for the reason it was given.)
                if signature is not None:
                    failed.add(signature)
                continue
            decided = len(session.decisions)
            self.search_end = None
            if self.attempt(session, job, tasks):
                session.unschedulable.pop(job.key, None)
                queue.refresh()
                self._committed(session, decided)
                if job.has_pending():
                    queue.push(job)
                continue
            if self.search_end is not None and self.search_end.stops_action:
                session.add_reason(job.key, f"{self.name}: {OUT_OF_TIME}")
                return
            session.add_reason(job.key, f"{self.name}: {self._gave_up(session)}")
            if signature is not None:
                failed.add(signature)

    def solve(
        self, session: Session, scenario: Scenario, victims: Callable[[], Iterable[VictimUnit]]
    ) -> bool:
        """Search victims for the scenario within the action's budget (`victim_search.solve`), noting how
        the search ended."""
        self.search_end = solve(session, scenario, victims, self.budget)
        return self.search_end is SearchEnd.SOLVED

    def _walked_without_search(self, session: Session, keyed: KeyedJobs, depth: int | None) -> bool:
        """Walk the jobs `keyed` (`sorted_by_leaf`) without a job queue, if none of them would reach the
        victim search: each passed over (no pods to place, a signature that failed, `blocked`), failing a
        victim-invariant pre-predicate, or refused by `attempt` before any search (`refused_unsearched`),
        and each reason the walk writes goes to a job that has one already (a new one would take its
        place among the reasons in the order of the walk). Then the walk moves nothing, and what it does
        to a job depends only on the jobs before it in its own leaf queue, which the job queue hands out
        in job order (a signature that failed is one of that leaf's, else the walk is not taken): not on
        how the queue order interleaves the leaves. Why: in a first cycle over a deep backlog preempt and
        consolidation each walk some 9,400 jobs at 5,000 nodes and search for none, and a pop of the job
        queue ranks the leaf's path again for most jobs (their requests differ)."""
        use_signatures = session.config.use_scheduling_signatures
        failed: dict[tuple[object, ...], str] = {}  # each failed signature's leaf queue
        reasons: list[tuple[str, str]] = []
        handed_out = handed_out_by_leaf(session, keyed, depth)
        for leaf, jobs in handed_out.items():
            for job in jobs:
                tasks = kept_tasks(session, job)  # (only read: no copy)
                if not tasks:
                    continue
                # (A job passed over is passed over in any order: its signature is not asked.)
                if self.blocked_before_signature and self.blocked(session, job):
                    continue
                signature = self.signature(session, job) if use_signatures else None
                if signature in failed:
                    if failed[signature] != leaf:  # (which of the two leaves goes first decides)
                        return False
                    continue
                if not self.blocked_before_signature and self.blocked(session, job):
                    continue
                reason = self._invariant_failure(session, job, tasks)
                if reason is None:
                    if not self.refused_unsearched(session, job, tasks):
                        return False
                    reason = f"{self.name}: {self._gave_up(session)}"
                if job.key not in session.unschedulable:
                    return False
                reasons.append((job.key, reason))
                if signature is not None:
                    failed[signature] = leaf
        if session.verify_carried:
            _check_handed_out(self, session, keyed, depth, handed_out)
        session.counts[self.name].acted_on += sum(len(jobs) for jobs in handed_out.values())
        if reasons:
            self.search_end = None  # (as the walk leaves it after an attempt)
        for key, reason in reasons:
            session.add_reason(key, reason)
        return True

    def _invariant_failure(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> str | None:
        """Why a pod of the job fails a pre-predicate no eviction changes (KAI v0.17's victim-invariant
        pre-filter), in KAI's words (None: none fails): then no victim is searched for it, and it waits
        for that reason."""
        checks = session.points.victim_invariant_pre_predicates
        for task in tasks if checks else ():
            for check in checks:
                failure = check(task)
                if failure is not None:
                    pod = f"{task.namespace}/{task.name}"
                    return f"{self.name}: Resources were not found for pod {pod} due to: {failure}"
        return None

    def _gave_up(self, session: Session) -> str:
        if not session.points.scenario_generators:
            return NO_GENERATOR
        return self.gave_up

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

    def signature(self, session: Session, job: JobInfo) -> tuple[object, ...]:
        """Jobs with equal signatures fare alike in this action within a cycle (see
        `scheduling_signature`): the one kept with the job's next pods (`next_signature`, made by allocate
        for most jobs), with what node filters and capacity checks read of them beyond their requests
        (`ExtensionPoints.signature_reads`: a pod over its annotation limit fails where one alike but for
        the annotation may not)."""
        return next_signature(session, job)

    def refused_unsearched(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        """Whether `attempt` would return False for the job without a search and without writing anything
        (as the cluster stands); False when unsure. Asked only of an action that `blocks_quietly`."""
        return False

    # Whether `blocked` writes nothing (no reason): then a walk in which no job reaches the search is taken
    # without a job queue (`_walked_without_search`).
    blocks_quietly = False
    # Whether that walk asks `blocked` before the job's signature: for an action whose `blocked` costs
    # less than a signature and passes over most jobs, with few failed signatures to skip them by. A job
    # it passes over is passed over whichever signatures failed before it (none is noted for it).
    blocked_before_signature = False

    @abstractmethod
    def blocked(self, session: Session, job: JobInfo) -> bool:
        """Whether the job may not even try (what the action checks before looking for victims). What its
        next pods ask (`next_request`) is read by the action that needs it, and only then: preempt never
        does, consolidation only for a preemptible job (a deep backlog's walks ask thousands of jobs)."""

    @abstractmethod
    def attempt(self, session: Session, job: JobInfo, tasks: list[TaskInfo]) -> bool:
        """Search victims (among the candidates, `by_queue`) for the job's next pods and commit the first
        valid scenario."""


def _check_handed_out(
    action: VictimAction,
    session: Session,
    keyed: KeyedJobs,
    depth: int | None,
    handed_out: dict[str, list[JobInfo]],
) -> None:
    """With `verify`: a job queue of the jobs `keyed` hands out those of `handed_out`, each leaf's in that
    order; a difference raises `CarriedMismatch`."""
    copied = {name: list(entries) for name, entries in keyed.items()}  # (the queue takes its lists)
    queue = QueueOrderedJobs.of_keyed(session, copied, depth)
    popped: dict[str, list[JobInfo]] = {}
    while (job := queue.pop()) is not None:
        popped.setdefault(job.queue, []).append(job)
    expected = {name: jobs for name, jobs in handed_out.items() if jobs}
    if popped != expected:
        raise CarriedMismatch(
            f"{action.name}: the jobs a job queue hands out by leaf differ from those walked without one"
        )


def _check_candidates(action: VictimAction, session: Session, candidates: list[JobInfo]) -> None:
    at_open = session.snapshot.jobs_at_open()
    every = [
        j
        for j in dict.fromkeys((*at_open.preemptible_running, *at_open.waiting))
        if action.could_be_victim(session, j)
    ]
    if every != candidates:
        raise CarriedMismatch(
            f"{action.name}: the candidate victims found among the jobs that may be victims "
            f"{[j.key for j in candidates]} differ from those found among every job {[j.key for j in every]}"
        )
