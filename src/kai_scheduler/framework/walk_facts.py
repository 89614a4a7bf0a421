"""What allocate's walk reads of each job it takes up that only the job decides, kept per job version
and carried from one cycle to the next (issue #23, point 1: a trickle cycle takes up ~7,900 waiting jobs
that mostly fail as in the last cycle, at some 10 us each).

Allocate asks every job it hands out its scheduling signature with its queue (`gang.next_signature`: a
job shaped like one that failed is not tried), most of them the signature without it (the shape that
found no node), and writes its reason by its key. Both signatures are tuples of tuples, hashed again at
every look-up of the walk's failed shapes, and a job's key is formatted at every ask; so each is kept
here once a version: the signatures as small numbers, one per distinct signature (`_ids`: equal
signatures, one number), and the key as text.

A signature reads the job's pods (its `version` moves with their statuses and nominations) and what the
node filters read of the pods (`ExtensionPoints.signature_reads`, by name, as `next_signature` keeps
them); the facts are kept with the version and those names. With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`)
every kept fact read is worked out again, and a difference raises `CarriedMismatch`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from kai_scheduler.framework.gang import kept_tasks, next_signature, scheduling_signature
from kai_scheduler.model.jobs import JobInfo, TaskInfo

if TYPE_CHECKING:
    from kai_scheduler.framework.session import Session

# Numbered signatures kept beyond this many per job kept (and a floor) start the numbering afresh: ended
# jobs' signatures do not pile up.
_IDS_PER_JOB = 4
_IDS_FLOOR = 1024


class JobFacts:
    """One job's facts at `version` for the signature reads named `names`: its key, and its signature's
    number with its queue (`signature`) and without (`shape`)."""

    __slots__ = ("key", "names", "shape", "signature", "version")

    def __init__(
        self, version: int, names: tuple[Hashable, ...], key: str, signature: int, shape: int
    ) -> None:
        self.version = version
        self.names = names
        self.key = key
        self.signature = signature
        self.shape = shape


class WalkFacts:
    """The facts of the jobs allocate takes up (see the module doc), carried across cycles."""

    __slots__ = ("_ids", "_lone_shapes", "_names", "_orders", "by_job")

    def __init__(self) -> None:
        self.by_job: dict[JobInfo, JobFacts] = {}
        # Per leaf queue, the job order keys of its waiting jobs as the walk was given them (snapshot
        # order), and the positions that sort them (`sorting`).
        self._orders: dict[str, tuple[list[tuple[Any, ...]], list[int]]] = {}
        # Signatures without the queue (the shapes) numbered by the whole signature, signatures with it
        # by the queue's part and the shape's number (`_by_queue`), one number a distinct key.
        self._ids: dict[tuple[Any, ...], int] = {}
        # The shapes' numbers of the jobs of one pod by the fields their shapes are made of (`_numbers`),
        # numbered afresh with `_ids`.
        self._lone_shapes: dict[tuple[Hashable, ...], int] = {}
        # The names of the signature reads facts were last made for, one object while they stay equal.
        self._names: tuple[Hashable, ...] = ()

    def start(self, session: Session) -> tuple[Hashable, ...]:
        """Open a walk of `session`: the names its facts are kept for (compared by identity: one object
        while they stay), ended jobs' facts forgotten once they are many."""
        names = tuple(name for name, _ in session.points.signature_reads)
        if names != self._names:
            self._names = names
        jobs = session.snapshot.jobs
        by_job = self.by_job
        if len(by_job) > 2 * len(jobs):
            for job in [job for job in by_job if jobs.get(job.key) is not job]:
                del by_job[job]
        if len(self._ids) > _IDS_PER_JOB * len(by_job) + _IDS_FLOOR:
            self._ids, self._lone_shapes = {}, {}
            by_job.clear()
        return self._names

    def of(self, session: Session, job: JobInfo, names: tuple[Hashable, ...]) -> JobFacts:
        """`job`'s facts (`names`: what `start` gave), kept while its version and the names stay."""
        facts = self.kept(job, names)
        if facts is None:
            return self.made(session, job, names)
        if session.verify_carried:
            self._check(session, job, facts)
        return facts

    def kept(self, job: JobInfo, names: tuple[Hashable, ...]) -> JobFacts | None:
        """`job`'s facts kept, while its version and the names stay; None otherwise."""
        facts = self.by_job.get(job)
        if facts is None or facts.version != job.version or facts.names is not names:
            return None
        return facts

    def made(
        self,
        session: Session,
        job: JobInfo,
        names: tuple[Hashable, ...],
        tasks: list[TaskInfo] | None = None,
    ) -> JobFacts:
        """`job`'s facts made now and kept (for a caller that found none kept at its version); `tasks`:
        the pods of its next attempt as kept (`kept_tasks`), when the caller has them at hand (allocate's
        walk makes the facts of each of the thousands of jobs of a deep backlog's last stretch)."""
        signature, shape = self._numbers(session, job, names, tasks)
        facts = self.by_job[job] = JobFacts(job.version, names, job.key, signature, shape)
        return facts

    def _numbers(
        self, session: Session, job: JobInfo, names: tuple[Hashable, ...], tasks: list[TaskInfo] | None
    ) -> tuple[int, int]:
        """The numbers of `job`'s signature with its queue and without. A job whose next attempt is one
        pod (most jobs), with no topology and nothing read of its pods, has a shape made of a few of its
        fields and its pod's (`scheduling_signature`): those key its number (`_lone_shapes`), so that jobs
        alike have their shapes made and hashed once (a first cycle at 5,000 nodes has 15,400 such jobs,
        of some 900 shapes and 7,200 signatures)."""
        if not names:
            if tasks is None:
                tasks = kept_tasks(session, job)
            if len(tasks) == 1 and not job.has_topology():
                task = tasks[0]
                pod = (job.is_gang_satisfied(), task.request, task.placement.key, task.nominated_node)
                shape = self._lone_shapes.get(pod)
                if shape is None:
                    shape = self._lone_shapes[pod] = self._number(
                        scheduling_signature(job, tasks, by_queue=False)
                    )
                signature = self._by_queue(job, shape)
                if session.verify_carried and (signature, shape) != self._numbered(session, job):
                    from kai_scheduler.framework.job_memos import CarriedMismatch

                    raise CarriedMismatch(
                        f"{job.key}: its signatures' numbers, kept for the jobs of one pod alike "
                        f"{(signature, shape)!r}, differ from those of its own signatures"
                    )
                return signature, shape
        return self._numbered(session, job)

    def _numbered(self, session: Session, job: JobInfo) -> tuple[int, int]:
        """`_numbers` of the job's own signatures."""
        shape = self._number(next_signature(session, job, by_queue=False))
        return self._by_queue(job, shape), shape

    def _by_queue(self, job: JobInfo, shape: int) -> int:
        """The number of `job`'s signature with its queue, whose signature without it is numbered `shape`:
        numbered by the queue's part (`scheduling_signature`'s first item, the only one `by_queue` moves)
        and `shape`, which make the signature, rather than by the whole signature hashed again (a first
        cycle at 5,000 nodes numbers 7,200 signatures with their queues), the items in one tuple: no tuple
        within it to make and hash."""
        return self._number((job.queue, job.preemptible, job.priority, shape))

    def sorting(self, leaf: str, keys: list[tuple[Any, ...]], *, keep: bool, verify: bool) -> list[int]:
        """The positions of `keys` (the job order keys of `leaf`'s waiting jobs, as given) in ascending
        order: the last cycle's while they are the same keys in the same order (compared by identity
        first: a key is kept per job version), else sorted now (and kept, with `keep`). Why: a trickle
        cycle's walk gives the same ~7,900 jobs in the same order but a few, and sorting them by their
        keys (tuples that mostly tie on their first items) cost some 5 ms a cycle."""
        kept = self._orders.get(leaf)
        if kept is not None and kept[0] == keys:
            positions = kept[1]
            if verify and [keys[i] for i in positions] != sorted(keys):
                from kai_scheduler.framework.job_memos import CarriedMismatch

                raise CarriedMismatch(f"queue {leaf}: its jobs' order kept from the last cycle is not sorted")
            return positions
        positions = sorted(range(len(keys)), key=keys.__getitem__)
        if keep:
            self._orders[leaf] = (keys, positions)
        return positions

    def _number(self, signature: tuple[Any, ...]) -> int:
        ids = self._ids
        number = ids.get(signature)
        if number is None:
            number = ids[signature] = len(ids)
        return number

    def _check(self, session: Session, job: JobInfo, facts: JobFacts) -> None:
        from kai_scheduler.framework.gang import fresh_tasks_to_allocate
        from kai_scheduler.framework.job_memos import CarriedMismatch

        tasks = fresh_tasks_to_allocate(session, job)
        reads = session.points.signature_reads
        signature = scheduling_signature(job, tasks, reads=reads)
        shape = scheduling_signature(job, tasks, by_queue=False, reads=reads)
        if signature[1:] != shape[1:]:
            raise CarriedMismatch(f"{job.key}: its signatures with its queue and without differ beyond it")
        number = self._ids.get(shape)
        fresh = (job.key, self._ids.get((*signature[0], number)), number)
        if fresh != (facts.key, facts.signature, facts.shape):
            raise CarriedMismatch(
                f"{job.key}: allocate's facts of it kept at version {facts.version} (key, signature "
                f"numbers {(facts.key, facts.signature, facts.shape)!r}) differ from those worked out "
                f"again ({fresh!r})"
            )
