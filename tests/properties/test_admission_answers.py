"""Whether allocate may try a job's next attempt (`actions.queue_admission._refusal`, the gang's part kept
by the job's version in `Session.gang_refusals`) answers as working it all out again (`_plain_refusal`) as the
job's pods are evicted and placed back within a session, one status change at a time.

Generated gangs have a minMember up to their pod count, some pods running and the rest pending, in queues
with and without a GPU limit; each step evicts a running pod or places a pending one (or undoes that) on
the session's state, and every job is asked again.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, pod_group, queue
from kai_scheduler.actions.queue_admission import (
    _counted_gang_refusal,
    _gang_refusal,
    _plain_refusal,
    _refusal,
)
from kai_scheduler.framework.gang import (
    kept_quota_request,
    lone_whole_gang,
    next_request,
    quota_request_of,
    request_of,
    tasks_to_allocate,
)
from kai_scheduler.model.jobs import TaskStatus


@st.composite
def gangs(draw: st.DrawFn) -> list[Any]:
    objects: list[Any] = [node(f"n{i}", gpus=8) for i in range(3)]
    objects += [queue("q", gpu=-1, gpu_limit=draw(st.sampled_from([-1, 4, 12])))]
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 4))
        objects.append(pod_group(f"g{g}", "q", min_member=draw(st.integers(1, size))))
        for i in range(size):
            running = draw(st.booleans())
            objects.append(
                pod(f"g{g}-{i}", None, gpus=1, group=f"g{g}", node_name=f"n{i % 3}" if running else None)
            )
    return objects


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=gangs(), data=st.data())
def test_kept_gang_answers_follow_the_pods(objects: list[Any], data: st.DataObject) -> None:
    session = open_session(objects)
    jobs = list(session.snapshot.jobs.values())
    tasks = [task for job in jobs for task in job.tasks]
    counted = False  # whether an attempt asked was not one pod, a whole gang (those skip the kept part)
    for _ in range(data.draw(st.integers(1, 6))):
        for job in jobs:
            pending = tasks_to_allocate(session, job)
            assert _refusal(session, job, pending) == _plain_refusal(session, job, pending)
            counted = counted or not lone_whole_gang(job, pending)
        task = data.draw(st.sampled_from(tasks))
        if task.status is TaskStatus.RUNNING:
            session.state.release(task)
        elif task.status is TaskStatus.RELEASING:
            session.state.unrelease(task, TaskStatus.RUNNING)
        elif task.status is TaskStatus.PENDING:
            session.state.place(task, 0, (), TaskStatus.ALLOCATED)
        elif task.status is TaskStatus.ALLOCATED:
            session.state.unplace(task, TaskStatus.PENDING, -1, ())
    assert bool(session.gang_refusals) == counted


@st.composite
def small_jobs(draw: st.DrawFn) -> list[Any]:
    """Jobs of one to two pods, bare or named by a PodGroup (minMember 1..2, with a sub-group of minMember
    0..2 or none), some pods running."""
    objects: list[Any] = [node("n0", gpus=8), queue("q", gpu=-1)]
    for g in range(draw(st.integers(1, 4))):
        size = draw(st.integers(1, 2))
        group: str | None = None
        if draw(st.booleans()):
            group = f"g{g}"
            sub_groups = None
            if draw(st.booleans()):
                sub_groups = [{"name": "w", "minMember": draw(st.integers(0, 2))}]
            objects.append(pod_group(group, "q", min_member=draw(st.integers(1, 2)), sub_groups=sub_groups))
        for i in range(size if group is not None else 1):
            running = draw(st.booleans())
            in_sub_group = group is not None and draw(st.booleans())
            labels = {"kai.scheduler/subgroup-name": "w"} if in_sub_group else None
            objects.append(
                pod(
                    f"g{g}-{i}",
                    "q" if group is None else None,
                    gpus=draw(st.sampled_from([0, 1, 2])),
                    group=group,
                    labels=labels,
                    node_name="n0" if running else None,
                )
            )
    return objects


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=small_jobs())
def test_a_lone_whole_gang_is_refused_nothing_by_its_counts(objects: list[Any]) -> None:
    """A job's one pending pod taken as a whole gang without counting (`lone_whole_gang`) is one the counts
    and the sub-group tree refuse nothing (`_counted_gang_refusal`); its request, shared by the pods that
    ask alike (`gang.shared_request`), is what it asks."""
    session = open_session(objects)
    for job in session.snapshot.jobs.values():
        tasks = tasks_to_allocate(session, job)
        for attempt in (tasks, job.tasks[:1]):
            if lone_whole_gang(job, attempt):
                assert _counted_gang_refusal(job, attempt) is None
            assert _gang_refusal(job, attempt) == _counted_gang_refusal(job, attempt)
            # One pod's request, one object for the pods alike, is what the pod asks.
            assert (
                kept_quota_request(session, attempt).values() == quota_request_of(session, attempt).values()
            )
        assert next_request(session, job).values() == request_of(session, tasks).values()
