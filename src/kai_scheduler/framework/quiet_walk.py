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

from collections.abc import Collection, Hashable
from dataclasses import dataclass

from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import PodRequest

# A job's part in its leaf (`LeafOutcome.parts`): the place (in `order`) of the earlier job of its queue it
# fails like, or one of these.
REFUSED = -1  # its queue's checks refuse its attempt
NO_NODE = -2  # its first pod finds no node


@dataclass(slots=True)
class LeafOutcome:
    """One leaf queue's waiting jobs as a walk in which nothing was tried leaves them (module doc)."""

    jobs: list[JobInfo]  # as given (snapshot order)
    versions: list[int]
    capacity: Hashable  # what the capacity checks read for the queue (`Session.queue_capacity_inputs`)
    order: list[int]  # the places of `jobs` in job order
    keys: list[str]  # by place in job order, as all that follow
    parts: list[int]
    refusals: list[str | None]  # why the queue refuses a job whose part is REFUSED
    # The first pod and the pods of each job whose part is NO_NODE, and its pod shape
    first_pods: list[tuple[TaskInfo, list[TaskInfo], tuple[PodRequest, str]] | None]
    shapes: list[int]  # each job's signature without its queue, as numbered (`WalkFacts`)
    # The words last written, with what they were worked out from (a NO_NODE job: the explanation of its
    # first pod; a job that fails like an earlier one: that one's words).
    written: list[tuple[str, str] | None]
    # The reasons last written for the whole leaf (by job key, in job order) and the explanations they
    # were worked out from (None: to be worked out; never kept when a reason quotes the session's).
    leaf_words: list[tuple[str, str]] | None
    leaf_words_from: list[str | None] | None
    # Of each NO_NODE job's first pod: why a pre-predicate refuses it, whether its nodes read other pods;
    # worked out at `answers_key` (`Session.pod_answers_key`; None: not kept).
    answers: list[tuple[str | None, bool] | None]
    answers_key: Hashable | None


class QuietLeaves:
    """The leaves' outcomes, carried from one session to the next (`JobMemos`), with the signature reads
    and the cluster's largest GPU memory they were worked out at (the facts and admissions read them)."""

    __slots__ = ("by_leaf", "confirmed", "most_memory", "names")

    def __init__(self) -> None:
        self.by_leaf: dict[str, LeafOutcome] = {}
        self.names: tuple[Hashable, ...] = ()
        self.most_memory = 0.0
        # The leaves whose outcome this session found its jobs at (`actions.walk_replay`).
        self.confirmed: set[str] = set()

    def settle(self, touched: Collection[JobInfo]) -> None:
        """The session is over: a leaf with a job `touched` (placed, evicted or ungated) is forgotten; the
        other leaves this session found its jobs at (`confirmed`) hold them as the session found them,
        their versions moved only by attempts undone (a statement discarded restores a job's pods but
        moves its version), so those outcomes are kept at the versions the jobs have now. (A leaf not
        confirmed keeps the versions it was made at: its jobs may have changed since.)"""
        for leaf in self.confirmed:
            outcome = self.by_leaf.get(leaf)
            if outcome is not None:
                outcome.versions = [job.version for job in outcome.jobs]
        for job in touched:
            outcome = self.by_leaf.get(job.queue)
            if outcome is not None and job in outcome.jobs:
                del self.by_leaf[job.queue]
        self.confirmed = set()
