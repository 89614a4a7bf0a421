"""The job queue's incremental ordering hands out exactly the jobs the straightforward one does.

`QueueOrderedJobs` keeps each queue's rank and heap and refreshes only the path of the queue that changed.
KAI's order is the contract, ties included, so generated queue trees (flat or under departments, random
quotas, limits, weights and priorities) and jobs (gangs and elastic jobs of random GPU shapes, priority
classes and queue depths) are popped through a sequence of allocations, as allocate does, and every pop is
compared with a reference that ranks every queue from scratch: at each level the first child with the
smallest queue order key (on the job it would hand out, worked out anew: not one proportion kept), down
to a leaf's smallest job order key.

Most pops of a walk are not attempted (a job shaped like one that failed) or fail, moving no allocation:
the queue then keeps the popped leaf's path as it stands while that leaf still wins (ranks kept by request),
so pops are drawn with and without an attempt, over leaves with many jobs of a few requests.

Allocate reads that order as a merge while nothing moves (`QuietOrder`), and carries on with a job queue of
the jobs left at the first placement: both are popped against the reference too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import gang, node, open_session, queue
from kai_scheduler.actions.allocate import place_job_tasks
from kai_scheduler.actions.job_queue import QueueOrderedJobs, keyed_by_leaf
from kai_scheduler.actions.quiet_order import QuietOrder
from kai_scheduler.framework.gang import next_request, tasks_to_allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.plugins.proportion.plugin import ProportionPlugin

EXAMPLES = 60
CLASSES = [None, "train", "build", "inference"]


class Reference:
    """The order from scratch at every pop (what `QueueOrderedJobs` must reproduce)."""

    def __init__(self, session: Session, jobs: list[JobInfo], depth: int | None) -> None:
        self._session = session
        self._depth = depth
        self._waiting: dict[str, list[JobInfo]] = {}
        self._handed_out: dict[str, set[str]] = {}
        for job in jobs:
            self.push(job)

    def push(self, job: JobInfo) -> None:
        self._waiting.setdefault(job.queue, []).append(job)

    def pop(self) -> JobInfo | None:
        queues = self._session.snapshot.queues
        names = queues.roots
        while True:
            best = self._first_smallest(names)
            if best is None:
                return None
            if queues[best].is_leaf:
                job = self._next_job(best)
                assert job is not None
                self._waiting[best].remove(job)
                self._handed_out.setdefault(best, set()).add(job.key)
                return job
            names = queues[best].children

    def _first_smallest(self, names: list[str]) -> str | None:
        best, best_key = None, None
        for name in names:
            job = self._job_of(name)
            if job is None:
                continue
            key = self._key(self._session.snapshot.queues[name], job)
            if best_key is None or key < best_key:
                best, best_key = name, key
        return best

    def _key(self, queue: QueueInfo, job: JobInfo) -> tuple[Any, ...]:
        """The queue order key worked out now: proportion's not one it kept (`queue_order_key` keeps them
        by allocation and request, from the second asked at an allocation on)."""
        plugin = getattr(self._session.points.queue_order, "__self__", None)
        if isinstance(plugin, ProportionPlugin):
            return plugin._queue_order_key(queue, next_request(self._session, job))
        return self._session.queue_order_key(queue, job)

    def _job_of(self, name: str) -> JobInfo | None:
        queue = self._session.snapshot.queues[name]
        if queue.is_leaf:
            return self._next_job(name)
        best = self._first_smallest(queue.children)
        return None if best is None else self._job_of(best)

    def _next_job(self, leaf: str) -> JobInfo | None:
        waiting = self._waiting.get(leaf)
        if not waiting:
            return None
        job = min(waiting, key=self._session.job_order_key)
        handed_out = self._handed_out.get(leaf, set())
        if self._depth is not None and len(handed_out) >= self._depth and job.key not in handed_out:
            return None
        return job


@st.composite
def clusters(draw: st.DrawFn, jobs: tuple[int, int] = (1, 30)) -> list[Any]:
    objects: list[Any] = [
        node(f"n{i}", gpus=draw(st.sampled_from([2, 4, 8]))) for i in range(draw(st.integers(1, 4)))
    ]
    leaves = [f"q{i}" for i in range(draw(st.integers(2, 5)))]
    departments = draw(st.booleans())
    if departments:
        objects += [queue(d, gpu=draw(st.integers(-1, 12))) for d in ("dept-a", "dept-b")]
    for i, name in enumerate(leaves):
        objects.append(
            queue(
                name,
                parent=("dept-a", "dept-b")[i % 2] if departments else None,
                gpu=draw(st.integers(-1, 8)),
                gpu_limit=draw(st.sampled_from([-1, 4, 12])),
                gpu_weight=draw(st.integers(0, 3)),
                priority=draw(st.sampled_from([None, 1, 2])),
            )
        )
    for j in range(draw(st.integers(*jobs))):
        name, leaf = f"j{j}", draw(st.sampled_from(leaves))
        size = draw(st.integers(1, 4))
        objects += gang(
            name,
            leaf,
            size=size,
            min_member=draw(st.integers(1, size)),
            gpus=draw(st.sampled_from([0, 1, 2, 4])),
            cpu=draw(st.sampled_from(["1", "2"])),
            priority_class=draw(st.sampled_from(CLASSES)),
        )
    return objects


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), depth=st.sampled_from([None, 1, 2]), data=st.data())
def test_pops_match_the_order_from_scratch_through_allocations(
    objects: list[Any], depth: int | None, data: st.DataObject
) -> None:
    _pop_alike(objects, depth, data)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(jobs=(20, 60)), data=st.data())
def test_long_walks_that_mostly_place_nothing_pop_in_the_order_from_scratch(
    objects: list[Any], data: st.DataObject
) -> None:
    # Long stretches from one leaf, its next jobs asking for a few requests, broken by another leaf's
    # turn, a push or a placement.
    _pop_alike(objects, None, data)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(jobs=(20, 60)), data=st.data())
def test_the_quiet_order_is_the_order_from_scratch_until_a_placement(
    objects: list[Any], data: st.DataObject
) -> None:
    """`QuietOrder` hands out the jobs the reference pops while nothing is placed; from the first placement
    on (drawn at some job, or none), a job queue of the jobs it has not handed out, with the placed job
    pushed back, pops as the reference does through more placements, and a quiet order of the jobs that
    queue has left (`waiting_keyed`) hands out the rest as the reference does."""
    session = open_session(objects)
    jobs = [
        job
        for job in session.snapshot.jobs_at_open().waiting
        if job.tally().pending and job.invalid_reason is None
    ]
    reads = session.points.queue_order_reads
    assert reads is not None
    order, reference = (
        QuietOrder(session, keyed_by_leaf(session, jobs), reads),
        Reference(session, jobs, None),
    )
    stop = data.draw(st.integers(0, len(jobs)))  # the job whose attempt is made (0: none)
    rest: QueueOrderedJobs | None = None
    for handed_out, job in enumerate(order, 1):
        assert job is reference.pop()
        if handed_out == stop:
            placed = place_job_tasks(session, job, tasks_to_allocate(session, job), "allocate")
            rest = QueueOrderedJobs.of_keyed(session, order.remaining())
            if placed and job.has_pending():
                rest.push(job)
                reference.push(job)
            break
    if rest is None:
        assert reference.pop() is None
        return
    for _ in range(400):
        if data.draw(st.integers(0, 9)) == 0:
            # Back to the quiet order of the jobs the queue has not handed out: to the end, placing nothing.
            for quiet in QuietOrder(session, rest.waiting_keyed(), reads):
                assert quiet is reference.pop()
            assert reference.pop() is None
            return
        job = rest.pop()
        assert job is reference.pop()
        if job is None:
            return
        if data.draw(st.integers(0, 2)) == 0 and (
            place_job_tasks(session, job, tasks_to_allocate(session, job), "allocate") and job.has_pending()
        ):
            rest.push(job)
            reference.push(job)
    raise AssertionError("the queue did not run out within 400 pops")


def _pop_alike(objects: list[Any], depth: int | None, data: st.DataObject) -> None:
    session = open_session(objects)
    jobs = [
        job
        for job in session.snapshot.jobs_at_open().waiting
        if job.tally().pending and job.invalid_reason is None
    ]
    # Some jobs come later, pushed between pops (their queues may have had none till then); before, some
    # are placed by another action, after which the whole order is ranked again (`refresh`).
    late = data.draw(
        st.lists(st.sampled_from(jobs), unique=True, max_size=len(jobs) // 2) if jobs else st.just([])
    )
    first = [job for job in jobs if job not in late]
    incremental, reference = QueueOrderedJobs(session, first, depth), Reference(session, first, depth)
    for _ in range(400):
        if late and data.draw(st.booleans()):
            arrived = late.pop()
            incremental.push(arrived)
            reference.push(arrived)
        if late and data.draw(st.integers(0, 5)) == 0:
            # Another action places a job the order does not hold (moving its queue's rank) and says so.
            place_job_tasks(session, late[-1], tasks_to_allocate(session, late[-1]), "allocate")
            incremental.refresh()
        job = incremental.pop()
        assert job is reference.pop()
        if job is None:
            if not late:
                return
            continue
        # Placing moves the queue's allocation (its rank and its ancestors'); a job with pods left goes back.
        # Allocate makes no attempt for a job shaped like one that failed: nothing moves.
        if data.draw(st.integers(0, 3)):
            continue
        if place_job_tasks(session, job, tasks_to_allocate(session, job), "allocate") and job.has_pending():
            incremental.push(job)
            reference.push(job)
    raise AssertionError("the queue did not run out within 400 pops")
