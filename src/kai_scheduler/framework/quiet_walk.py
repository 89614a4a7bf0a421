"""What allocate's walk found of each leaf queue's waiting jobs, carried to the next cycle for its replay
(`actions.walk_replay`; issue #23, point 1: a cycle after one change costs what changed).

In a walk in which nothing is placed and nothing is tried (every attempt is known to find no node), how a
job ends does not depend on the order the queues hand their jobs out in: a job shaped like an earlier
one of its queue quotes that one's reason; a job its queue refuses says why; any other job says why its
own first pod finds no node (the same words whichever job of its shape came first). `LeafOutcome` keeps
what that takes per leaf queue: its jobs as the walk was given them, each one's part, and the words
written for it, so that a leaf nothing changed in is written again from them.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass

from kai_scheduler.model.job_changes import JobChangeMark
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import PodRequest

# A job's part in its leaf (`LeafOutcome.parts`): the place (in `order`) of the earlier job of its queue it
# fails like, or one of these.
REFUSED = -1  # its queue's checks refuse its attempt
NO_NODE = -2  # its first pod finds no node
QUOTED = -3  # it quotes a job of its leaf alike that the walk handed out before (`LeafOutcome.quoting`)


@dataclass(slots=True, frozen=True)
class FirstPod:
    """The first pod an attempt of a NO_NODE job tries, which finds no node."""

    task: TaskInfo
    tasks: list[TaskInfo]  # the attempt's pods
    shape: int  # the number of its pod shape, its request and placement key (`QuietLeaves.pod_shape`)
    head: str  # its reason's words before why the pod does not fit (`walk_reasons.no_fit_head`)


@dataclass(slots=True)
class LeafOutcome:
    """One leaf queue's waiting jobs as a walk in which nothing was tried leaves them (module doc)."""

    jobs: list[JobInfo]  # as given (snapshot order)
    capacity: Hashable  # what the capacity checks read for the queue (`Session.queue_capacity_inputs`)
    order: list[int]  # the places of `jobs` in job order
    keys: list[str]  # by place in job order, as all that follow
    parts: list[int]
    # The places whose part is REFUSED or NO_NODE (a job of either keeps its kind of part: a change of
    # what its queue's checks read moves it between the two), and of each, its key and the keys of the
    # jobs that fail like it (written with one text each, not job by job; None: none).
    firsts: list[int]
    first_keys: list[str]
    followers: list[list[str] | None]
    refusals: list[str | None]  # why the queue refuses a job whose part is REFUSED
    first_pods: list[FirstPod | None]  # of each job whose part is NO_NODE
    shapes: list[int]  # each job's signature without its queue, as numbered (`WalkFacts`)
    # The words last written for a NO_NODE job (by place), and the explanation of its first pod they were
    # worked out from.
    written: list[str | None]
    written_from: list[str | None]
    # The reasons last written for the whole leaf, by job key, and the explanations by pod shape they
    # were worked out from (`PodShapes.open_pods`'; None: to be worked out; never kept when a reason
    # quotes the session's).
    leaf_words: dict[str, str] | None
    leaf_words_from: dict[int, str] | None
    # Of each NO_NODE job's first pod: why a pre-predicate refuses it, whether its nodes read other pods;
    # worked out at `answers_key` (`Session.pod_answers_key`; None: not kept).
    answers: list[tuple[str | None, bool] | None]
    answers_key: Hashable | None
    # What the NO_NODE jobs come to by pod shape, at these answers and parts (None: to be worked out).
    pods: PodShapes | None = None
    # Of the jobs left of a leaf part-way through a walk (`walk_replay.tail_reasons`): the keys of the jobs
    # the walk handed out before that QUOTED jobs quote, each with theirs (None: none).
    quoting: dict[str, list[str]] | None = None
    # The reasons last written for the whole leaf with what each first job's were worded from, to write
    # the next ones from (`SaidLast`; None: none written yet).
    said: SaidLast | None = None


@dataclass(slots=True)
class SaidLast:
    """A leaf's reasons as last written (`words`, by job key), and per job of `LeafOutcome.firsts` the text
    its followers' reason was worded from (`texts`) and whether the job's own reason is among `words`
    (`own`: a job its queue refused with nothing said has none of its own). The next writing starts from
    a copy of `words` and writes again only the reasons of the first jobs whose text is another object:
    a cordon changes every NO_NODE job's words, not those of the jobs the queues refuse (nearly half of a
    backlog's)."""

    words: dict[str, str]
    texts: list[str | None]
    own: list[bool]


@dataclass(slots=True)
class PodShapes:
    """A leaf's NO_NODE jobs by the pod shape (request, placement key) of their first pod: what is asked
    of the nodes once a pod shape, not once a job (a backlog's thousands of jobs come in a few hundred
    shapes)."""

    # Each job shape's (`LeafOutcome.shapes`) pod shape, and whether one job shape had two: the walk
    # would word the second job as the first's, which depends on the order.
    pod_of_shape: dict[int, int]
    two_pods_of_a_shape: bool
    # Whether a first pod's nodes read other pods (its attempt reads more than its pods).
    reads_other_pods: bool
    # The pod shapes no pre-predicate refuses, each with the first pod met of it.
    open_pods: dict[int, FirstPod]


class QuietLeaves:
    """The leaves' outcomes, carried from one session to the next (`JobMemos`), with the signature reads
    and the cluster's largest GPU memory they were worked out at (the facts and admissions read them),
    and how far the cache's log of changed jobs had got for them (`model.job_changes`): an outcome holds
    while none of its jobs is noted there since (a job's pods placed or evicted in a session are noted
    once the cache takes the decision back; an attempt undone leaves them as they were)."""

    __slots__ = ("_pod_shapes", "by_leaf", "mark", "most_memory", "names")

    def __init__(self) -> None:
        self.by_leaf: dict[str, LeafOutcome] = {}
        self.names: tuple[Hashable, ...] = ()
        self.most_memory = 0.0
        self.mark: JobChangeMark | None = None
        self._pod_shapes: dict[tuple[PodRequest, str], int] = {}

    def pod_shape(self, task: TaskInfo) -> int:
        """The number of `task`'s pod shape (request and placement key), the same while outcomes are kept:
        the writing looks pod shapes up thousands of times a cycle, and a request hashes in Python."""
        shape = (task.request, task.placement.key)
        number = self._pod_shapes.get(shape)
        if number is None:
            number = self._pod_shapes[shape] = len(self._pod_shapes)
        return number

    def number_of(self, pod: tuple[PodRequest, str]) -> int | None:
        """The number of the pod shape `pod` (request and placement key; None: none numbered)."""
        return self._pod_shapes.get(pod)

    def forget(self) -> None:
        """Forget every leaf's outcome (and the pod shapes' numbers once they are many)."""
        self.by_leaf.clear()
        if len(self._pod_shapes) > _MOST_POD_SHAPES:
            self._pod_shapes.clear()

    def catch_up(self, mark: JobChangeMark | None, jobs: Mapping[str, JobInfo]) -> None:
        """Forget the outcome of each leaf one of whose jobs is noted since the last mark (all of them when
        that is not known), `jobs` being the snapshot's at `mark`. (A job gone from the snapshot or made
        again, or one that came to wait in a leaf, changes the leaf's jobs, which its writing finds; a job
        of the leaf's queue that is not among them, a running one, is not what the outcome read.)"""
        if mark == self.mark:
            return
        changed = mark.since(self.mark) if mark is not None else None
        self.mark = mark
        if changed is None:
            self.forget()
            return
        for key in changed:
            job = jobs.get(key)
            if job is not None:
                self._forget_leaf_of(job)

    def settle(
        self, touched: Collection[JobInfo], mark: JobChangeMark | None, jobs: Mapping[str, JobInfo]
    ) -> None:
        """The session (of the snapshot at `mark`, with `jobs`) is over: a leaf with a job `touched`
        (placed, evicted or ungated) is forgotten (the log notes it only from the next snapshot on)."""
        self.catch_up(mark, jobs)
        for job in touched:
            self._forget_leaf_of(job)

    def _forget_leaf_of(self, job: JobInfo) -> None:
        """Forget the outcome of `job`'s leaf when `job` is among its jobs."""
        outcome = self.by_leaf.get(job.queue)
        if outcome is not None and job in outcome.jobs:  # (JobInfo compares by identity)
            del self.by_leaf[job.queue]


# More pod shapes numbered than this, and the numbers start again when no outcome holds one.
_MOST_POD_SHAPES = 65_536
