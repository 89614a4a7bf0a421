"""allocate: place pending jobs on free (or releasing) capacity, queue by queue, gang by gang.

Jobs come out of the queue tree in fair-share order. Each attempt takes a gang's missing members (or one
more pod of a satisfied elastic job), checks the queue's limits and non-preemptible quota, and places the
pods one by one on a statement; if any pod does not fit, the whole attempt is rolled back. A gang with
any pod on releasing capacity is pipelined as a whole: it binds together in a later cycle or not at all.
An attempt whose first pod's shape found no node in the last cycle, where no node that may differ since
is a candidate now, is not made again: its reason is written as the attempt writes it
(`framework/placement_failures.py`). A job shaped like an earlier one of its queue that failed quotes that
one's reason; one shaped like an earlier job of another queue whose first pod found no node, nothing
placed since, is written as its own attempt would be (its own pod, the same count of the nodes).

Most walks of a deep backlog place nothing, so no queue's allocation moves and the job queue's order is
known ahead: the walk reads it as a merge (`actions/quiet_order.py`) until an attempt moves an allocation,
then carries on with a job queue of the jobs left. The jobs are taken up in the same order either way, so
their reasons are the same and written in the same order. And when no job may be placed at all, what the
walk would write does not depend on that order: it is written without walking (`actions/walk_replay.py`);
so is the rest of a walk that placed some jobs first and would place nothing more (a cycle after a pod
completes), written leaf by leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final

from kai_scheduler.actions import walk_replay
from kai_scheduler.actions.job_queue import KeyedJobs, QueueOrderedJobs, allocation_of, keyed_by_leaf
from kai_scheduler.actions.placement import place_job
from kai_scheduler.actions.queue_admission import admissible
from kai_scheduler.actions.quiet_order import QuietOrder
from kai_scheduler.actions.start_planner import planner_for
from kai_scheduler.actions.walk_reasons import UNSAID, does_not_fit, failed_like, no_fit_words
from kai_scheduler.api.reasons import code_of
from kai_scheduler.framework.gang import kept_tasks, tasks_to_allocate
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.placement_failures import SessionFailures, first_pod_found_none
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.statement import committed_placement
from kai_scheduler.framework.walk_facts import JobFacts, WalkFacts
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.resources import PodRequest

# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup of the class's attributes (~10x a global's cost), and these are asked of every pod placed.
_ALLOCATED: Final = TaskStatus.ALLOCATED
_PIPELINED: Final = TaskStatus.PIPELINED


class Allocate:
    name = "allocate"

    def execute(self, session: Session) -> None:
        candidates = []
        # (No pod placed or evicted yet in this session: every job waiting as it opened still does.)
        moved = session.state.moves > 0
        for candidate in session.snapshot.jobs_at_open().waiting:
            if moved and not candidate.tally().pending and not (candidate.gated and candidate.invalid_reason):
                continue
            if candidate.invalid_reason is not None:
                session.unschedulable[candidate.key] = candidate.invalid_reason
                continue
            candidates.append(candidate)
        walk = _Walk(session, self.name)
        depth = session.config.queue_depth_per_action.get(self.name)
        # (A depth hands out only some jobs: the walk is made.)
        replayed = walk.replayed(candidates) if depth is None else None
        if replayed is not None and not session.verify_carried:
            walk.write(len(candidates), replayed)
            walk.end()
            return
        reads = session.points.queue_order_reads if session.points.queue_order is not None else None
        # (A depth reads what was handed out; holds made for unplaced jobs are not an order to read ahead;
        # a merge picks the job queue's child only where the order is a strict weak ordering.)
        if reads is not None and depth is None and walk.holds is None and _merge_picks_alike(session):
            walk.in_quiet_order(candidates, reads)
        else:
            walk.take_up(QueueOrderedJobs(session, candidates, depth), None)
        if replayed is not None:
            _check_replayed(session, walk, replayed)
        if walk.tail is not None:
            _check_replayed(session, walk, *walk.tail)
        walk.end()


def _merge_picks_alike(session: Session) -> bool:
    """Whether the queue order ranks every queue's children (and the roots) by a strict weak ordering
    (`ExtensionPoints.queue_order_weak`), so that the quiet order's merge by heap hands out what the job
    queue's scan does; with a cycle among three siblings the two pick differently."""
    weak = session.points.queue_order_weak
    if weak is None:
        return False
    queues = session.snapshot.queues
    return weak([queues[name] for name in queues.roots]) and all(
        weak([queues[name] for name in queue.children]) for queue in queues if not queue.is_leaf
    )


# Jobs in a row that placed nothing after which the walk goes back from the job queue to the quiet order
# (a cycle after a completion places the freed room first), and how often a walk goes back (each time
# orders the jobs left again: a first cycle's walk places thousands of jobs, quiet stretches between).
_CALM_POPS = 32
_MOST_RETURNS = 2


# Off, a job of one plain pod is placed through a statement like any other (the tests compare the two ways).
LONE_POD_SHORTCUT = True


@dataclass(frozen=True, slots=True)
class _NoRoom:
    """The first attempt of a shape in a walk, which found no node: its job, the jobs the walk had placed
    when it ended (`_Walk.placed`), its first pod's shape (request, placement key) when that pod found no
    node (None: a later pod did, or more than the pods decides where they go), and that pod's count of
    the nodes (`explain_no_fit`; None: not worked out, or a pre-predicate's refusal) with where the node
    table's log of changes stood."""

    job: str
    placed: int
    first_pod: tuple[PodRequest, str] | None
    detail: str | None
    position: int


class _Walk:
    """One allocate's walk over the waiting jobs: what it learns as it goes (the shapes that failed) and
    each job's step (`step`)."""

    def __init__(self, session: Session, action: str) -> None:
        self.session = session
        self.action = action
        # Jobs alike fare alike within the action (see `scheduling_signature`), and capacity only shrinks
        # as it goes: an attempt shaped like one that failed is not made again. Whether any node holds the
        # pods does not depend on the queue, so a shape that found no room fails for every queue (after
        # the job's own queue checks, which do).
        # (Signatures by their numbers in the jobs' kept facts, `walk_facts`.)
        self.failed_shapes: dict[Hashable, str] = {}  # signature -> the first job that failed
        self.no_room: dict[Hashable, _NoRoom] = {}  # signature without the queue -> its first attempt
        # The placement keys of the pods of the attempts of one pod noted in either (`_facts_to_look_up`).
        self.failed_placements: set[str] = set()
        # The reason of the jobs that fail like a first one, by that job (with its own reason it was
        # worded from): one text for all of them (a deep backlog has thousands of jobs of a few shapes).
        self.alike: dict[str, tuple[str, str]] = {}
        self.use_signatures = session.config.use_scheduling_signatures
        facts = session.walk_facts
        self.facts = facts if facts is not None else WalkFacts()
        self.names = self.facts.start(session)
        self.verify = session.verify_carried
        self.holds = session.points.holds
        if self.holds is not None:
            self.holds.start_action()
        carried = session.placement_failures
        self.failures = carried.start(session) if carried is not None else None
        self.acted_on = 0
        self.attempts = 0  # attempts made (not known to fail): they may move allocations and back
        self.placed = 0  # jobs placed
        self.handed_back = False  # a placed job with pods left was handed back to the job queue
        # With verify, what the rest of the walk writes, worked out without walking it (`replayed_tail`),
        # and the jobs placed before it.
        self.tail: tuple[list[dict[str, str]], int] | None = None

    def step(self, job: JobInfo) -> bool:
        """Take up `job`: whether its attempt placed pods."""
        # (Most jobs of a deep backlog end at `failed_shapes`: what comes before is kept lean, the job's
        # signatures read as numbers from its kept facts.)
        session, holds = self.session, self.holds
        self.acted_on += 1
        facts = self._facts_to_look_up(job)
        if holds is not None:
            tasks = tasks_to_allocate(session, job)
            # Capacity held for a job that cannot start (reservation and backfill) is a node filter
            # that reads how long the pods run: part of what makes attempts alike.
            held = holds.signature(job, tasks)
        else:
            tasks, held = None, None
        if facts is None:
            if self.verify and self.use_signatures:
                self._check_unlike(job, held)
        else:
            first = self.failed_shapes.get(_with_held(facts.signature, held))
            if first is not None:
                self._failed_like(facts.key, first)
                return False
        if tasks is None:
            tasks = tasks_to_allocate(session, job)
        if not admissible(session, job, tasks):
            self._failed(job, tasks, facts, held)
            return False
        shape = self._shape(facts, held) if facts is not None else None
        earlier = self.no_room.get(shape) if shape is not None else None
        if earlier is not None:
            assert facts is not None
            self._failed_as(job, tasks, facts.key, earlier)
            self._failed(job, tasks, facts, held)
        else:
            outcome = self._attempt(job, tasks)
            if outcome is None:
                self.placed += 1
                if holds is not None:
                    holds.job_placed(job, tasks)
                return True
            self._failed(job, tasks, facts, held, outcome)
        if holds is not None:
            holds.job_unplaced(job, tasks, planner_for(session))
        return False

    def _facts_to_look_up(self, job: JobInfo) -> JobFacts | None:
        """`job`'s facts, when the walk may have noted an attempt alike (`failed_shapes`, `no_room`): else
        None, and they are made only if it fails (`_failed`). Why: a first cycle places nearly every job
        it takes up, and making the facts of each (its signatures numbered) was a twentieth of the walk.
        A job whose next attempt is one pod is alike only to an attempt of one pod with its placement
        key (both signatures hold each pod's): the walk notes those keys (`failed_placements`)."""
        if not self.use_signatures:  # (read only by the look-ups and what a failure notes)
            return None
        facts = self.facts.kept(job, self.names)
        if facts is not None:
            return self.facts.of(self.session, job, self.names) if self.verify else facts
        tasks = kept_tasks(self.session, job)
        if len(tasks) == 1 and tasks[0].placement.key not in self.failed_placements:
            return None
        return self.facts.made(self.session, job, self.names, tasks)

    def _shape(self, facts: JobFacts, held: Hashable | None) -> Hashable | None:
        """The key of `no_room` of a job of `facts` (None: attempts are not alike without their queue)."""
        if not self.use_signatures or self.session.points.queue_bound_placement:
            return None
        return _with_held(facts.shape, held)

    def _failed(
        self,
        job: JobInfo,
        tasks: list[TaskInfo],
        facts: JobFacts | None,
        held: Hashable | None,
        outcome: _NoRoom | None = None,
    ) -> None:
        """Note that `job`'s attempt of `tasks` failed (refused by its queue, or `outcome`: it found no
        room), for the jobs alike that come after it, with its facts (made now if not yet: the job's pods
        are as they were before the attempt, which places nothing that stays)."""
        if not self.use_signatures:
            return
        if facts is None:
            facts = self.facts.made(self.session, job, self.names)
        if len(tasks) == 1:
            self.failed_placements.add(tasks[0].placement.key)
        if outcome is not None:
            shape = self._shape(facts, held)
            if shape is not None:
                # (With capacity held, more than a job's pods decides where they go.)
                self.no_room[shape] = (
                    outcome if self.holds is None else _NoRoom(outcome.job, outcome.placed, None, None, 0)
                )
        self.failed_shapes[_with_held(facts.signature, held)] = facts.key

    def _check_unlike(self, job: JobInfo, held: Hashable | None) -> None:
        """With `verify`: a job whose facts the walk does not make (`_facts_to_look_up`) is alike to no
        attempt it noted, and a difference raises `CarriedMismatch`."""
        facts = self.facts.of(self.session, job, self.names)
        shape = self._shape(facts, held)
        if _with_held(facts.signature, held) in self.failed_shapes or (
            shape is not None and shape in self.no_room
        ):
            raise CarriedMismatch(
                f"{job.key}: its attempt, taken as alike to none that failed in the walk (its pod's "
                "placement key is none of theirs), is alike to one"
            )

    def replayed(self, jobs: list[JobInfo]) -> list[dict[str, str]] | None:
        """What this walk over `jobs` would write, by job key, worked out without walking when it would
        try nothing (`walk_replay`); None when it may try something, or when holds or queue-bound
        placements make what it tries depend on more than the jobs' pods."""
        session, failures, kept = self.session, self.failures, self.session.quiet_leaves
        if (
            kept is None
            or failures is None
            or self.holds is not None
            or not self.use_signatures
            or session.points.queue_bound_placement
        ):
            return None
        return walk_replay.reasons(session, jobs, self.facts, self.names, failures, kept)

    def replayed_tail(self, jobs: list[JobInfo], left: KeyedJobs) -> list[dict[str, str]] | None:
        """What the rest of this walk over `jobs`, the jobs `left`, would write, by job key, worked out
        without walking when it would try nothing (`walk_replay.tail_reasons`); None when it may, or as
        `replayed`. (A cycle after a pod completes places a pod in its first steps, then walks a
        backlog that places nothing.)"""
        session, failures, kept = self.session, self.failures, self.session.quiet_leaves
        if (
            kept is None
            or failures is None
            or not failures.may_know_some()  # (a first cycle: its rest may mostly place, so it is walked)
            or self.handed_back
            or self.holds is not None
            or not self.use_signatures
            or session.points.queue_bound_placement
        ):
            return None
        placed = self.placed
        no_room = {
            shape: (earlier.first_pod if earlier.placed == placed else None, earlier.job)
            for shape, earlier in self.no_room.items()
        }
        walked = walk_replay.WalkedSoFar(self.failed_shapes, no_room)
        return walk_replay.tail_reasons(session, jobs, left, self.facts, self.names, failures, kept, walked)

    def write(self, jobs: int, replayed: list[dict[str, str]]) -> None:
        """Write what the walk over `jobs` jobs would (`replayed`, leaf by leaf) instead of walking."""
        unschedulable = self.session.unschedulable
        for leaf_reasons in replayed:
            unschedulable.update(leaf_reasons)
        self.acted_on += jobs

    def _failed_like(self, key: str, first: str) -> None:
        """Write why the job `key` did not fit: as `first`, the first job of its shape, did not (one text
        for all of them while `first`'s reason stays: a deep backlog has thousands of jobs of a few
        shapes)."""
        unschedulable = self.session.unschedulable
        why = unschedulable.get(first, UNSAID)
        worded = self.alike.get(first)
        if worded is None or worded[0] is not why:
            worded = self.alike[first] = (why, failed_like(first, why))
        unschedulable[key] = worded[1]

    def _failed_as(self, job: JobInfo, tasks: list[TaskInfo], key: str, earlier: _NoRoom) -> None:
        """Write why the job `key` did not fit, its attempt shaped like `earlier`, which found no node:
        as its own attempt would write it when that attempt would fail as the earlier one did (the first
        pods alike, the earlier one's found no node, and nothing was placed since), else as `earlier`'s
        job did not (`_failed_like`). (Its own words are the same whichever job of its shape came first,
        so what a walk that places nothing writes does not depend on the order it hands out the jobs in:
        `walk_replay` writes it without the walk.)"""
        session = self.session
        if earlier.first_pod is not None and earlier.placed == self.placed:
            task = SessionFailures.first_pod(session, job, tasks)
            if task is not None and earlier.first_pod == (task.request, task.placement.key):
                if (
                    earlier.detail is not None
                    and earlier.position == session.snapshot.nodes.change_position()
                ):
                    # (`explain_no_fit` as it would give it: the earlier pod's count, nothing changed since.)
                    detail = session.pre_predicate_failure(task) or earlier.detail
                else:
                    detail = session.explain_no_fit(task)
                session.unschedulable[key] = no_fit_words(task, tasks, detail)
                return
        self._failed_like(key, earlier.job)

    def _attempt(self, job: JobInfo, tasks: list[TaskInfo]) -> _NoRoom | None:
        """`place_job_tasks` (None: it placed the pods), unless the attempt is known to find no node
        (`placement_failures`): then what the attempt would write is written without making it."""
        session, failures = self.session, self.failures
        # The first pod is read before the attempt when an attempt may be known to find no node, or when
        # a failed attempt may leave moved what it reads (a gang's pods placed and taken back may have put
        # inter-pod rules in play); else only once the attempt failed: one pod that finds no node places
        # nothing, and a first cycle places nearly every job it tries.
        ahead = len(tasks) > 1 or (failures is not None and failures.may_know_some())
        task = SessionFailures.first_pod(session, job, tasks) if ahead else None
        if task is not None and failures is not None and failures.fails_again(task):
            refusal = session.pre_predicate_failure(task)
            detail = refusal if refusal is not None else session.explain_no_fit(task)
            reason = no_fit_words(task, tasks, detail)
            if session.verify_carried:
                _check_no_room(session, job, tasks, self.action, reason)
            session.unschedulable[job.key] = reason
            # (A pod's refusal is its own: the pods alike are explained each.)
            counted = detail if refusal is None else None
            position = session.snapshot.nodes.change_position()
            return _NoRoom(job.key, self.placed, (task.request, task.placement.key), counted, position)
        self.attempts += 1
        if place_job_tasks(session, job, tasks, self.action):
            return None
        if not ahead:
            task = SessionFailures.first_pod(session, job, tasks)
        found_none = task is not None and first_pod_found_none(session, tasks)
        if found_none and failures is not None:
            failures.found_no_node(tasks)
        first_pod = (task.request, task.placement.key) if found_none and task is not None else None
        return _NoRoom(job.key, self.placed, first_pod, None, 0)

    def in_quiet_order(self, jobs: list[JobInfo], reads: Callable[[JobInfo], Hashable]) -> None:
        """Take up `jobs` in the job queue's order worked out as a merge (`QuietOrder`) while nothing
        moves; from the first step that moved an allocation (it placed pods, or an attempt rolled back
        left other bits) with a job queue of the jobs left, in the state the walk's queue would be in,
        and back to the quiet order once `_CALM_POPS` jobs in a row placed nothing (at most
        `_MOST_RETURNS` times). With `verify` a job queue of every job is popped alongside, and a job it
        does not hand out raises `CarriedMismatch`."""
        session = self.session
        check = QueueOrderedJobs(session, jobs) if session.verify_carried else None
        returns, keyed = 0, keyed_by_leaf(session, jobs)
        while True:
            # (The first order is of every waiting job: its leaves' orders are kept for the next cycle.)
            order = QuietOrder(session, keyed, reads, self.facts if returns == 0 else None)
            rest = self._until_moved(order, check)
            if rest is None:
                break
            left = self.take_up(rest, check, _CALM_POPS if returns < _MOST_RETURNS else None)
            if left is None:
                return
            if self.tail is None and returns == 0:
                tail = self.replayed_tail(jobs, left)
                if tail is not None:
                    if check is None:
                        self.write(sum(len(entries) for entries in left.values()), tail)
                        return
                    self.tail = (tail, self.placed)  # (checked once the walk is made: `_check_replayed`)
            keyed, returns = left, returns + 1
        if check is not None:
            _check_same(check.pop(), None)

    def _until_moved(self, order: QuietOrder, check: QueueOrderedJobs | None) -> QueueOrderedJobs | None:
        """Take up the jobs of `order` until a step moves an allocation: then the job queue of the jobs
        left (None: every job was taken up)."""
        session = self.session
        # (Nothing moved since the order was made, so each queue's allocation before a step is the one now.)
        unmoved = {queue: _chain_allocation(session, queue) for queue in order.leaves()}
        for job in order:
            if check is not None:
                _check_same(check.pop(), job)
            attempts = self.attempts
            placed = self.step(job)
            if placed or (
                attempts != self.attempts and _chain_allocation(session, job.queue) != unmoved[job.queue]
            ):
                rest = QueueOrderedJobs.of_keyed(session, order.remaining())
                if placed and job.has_pending():
                    self.handed_back = True
                    rest.push(job)
                    if check is not None:
                        check.push(job)
                return rest
        return None

    def take_up(
        self, queue: QueueOrderedJobs, check: QueueOrderedJobs | None, calm: int | None = None
    ) -> KeyedJobs | None:
        """Take up the jobs `queue` hands out, a placed one with pods left handed back, until it runs out
        (None), or (`calm` given) until that many jobs in a row placed nothing: then the jobs left. With
        `check`, a job queue popped and pushed alike (`verify`)."""
        quiet = 0
        while (job := queue.pop()) is not None:
            if check is not None:
                _check_same(check.pop(), job)
            if not self.step(job):
                quiet += 1
                if quiet == calm:
                    return queue.waiting_keyed()
                continue
            quiet = 0
            if job.has_pending():
                self.handed_back = True
                queue.push(job)
                if check is not None:
                    check.push(job)
        if check is not None:
            _check_same(check.pop(), None)
        return None

    def end(self) -> None:
        self.session.counts[self.action].acted_on += self.acted_on
        if self.holds is not None:
            self.holds.end_action()
        if self.failures is not None:
            self.failures.end()


def _with_held(number: int, held: Hashable | None) -> Hashable:
    """A signature's number, with what capacity held reads of the job's pods when any is (`holds`)."""
    return number if held is None else (number, held)


def _chain_allocation(session: Session, queue: str) -> list[tuple[float, float, float]]:
    """The allocation of `queue` and its ancestors, as the job queue compares them (`job_queue`)."""
    queues = session.snapshot.queues
    if queue not in queues:
        return []
    return [allocation_of(q) for q in queues.ancestry(queue)]


def _check_same(expected: JobInfo | None, handed_out: JobInfo | None) -> None:
    if expected is not handed_out:
        raise CarriedMismatch(
            f"allocate's walk in the quiet order handed out {_named(handed_out)} where the job queue "
            f"hands out {_named(expected)}"
        )


def _check_replayed(session: Session, walk: _Walk, replayed: list[dict[str, str]], placed: int = 0) -> None:
    """The walk just made against what was worked out without it (`replayed`): it placed nothing (but the
    jobs `placed` before what was worked out), and wrote the same reason for each job."""
    if walk.placed != placed:
        raise CarriedMismatch(
            f"allocate's walk, worked out without walking as placing nothing, placed {walk.placed - placed} "
            "jobs"
        )
    unschedulable = session.unschedulable
    for leaf_reasons in replayed:
        for key, reason in leaf_reasons.items():
            made = unschedulable.get(key)
            if made != reason or code_of(made) != code_of(reason):
                raise CarriedMismatch(
                    f"{key}: its reason worked out without walking ({reason!r}) differs from the one the "
                    f"walk wrote ({made!r})"
                )


def _named(job: JobInfo | None) -> str:
    return "no job" if job is None else job.key


def _check_no_room(session: Session, job: JobInfo, tasks: list[TaskInfo], action: str, reason: str) -> None:
    placed = place_job_tasks(session, job, tasks, action)
    made = session.unschedulable.get(job.key)
    if placed or made != reason or code_of(made) != code_of(reason):
        raise CarriedMismatch(
            f"{job.key}: its attempt, carried from the last cycle as finding no node ({reason!r}), "
            f"{'placed it' if placed else f'failed otherwise ({made!r})'} when made again"
        )


def place_job_tasks(session: Session, job: JobInfo, tasks: list[TaskInfo], action: str) -> bool:
    """One all-or-nothing attempt to place `tasks` of `job`; records why it failed."""
    if LONE_POD_SHORTCUT and len(tasks) == 1 and _lone_plain_pod(session, job, tasks[0]):
        return _place_lone_pod(session, job, tasks[0], action)
    released = [task for task in tasks if session.state.release_reservation(task)]
    statement = session.statement(action)
    nodes = session.snapshot.nodes

    def place_one(task: TaskInfo) -> str | None:
        placed = session.choose_node(task)
        if placed is None:
            # Explain before rolling back: the pods already placed are part of why this one does not fit.
            return does_not_fit(session, task, tasks)
        reason = _placed_reason(job, nodes.names[placed.node], now=placed.now)
        if placed.now:
            statement.allocate(task, placed.node, placed.gpu_groups, reason)
        else:
            statement.pipeline(task, placed.node, placed.gpu_groups, reason)
        return None

    failure = place_job(session, statement, job, tasks, place_one)
    if failure is not None:
        statement.discard()
        session.unschedulable[job.key] = failure
        for task in released:
            session.state.restore_reservation(task)
        return False
    if any(task.status is _PIPELINED for task in tasks):
        statement.convert_to_pipeline(0)
    statement.commit()
    session.unschedulable.pop(job.key, None)
    return True


def _lone_plain_pod(session: Session, job: JobInfo, task: TaskInfo) -> bool:
    """Whether an attempt of the one pod `task` is placed as `place_job` places a plain pod set (at the top
    of its job's tree, no topology constraint, nothing to confine it to) holding no reservation: then it
    is one placement that happens or not, with nothing to roll back."""
    podset = task.podset
    return (
        podset.parent is None
        and podset.topology is None
        and not session.state.holds_reservation(task)
        and session.node_subsets(job, None, (task,)) is None
    )


def _place_lone_pod(session: Session, job: JobInfo, task: TaskInfo, action: str) -> bool:
    """`place_job_tasks` of the one pod `task` (`_lone_plain_pod`), without a statement: placed and
    recorded as a statement holding only it would place and commit it. Why: most jobs are one pod, and
    a statement's making, operation, checkpoint and commit were a tenth of such a job's attempt."""
    placed = session.choose_node(task)
    if placed is None:
        session.unschedulable[job.key] = does_not_fit(session, task, [task])
        return False
    node, groups = placed.node, placed.gpu_groups
    reason = _placed_reason(job, session.snapshot.nodes.names[node], now=placed.now)
    if placed.now:
        session.state.place(task, node, groups, _ALLOCATED)
        decision = committed_placement(session, action, "bind", task, node, groups, reason)
    else:
        session.state.place(task, node, groups, _PIPELINED)
        decision = committed_placement(session, action, "pipeline", task, node, groups, reason)
    session.record((decision,))
    session.unschedulable.pop(job.key, None)
    return True


def _placed_reason(job: JobInfo, where: str, *, now: bool) -> str:
    """Why a pod of `job` was bound (`now`) or pipelined on the node `where`."""
    if now:
        return f"{job.key} (queue {job.queue}) fits on {where}"
    return f"{job.key} (queue {job.queue}) waits for resources being released on {where}"
