"""What a session works out per job at a version, carried from one cycle's session to the next (issue #23,
point 1: a cycle after a small change costs what changed).

Every cycle every action asks two things of each waiting job: the pods of its next attempt
(`gang.tasks_to_allocate`) and its place in job order (`Session.job_order_key`); queue order asks the
first again for the job each queue would hand out, and what those pods add to the queue
(`gang.next_request`); allocate asks the pods' scheduling signature, with the job's queue and without
(`gang.next_signature`), of every job it hands out. The answers depend only on the job (what it is made
of, and its pods' statuses and nominations, which move its `version`), on the ordering plugins, which
are the same for every cycle of one `Scheduler`, and for the request on the cluster's smallest GPU
memory, kept with it. The cluster cache keeps a job's `JobInfo` across cycles until its pods or
PodGroup change (then it is a new object), so a job untouched since the last cycle gets the same
answers: on a 5,000-node cluster with 8,000 jobs waiting, a cycle after one pod arrived asks them again
of one job, not of all. Allocate's attempts whose first pod found no node are carried too
(`placement_failures`: not made again while no node that may differ since is a candidate).

`JobMemos` holds the answers keyed by the job object, each with the version it was worked out at, and
hands a session its dictionaries to read and fill (the session's own checks of the version stay as they
were within one cycle). It forgets the jobs the snapshot no longer has, so ended jobs do not pile up.

With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`, see `controlplane.unchanged_cycles`) every carried answer
the new session would read is worked out again when it opens, and a difference raises `CarriedMismatch`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from kai_scheduler.framework.kept_job_groups import KeptJobGroups
from kai_scheduler.framework.placement_failures import PlacementFailures
from kai_scheduler.framework.queue_order_memo import CarriedQueueOrder
from kai_scheduler.framework.queue_sums import CarriedQueueSums
from kai_scheduler.framework.quiet_walk import QuietLeaves
from kai_scheduler.framework.static_masks import StaticMasks
from kai_scheduler.framework.walk_facts import WalkFacts
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import JOB_GROUPS, ClusterSnapshot, JobsAtOpen

if TYPE_CHECKING:
    from kai_scheduler.framework.decisions import SessionResult
    from kai_scheduler.framework.session import Session


class CarriedMismatch(AssertionError):
    """An answer carried from the last cycle differs from the one worked out again (a bug: something the
    answer depends on changed without moving the job's version)."""


class JobMemos:
    """The per-job answers of the last cycle's session (see the module doc)."""

    __slots__ = (
        "admissions",
        "capacity_inputs",
        "carry",
        "fair_share_levels",
        "gang_refusals",
        "job_groups",
        "job_keys",
        "next_requests",
        "next_tasks",
        "placement_failures",
        "queue_orders",
        "queue_sums",
        "quiet_leaves",
        "shapes",
        "signatures",
        "static_masks",
        "verify",
        "walk_facts",
    )

    def __init__(self, *, verify: bool = False, carry: bool = True) -> None:
        self.next_tasks: dict[JobInfo, tuple[int, list[TaskInfo]]] = {}
        self.job_keys: dict[JobInfo, tuple[int, tuple[Any, ...]]] = {}
        self.next_requests: dict[JobInfo, tuple[int, float, Resources]] = {}
        self.signatures: dict[JobInfo, tuple[int, tuple[Any, ...]]] = {}
        self.shapes: dict[JobInfo, tuple[int, tuple[Any, ...]]] = {}
        self.admissions: dict[JobInfo, tuple[tuple[Hashable, ...], str | None]] = {}
        self.capacity_inputs: dict[Hashable, Hashable] = {}
        self.gang_refusals: dict[JobInfo, tuple[int, str | None]] = {}
        self.queue_sums = CarriedQueueSums()
        self.queue_orders = CarriedQueueOrder()
        self.fair_share_levels: dict[str, dict[str | None, tuple[Hashable, dict[str, float]]]] = {}
        self.job_groups = KeptJobGroups()
        self.placement_failures = PlacementFailures()
        self.static_masks = StaticMasks()
        self.walk_facts = WalkFacts()
        self.quiet_leaves = QuietLeaves()
        self.verify = verify
        self.carry = carry  # False: every session starts afresh (a full evaluation, for comparisons)

    def hand_to_plugins(self, session: Session) -> None:
        """Before `session`'s plugins open: what is carried for them to read and fill (the queue sums)."""
        if self.carry:
            session.queue_sums = self.queue_sums
            session.queue_orders = self.queue_orders
            session.fair_share_levels = self.fair_share_levels
            session.verify_carried = self.verify

    def hand_to(self, session: Session) -> None:
        """Let `session` (its plugins opened) read and fill the carried answers."""
        if not self.carry:
            return
        if self.verify:
            self._check(session)
        snapshot = session.snapshot
        at_open = self.job_groups.at_open(snapshot)
        if self.verify:
            _check_groups(snapshot, at_open)
        snapshot.offer_jobs_at_open(at_open)
        session.next_tasks = self.next_tasks
        session.job_keys = self.job_keys
        session.next_requests = self.next_requests
        session.signatures = self.signatures
        session.shapes = self.shapes
        session.admissions = self.admissions
        session.capacity_inputs = self.capacity_inputs
        session.gang_refusals = self.gang_refusals
        session.placement_failures = self.placement_failures
        session.walk_facts = self.walk_facts
        session.quiet_leaves = self.quiet_leaves
        self.static_masks.hand_to(session, verify=self.verify)
        session.verify_carried = self.verify

    def session_ended(self, session: Session, result: SessionResult) -> None:
        """What `session` decided (`result`): the jobs it placed, evicted or ungated are told to what is
        kept of allocate's walk (`QuietLeaves.settle`)."""
        if not self.carry:
            return
        tasks, jobs = session.snapshot.tasks, session.snapshot.jobs
        touched = {tasks[d.pod].job for d in result.decisions if d.pod in tasks}
        touched.update(jobs[u.job] for u in result.ungates if u.job in jobs)
        self.quiet_leaves.settle(touched, session.snapshot.job_changes, jobs)

    def keep_only(self, snapshot: ClusterSnapshot) -> None:
        """Forget the jobs that are not `snapshot`'s (ended, or made again as new objects) once a memo
        holds more jobs than the snapshot has: until then some of them may be gone, but the memos stay
        within twice the cluster's jobs, and a cycle that changed little does not walk them all."""
        jobs = snapshot.jobs
        memos: tuple[dict[JobInfo, Any], ...] = (
            self.next_tasks,
            self.job_keys,
            self.next_requests,
            self.signatures,
            self.shapes,
            self.admissions,
            self.gang_refusals,
        )
        for memo in memos:
            if len(memo) > len(jobs):
                gone = [job for job in memo if jobs.get(job.key) is not job]
                for job in gone:
                    del memo[job]

    def _check(self, session: Session) -> None:
        from kai_scheduler.framework.gang import fresh_tasks_to_allocate, request_of, scheduling_signature

        jobs = session.snapshot.jobs
        for job, (version, tasks) in self.next_tasks.items():
            if jobs.get(job.key) is job and version == job.version:
                fresh = fresh_tasks_to_allocate(session, job)
                if fresh != tasks:
                    raise CarriedMismatch(
                        f"{job.key}: the pods of its next attempt carried from the last cycle "
                        f"{[t.key for t in tasks]} differ from those worked out again "
                        f"{[t.key for t in fresh]}"
                    )
        for job, (version, key) in self.job_keys.items():
            if jobs.get(job.key) is job and version == job.version:
                fresh_key = session.fresh_job_order_key(job)
                if fresh_key != key:
                    raise CarriedMismatch(
                        f"{job.key}: its job order key carried from the last cycle {key!r} differs from "
                        f"the one worked out again {fresh_key!r}"
                    )
        smallest = session.snapshot.min_gpu_memory_mib
        for job, (version, memory, request) in self.next_requests.items():
            if jobs.get(job.key) is job and version == job.version and memory == smallest:
                fresh_request = request_of(session, fresh_tasks_to_allocate(session, job))
                if fresh_request != request:
                    raise CarriedMismatch(
                        f"{job.key}: what its next attempt adds to its queue, carried from the last cycle "
                        f"{request!r}, differs from what is worked out again {fresh_request!r}"
                    )
        for by_queue, memo in ((True, self.signatures), (False, self.shapes)):
            for job, (version, signature) in memo.items():
                if jobs.get(job.key) is job and version == job.version:
                    fresh_signature = scheduling_signature(
                        job,
                        fresh_tasks_to_allocate(session, job),
                        by_queue=by_queue,
                        reads=session.points.signature_reads,
                    )
                    if fresh_signature != signature:
                        raise CarriedMismatch(
                            f"{job.key}: the scheduling signature of its next attempt carried from the last "
                            f"cycle {signature!r} differs from the one worked out again {fresh_signature!r}"
                        )


def _check_groups(snapshot: ClusterSnapshot, at_open: JobsAtOpen) -> None:
    fresh = JobsAtOpen.of(snapshot.jobs.values())
    for name in JOB_GROUPS:
        carried, made = getattr(at_open, name), getattr(fresh, name)
        if len(carried) != len(made) or any(a is not b for a, b in zip(carried, made, strict=True)):
            raise CarriedMismatch(
                f"the {name.replace('_', ' ')} jobs carried from the last cycle {[j.key for j in carried]} "
                f"differ from those found again {[j.key for j in made]}"
            )
