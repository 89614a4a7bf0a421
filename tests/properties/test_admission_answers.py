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
from kai_scheduler.actions.queue_admission import _plain_refusal, _refusal
from kai_scheduler.framework.gang import tasks_to_allocate
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
    for _ in range(data.draw(st.integers(1, 6))):
        for job in jobs:
            pending = tasks_to_allocate(session, job)
            assert _refusal(session, job, pending) == _plain_refusal(session, job, pending)
        task = data.draw(st.sampled_from(tasks))
        if task.status is TaskStatus.RUNNING:
            session.state.release(task)
        elif task.status is TaskStatus.RELEASING:
            session.state.unrelease(task, TaskStatus.RUNNING)
        elif task.status is TaskStatus.PENDING:
            session.state.place(task, 0, (), TaskStatus.ALLOCATED)
        elif task.status is TaskStatus.ALLOCATED:
            session.state.unplace(task, TaskStatus.PENDING, -1, ())
    assert session.gang_refusals
