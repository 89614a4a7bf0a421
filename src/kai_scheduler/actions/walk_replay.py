"""Allocate's walk written without walking, when it would place nothing and try nothing (issue #23,
point 1: a steady cycle after one change costs what changed, not the ~7,900 jobs of a backlog).

A walk over a deep backlog on a full cluster hands out every waiting job and places none. When every
attempt it would make is known to find no node (`SessionFailures.none_by_rows`: its pod shape found none
in the last cycle and no node that may differ since is a candidate), it tries nothing, and then what it
writes does not depend on the order it hands the jobs out in (`framework.quiet_walk`): per leaf queue, in
job order, a job shaped like an earlier job of the queue quotes that one's reason, a job the queue's checks
refuse says why, and any other says why its own first pod finds no node. So this module writes the same
without the walk's merge of the queues' orders, and per leaf queue from what it kept of the last cycle
(`LeafOutcome`) unless the queue's jobs or what its capacity checks read changed; what it asks of every
cycle is per pod shape (whether a node may take it now, the explanation) and per job the pre-predicates
and the words.

It does nothing (and the walk is made) unless every job it would write ends as above: a job whose first
pod is not known to find no node (a new shape, a node freed), a job whose attempt reads more than its pods
(topology, nomination, inter-pod rules), or two jobs of one shape whose first pods differ (the walk would
word the second as the first's, which depends on the order).
With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`) the walk is made as well, and a reason that differs raises
`CarriedMismatch` (`actions.allocate`).

The rest of a walk is written so too (`tail_reasons`): after a cycle's first steps placed a pod where one
completed, the jobs left that the walk would try nothing for end as above, but for what the steps before
left them to read (`WalkedSoFar`): the first failed job of each signature, and each job shape's first
attempt that found no node.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from kai_scheduler.actions.job_queue import KeyedJobs
from kai_scheduler.actions.queue_admission import admission
from kai_scheduler.actions.walk_reasons import UNSAID, failed_like, no_fit_after, no_fit_head
from kai_scheduler.framework.gang import tasks_to_allocate
from kai_scheduler.framework.placement_failures import SessionFailures
from kai_scheduler.framework.quiet_walk import (
    NO_NODE,
    QUOTED,
    REFUSED,
    FirstPod,
    LeafOutcome,
    PodShapes,
    QuietLeaves,
    SaidLast,
)
from kai_scheduler.framework.session import Session
from kai_scheduler.framework.walk_facts import WalkFacts
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.resources import PodRequest


def reasons(
    session: Session,
    jobs: list[JobInfo],
    facts: WalkFacts,
    names: tuple[Hashable, ...],
    failures: SessionFailures,
    kept: QuietLeaves,
) -> list[dict[str, str]] | None:
    """What allocate's walk over `jobs` would write, by job key (leaf by leaf), when it
    would try nothing; None when it may (module doc). `names`: the walk's signature reads
    (`WalkFacts.start`); `kept`: the leaves' outcomes carried, brought up to date here."""
    if session.state.moves:
        return None  # (what is kept holds for the jobs as the session opened)
    # (Asked before the jobs are grouped by leaf: a cycle after a pod completed gives up here.)
    details = _details_if_none_may_fit(session, names, failures, kept)
    if details is None:
        return None
    return _written(session, _by_leaf(jobs), {}, facts, names, details, kept, None)


# A job shape's first attempt in a walk, which found no node (`WalkedSoFar.no_room`).
NoRoom = tuple[tuple[PodRequest, str] | None, str]


@dataclass(frozen=True, slots=True)
class WalkedSoFar:
    """What the jobs a walk handed out so far left for the rest of it to read (`tail_reasons`): the first
    job of each signature that failed (`failed_shapes`), and by job shape the first attempt that found no
    node (`no_room`): the first pod whose own words the rest's jobs of that shape write (its request and
    placement key; None: none, a job was placed since), else quoting the job (its key) that attempt was
    for."""

    failed_shapes: Mapping[Hashable, str]
    no_room: Mapping[Hashable, NoRoom]


def tail_reasons(
    session: Session,
    jobs: list[JobInfo],
    left: KeyedJobs,
    facts: WalkFacts,
    names: tuple[Hashable, ...],
    failures: SessionFailures,
    kept: QuietLeaves,
    walked: WalkedSoFar,
) -> list[dict[str, str]] | None:
    """What the rest of allocate's walk over `jobs` writes, by job key (leaf by leaf), when it would try
    nothing: `left` are the jobs it has not handed out yet (each leaf's entries smallest first, none handed
    back to it), `walked` what the ones it did left behind; None when it may try something.

    Why it can: the walk hands out each leaf's jobs in job order, so the jobs left of a leaf are the last
    of its order, and a job of them shaped like one handed out before of its leaf quotes that one
    (`walked.failed_shapes`); any other job ends as in a walk that tries nothing, but for a job shape
    whose first attempt was made before (`walked.no_room`): its jobs write their own words only with
    that attempt's first pod and nothing placed since, else they quote that attempt's job. (Issue #23,
    point 1: a cycle after a pod completes places one pod, then walked every other job as before.)"""
    by_leaf = _by_leaf(jobs)
    suffixes: dict[str, list[JobInfo]] = {}
    for leaf in list(by_leaf):
        entries = left.get(leaf)
        if entries is None:
            del by_leaf[leaf]  # (every job of it handed out)
        elif len(entries) != len(by_leaf[leaf]):
            suffixes[leaf] = [job for _, _, job in entries]
    if len(left) != len(by_leaf):
        return None  # (a leaf none of `jobs` waits in)
    details = _details_if_none_may_fit(session, names, failures, kept)
    if details is None:
        return None
    return _written(session, by_leaf, suffixes, facts, names, details, kept, walked)


def _by_leaf(jobs: list[JobInfo]) -> dict[str, list[JobInfo]]:
    by_leaf: dict[str, list[JobInfo]] = {}
    for job in jobs:
        # (Fewest steps a job of the backlog's thousands: a leaf's first job is the one that raises.)
        try:
            by_leaf[job.queue].append(job)
        except KeyError:
            by_leaf[job.queue] = [job]
    return by_leaf


def _details_if_none_may_fit(
    session: Session, names: tuple[Hashable, ...], failures: SessionFailures, kept: QuietLeaves
) -> _Details | None:
    """`kept` brought up to date with the session, and the explanations to write from; None when a node
    that may differ since the last cycle may take a first pod of a leaf kept (`_Details.a_node_may_take`)."""
    snapshot = session.snapshot
    kept.catch_up(snapshot.job_changes, snapshot.jobs)
    most_memory = snapshot.max_gpu_memory_mib
    if kept.names is not names or kept.most_memory != most_memory:
        kept.forget()
        kept.names, kept.most_memory = names, most_memory
    details = _Details(session, failures, kept)
    if details.a_node_may_take(kept.by_leaf.values()):
        return None
    return details


def _written(
    session: Session,
    by_leaf: dict[str, list[JobInfo]],
    suffixes: dict[str, list[JobInfo]],
    facts: WalkFacts,
    names: tuple[Hashable, ...],
    details: _Details,
    kept: QuietLeaves,
    walked: WalkedSoFar | None,
) -> list[dict[str, str]] | None:
    """The reasons of the jobs `by_leaf` (each leaf's waiting jobs as given), but of a leaf in `suffixes`
    only its jobs there (the last of its order, in order: worked out afresh, not kept), as a walk that
    tries nothing writes them after `walked` (None: from the walk's start), from `details`
    (`_details_if_none_may_fit`)."""
    outcomes: list[LeafOutcome] = []
    explained: list[dict[int, str]] = []
    quoted: list[dict[int, str] | None] = []
    quoting = _quoting(walked, kept) if walked is not None and walked.no_room else None
    for leaf, members in by_leaf.items():
        capacity = session.queue_capacity_inputs(leaf)
        if capacity is None:
            return None
        suffix = suffixes.get(leaf)
        if suffix is not None:
            assert walked is not None
            outcome = _leaf_outcome(
                session, leaf, suffix, capacity, facts, names, details, walked.failed_shapes
            )
            if outcome is None:
                return None
        else:
            outcome = kept.by_leaf.get(leaf)
            if outcome is None or outcome.jobs != members:
                outcome = _leaf_outcome(session, leaf, members, capacity, facts, names, details)
                if outcome is None:
                    return None
                kept.by_leaf[leaf] = outcome
            elif outcome.capacity != capacity and not _admitted_again(session, outcome, capacity, details):
                del kept.by_leaf[leaf]
                return None
        leaf_details = details.of(outcome)
        if leaf_details is None:
            return None
        outcomes.append(outcome)
        explained.append(leaf_details)
        quoted.append(None if quoting is None else _quoted_attempts(outcome, quoting))
    if len(kept.by_leaf) > 2 * len(by_leaf) + 64:
        kept.by_leaf = {leaf: kept.by_leaf[leaf] for leaf in by_leaf}
    return _words(outcomes, explained, quoted, session.unschedulable)


def _quoted_attempts(
    outcome: LeafOutcome, quoting: Mapping[Hashable, tuple[int | None, str]]
) -> dict[int, str] | None:
    """The NO_NODE jobs of `outcome` (by place) whose job shape an attempt the walk made before was of,
    which write its job's reason quoted, with that job's key (None: none): those of a shape in
    `quoting` (`_quoting`) whose first pod is not of the pod shape given there."""
    pods = outcome.pods
    assert pods is not None  # (`_Details.of` worked them out)
    quoted_shapes: dict[Hashable, str] = {}
    for shape, pod in pods.pod_of_shape.items():  # (a leaf's jobs of one shape have one pod shape)
        earlier = quoting.get(shape)
        if earlier is not None and earlier[0] != pod:
            quoted_shapes[shape] = earlier[1]
    if not quoted_shapes:
        return None
    shapes, first_pods = outcome.shapes, outcome.first_pods
    return {
        place: quoted_shapes[shapes[place]]
        for place in outcome.firsts
        if first_pods[place] is not None and shapes[place] in quoted_shapes
    }


def _quoting(walked: WalkedSoFar, kept: QuietLeaves) -> dict[Hashable, tuple[int | None, str]]:
    """`walked.no_room` with the first pods' shapes numbered (`QuietLeaves.number_of`)."""
    return {
        shape: (None if pod is None else kept.number_of(pod), job)
        for shape, (pod, job) in walked.no_room.items()
    }


def _leaf_outcome(
    session: Session,
    leaf: str,
    members: list[JobInfo],
    capacity: Hashable,
    facts: WalkFacts,
    names: tuple[Hashable, ...],
    details: _Details,
    quoted: Mapping[Hashable, str] | None = None,
) -> LeafOutcome | None:
    """How the walk ends each of `members` (leaf `leaf`'s jobs, as given) when it tries nothing; None when
    a job's attempt reads more than its pods, or may place it (`details.may_place`: asked as each first
    pod is met, so that a cycle with room gives up after a few jobs, not a whole backlog). With `quoted`
    (the first job of each signature that failed in the walk so far, `WalkedSoFar.failed_shapes`),
    `members` are the jobs the walk has left of the leaf, in job order, and a job of a signature there
    quotes that job."""
    if quoted is None:
        key_of = session.job_order_key
        order = facts.sorting(
            leaf, [key_of(job) for job in members], keep=True, verify=session.verify_carried
        )
    else:
        order = list(range(len(members)))
    keys: list[str] = []
    parts: list[int] = []
    followers: dict[int, list[str]] = {}
    quoting: dict[str, list[str]] = {}
    refusals: list[str | None] = []
    first_pods: list[FirstPod | None] = []
    shapes: list[int] = []
    answers: list[tuple[str | None, bool] | None] = []  # (asked of the first pods as they are met)
    firsts: dict[int, int] = {}  # signature -> the place of its first job
    for place, index in enumerate(order):
        job = members[index]
        job_facts = facts.of(session, job, names)
        keys.append(job_facts.key)
        shapes.append(job_facts.shape)
        first = firsts.get(job_facts.signature)
        refusal: str | None = None
        first_pod: FirstPod | None = None
        answer: tuple[str | None, bool] | None = None
        if first is not None:
            parts.append(first)
            alike = followers.get(first)
            if alike is None:
                alike = followers[first] = []
            alike.append(job_facts.key)
        elif quoted is not None and (earlier := quoted.get(job_facts.signature)) is not None:
            parts.append(QUOTED)
            quoting.setdefault(earlier, []).append(job_facts.key)
        else:
            firsts[job_facts.signature] = place
            tasks = tasks_to_allocate(session, job)
            refused, refusal = admission(session, job, tasks, capacity)
            if refused:
                parts.append(REFUSED)
            else:
                task = SessionFailures.first_pod(session, job, tasks)
                if task is None:
                    return None
                answer = details.answers(task)
                first_pod = details.first_pod(task, tasks)
                if details.may_place(first_pod, answer):
                    return None
                parts.append(NO_NODE)
        refusals.append(refusal)
        first_pods.append(first_pod)
        answers.append(answer)
    first_places = [place for place, part in enumerate(parts) if part in (REFUSED, NO_NODE)]
    return LeafOutcome(
        jobs=members,
        capacity=capacity,
        order=order,
        keys=keys,
        parts=parts,
        firsts=first_places,
        first_keys=[keys[place] for place in first_places],
        followers=[followers.get(place) for place in first_places],
        refusals=refusals,
        first_pods=first_pods,
        shapes=shapes,
        written=[None] * len(members),
        written_from=[None] * len(members),
        leaf_words=None,
        leaf_words_from=None,
        answers=answers,
        answers_key=details.answers_key,
        quoting=quoting or None,
    )


def _admitted_again(session: Session, outcome: LeafOutcome, capacity: Hashable, details: _Details) -> bool:
    """Bring `outcome` up to date with what its queue's capacity checks read now (`capacity`): each job
    that is the first of its signature is checked again (the others quote it). False when a job the
    checks refused may now be tried and its attempt reads more than its pods."""
    jobs, order, parts, first_pods = outcome.jobs, outcome.order, outcome.parts, outcome.first_pods
    for place in outcome.firsts:
        part, first = parts[place], first_pods[place]
        job = jobs[order[place]]
        # (The job is as the outcome found it: `QuietLeaves.catch_up`.)
        tasks = first.tasks if first is not None else tasks_to_allocate(session, job)
        refused, refusal = admission(session, job, tasks, capacity)
        if refused:
            parts[place], first_pods[place] = REFUSED, None
        elif part == REFUSED:
            task = SessionFailures.first_pod(session, job, tasks)
            if task is None:
                return False
            parts[place], first_pods[place] = NO_NODE, details.first_pod(task, tasks)
            outcome.answers[place] = None
        outcome.refusals[place] = refusal
    outcome.capacity, outcome.leaf_words, outcome.pods = capacity, None, None
    return True


class _Details:
    """The explanations the walk would give the jobs whose first pod finds no node (`NO_NODE`), leaf by
    leaf (`of`): its pre-predicate's refusal, or its pod shape's count of the nodes; and whether the walk
    may place a job instead: a pod that no pre-predicate refuses may find a node (or, of a gang, is not
    known to find none), or one job shape has two first-pod shapes."""

    def __init__(self, session: Session, failures: SessionFailures, kept: QuietLeaves) -> None:
        self._session = session
        self._failures = failures
        self._kept = kept
        self._pods_of_shape: dict[int, int] = {}  # job shape -> the pod shape of its first pod
        self._none: dict[int, bool] = {}  # pod shape -> no node may take it
        self._counted: dict[int, str] = {}
        self._pre = session.pre_predicate_failure
        # (Whether inter-pod rules read a pod moves with what runs: asked again of a pod kept from a cycle,
        # unless what they read is the same, `Session.pod_answers_key`.)
        self._reads_other_pods = session.reads_other_pods if session.points.task_predicates else None
        self.answers_key = session.pod_answers_key()

    def a_node_may_take(self, outcomes: Iterable[LeafOutcome]) -> bool:
        """Whether a node that may differ since the last cycle may take a first pod of `outcomes` (the last
        cycle's): asked first, a pod shape at a time, as it is cheap and a freed node is seen at once."""
        known = self._none
        for outcome in outcomes:
            pods = outcome.pods
            firsts = pods.open_pods.values() if pods is not None else outcome.first_pods
            for first in firsts:
                if first is not None and first.shape not in known:
                    none = self._failures.none_by_rows(first.task)
                    if none is False:
                        return True
                    if none is not None:
                        known[first.shape] = True  # (kept for `of`: asked once a pod shape)
        return False

    def first_pod(self, task: TaskInfo, tasks: list[TaskInfo]) -> FirstPod:
        """`task`, the first pod of `tasks`, as a NO_NODE job's outcome keeps it."""
        return FirstPod(task, tasks, self._kept.pod_shape(task), no_fit_head(task, tasks))

    def of(self, outcome: LeafOutcome) -> dict[int, str] | None:
        """The explanation of each pod shape of `outcome`'s NO_NODE jobs that no pre-predicate refuses (a
        job a pre-predicate refuses is explained by its refusal, `LeafOutcome.answers`, whatever the
        nodes); None when the walk may place a job."""
        pods = self._pod_shapes(outcome)
        if pods.reads_other_pods or pods.two_pods_of_a_shape:
            return None
        pods_of_shape = self._pods_of_shape
        for shape, pod in pods.pod_of_shape.items():
            if pods_of_shape.setdefault(shape, pod) != pod:
                return None
        details: dict[int, str] = {}
        counted = self._counted
        for pod, first in pods.open_pods.items():
            if self._may_take(pod, first.task, first.tasks):
                return None
            detail = counted.get(pod)
            if detail is None:
                detail = counted[pod] = self._session.explain_no_fit(first.task, pre_predicates_pass=True)
            details[pod] = detail
        return details

    def _pod_shapes(self, outcome: LeafOutcome) -> PodShapes:
        """`outcome.pods`, worked out again when it is not kept or its answers are not (which asks each
        NO_NODE job's first pod again, and words the leaf again)."""
        key = self.answers_key
        answers = outcome.answers
        if outcome.answers_key != key or key is None:
            answers[:] = [None] * len(answers)
            outcome.answers_key, outcome.pods, outcome.leaf_words = key, None, None
        pods = outcome.pods
        if pods is not None:
            return pods
        pod_of_shape: dict[int, int] = {}
        two_pods_of_a_shape = reads_other_pods = False
        open_pods: dict[int, FirstPod] = {}
        shapes, first_pods = outcome.shapes, outcome.first_pods
        for place in outcome.firsts:
            first = first_pods[place]
            if first is None:
                continue
            pod = first.shape
            if pod_of_shape.setdefault(shapes[place], pod) != pod:
                two_pods_of_a_shape = True
            answer = answers[place]
            if answer is None:
                answer = answers[place] = self.answers(first.task)
            refusal, reads = answer
            reads_other_pods = reads_other_pods or reads
            if refusal is None and pod not in open_pods:
                open_pods[pod] = first
        pods = outcome.pods = PodShapes(pod_of_shape, two_pods_of_a_shape, reads_other_pods, open_pods)
        return pods

    def may_place(self, first: FirstPod, answer: tuple[str | None, bool]) -> bool:
        """Whether the walk may place the attempt whose first pod is `first` (its `answers`): its nodes
        read other pods, or no pre-predicate refuses it and a node may take it."""
        refusal, reads_other_pods = answer
        if reads_other_pods:
            return True
        return refusal is None and self._may_take(first.shape, first.task, first.tasks)

    def _may_take(self, pod: int, task: TaskInfo, tasks: list[TaskInfo]) -> bool:
        """Whether a node may take a pod of shape `pod` that no pre-predicate refuses (`task`, the first
        pod of `tasks`): asked once a pod shape."""
        none = self._none.get(pod)
        if none is None:
            none = self._none[pod] = self._finds_none(task, tasks)
        return not none

    def answers(self, task: TaskInfo) -> tuple[str | None, bool]:
        """Why a pre-predicate refuses `task`, and whether the nodes it may use read other pods."""
        reads = self._reads_other_pods
        return self._pre(task), reads is not None and reads(task)

    def _finds_none(self, task: TaskInfo, tasks: list[TaskInfo]) -> bool:
        """Whether no node may take `task`, the first pod of `tasks`."""
        none = self._failures.none_by_rows(task)
        if none is None:
            # Not known from the last cycle: every node asked, as the walk's attempt would (a gang whose
            # first pod finds none fails there), and noted as it notes it.
            none = not self._session.candidate_nodes(task).any()
            if none:
                self._failures.found_no_node(tasks)
        return none


def _words(
    outcomes: list[LeafOutcome],
    details: list[dict[int, str]],
    quoted: list[dict[int, str] | None],
    earlier: dict[str, str],
) -> list[dict[str, str]]:
    """The reasons by job key, leaf by leaf (a leaf's kept while its explanations stay); each outcome's
    `written` brought up to date. `quoted`: per outcome, its NO_NODE jobs that quote a job the walk handed
    out before (`_quoted_attempts`). `earlier`: the session's reasons so far (a job refused with nothing
    said, or one handed out before, is quoted by them)."""
    written: list[dict[str, str]] = []
    for outcome, leaf_details, quotes in zip(outcomes, details, quoted, strict=True):
        if quotes is None and outcome.leaf_words is not None and outcome.leaf_words_from == leaf_details:
            written.append(outcome.leaf_words)  # (equal explanations, equal words)
            continue
        if quotes is None and outcome.quoting is None:
            leaf_words, quotes_session = _said_again(outcome, leaf_details, earlier)
        else:
            leaf_words, quotes_session = _said_quoting(outcome, leaf_details, quotes, earlier)
        written.append(leaf_words)
        outcome.leaf_words = None if quotes_session else leaf_words
        outcome.leaf_words_from = leaf_details
    return written


def _said_again(
    outcome: LeafOutcome, leaf_details: dict[int, str], earlier: dict[str, str]
) -> tuple[dict[str, str], bool]:
    """The reasons of a leaf no job of which quotes one the walk handed out before, by job key, written
    from the last ones (`SaidLast`): a first job whose text is the object its last reasons were worded
    from keeps them, its followers' too. And whether a reason quotes the session's (`earlier`).

    Exactly a writing afresh: equal texts give equal words, and the copy keeps the keys in the order a
    writing afresh puts them in while every first job that wrote its own reason still does (else the
    leaf is written afresh)."""
    said = outcome.said
    if said is None:
        said = outcome.said = SaidLast({}, [None] * len(outcome.firsts), [True] * len(outcome.firsts))
        words = said.words
    else:
        words = said.words.copy()
    texts, owns = said.texts, said.own
    parts, refusals = outcome.parts, outcome.refusals
    quotes_session = False
    for index, (place, key, alike) in enumerate(
        zip(outcome.firsts, outcome.first_keys, outcome.followers, strict=True)
    ):
        own = True
        if parts[place] == REFUSED:
            text = refusals[place]
            if text is None:
                text, own, quotes_session = earlier.get(key, UNSAID), False, True
        else:
            text = _no_node_text(outcome, place, leaf_details)
        last = texts[index]
        if last is not None:
            if owns[index] is not own:  # (its key comes or goes: the order of a writing afresh differs)
                outcome.said = None
                return _said_again(outcome, leaf_details, earlier)
            if last is text:
                continue
        texts[index], owns[index] = text, own
        if own:
            words[key] = text
        if alike is not None:
            worded = failed_like(key, text)
            for follower in alike:
                words[follower] = worded
    said.words = words
    return words, quotes_session


def _said_quoting(
    outcome: LeafOutcome,
    leaf_details: dict[int, str],
    quotes: dict[int, str] | None,
    earlier: dict[str, str],
) -> tuple[dict[str, str], bool]:
    """The reasons of a leaf some jobs of which quote one the walk handed out before (`quotes`, or
    `LeafOutcome.quoting`), by job key, written afresh; and whether a reason quotes the session's."""
    leaf_words: dict[str, str] = {}
    quotes_session = False
    parts, refusals = outcome.parts, outcome.refusals
    for place, key, alike in zip(outcome.firsts, outcome.first_keys, outcome.followers, strict=True):
        text: str
        if quotes is not None and (quote := quotes.get(place)) is not None:
            text = leaf_words[key] = failed_like(quote, earlier.get(quote, UNSAID))
            quotes_session = True
        elif parts[place] == REFUSED:
            refusal = refusals[place]
            if refusal is None:
                text = earlier.get(key, UNSAID)
                quotes_session = True
            else:
                text = leaf_words[key] = refusal
        else:
            text = leaf_words[key] = _no_node_text(outcome, place, leaf_details)
        if alike is not None:
            worded = failed_like(key, text)
            for follower in alike:
                leaf_words[follower] = worded
    if outcome.quoting is not None:
        quotes_session = True
        for key, alike in outcome.quoting.items():
            worded = failed_like(key, earlier.get(key, UNSAID))
            for follower in alike:
                leaf_words[follower] = worded
    return leaf_words, quotes_session


def _no_node_text(outcome: LeafOutcome, place: int, leaf_details: dict[int, str]) -> str:
    """The reason of the NO_NODE job at `place` in `outcome`: its first pod's head and explanation (its
    pre-predicate's refusal, else its pod shape's in `leaf_details`), kept (`LeafOutcome.written`) while
    the explanation is the same object."""
    first, answer = outcome.first_pods[place], outcome.answers[place]
    assert first is not None and answer is not None
    detail = answer[0] if answer[0] is not None else leaf_details[first.shape]
    last = outcome.written[place]
    if last is not None and outcome.written_from[place] is detail:
        return last
    text = outcome.written[place] = no_fit_after(first.head, detail)
    outcome.written_from[place] = detail
    return text
