"""The proportion plugin's capacity checks, written out per resource over bounds kept per queue path
(`ProportionPlugin.over_limit`, `non_preemptible_over_quota`), answer exactly as the plain loop over
the path and the resources does: the same refusal text and code, or None.

Generated queue trees (flat or under departments, with unlimited, zero and finite limits and quotas in
every resource) get random allocations, often right at a bound, and random requests; each check is
compared with a reference that reads the queues as KAI's rules are written.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, queue
from kai_scheduler.api.reasons import NON_PREEMPTIBLE_OVER_QUOTA, OVER_LIMIT, code_of
from kai_scheduler.model.jobs import TaskStatus
from kai_scheduler.model.queues import QueueInfo, effective_limit, is_unlimited
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES, Resources

AMOUNTS = st.sampled_from([-1.0, 0.0, 1.0, 2.0, 4.0, 8.0])


def reference_over_limit(path: list[QueueInfo], request: Resources) -> tuple[str, str] | None:
    """The first queue of the path, and resource, that `request` would take above its limit."""
    return next(
        (
            (q.name, r)
            for q in path
            for r in RESOURCE_NAMES
            if request.get(r) > EPSILON
            and q.allocated.get(r) + request.get(r) > effective_limit(q, r) + EPSILON
        ),
        None,
    )


def reference_over_quota(path: list[QueueInfo], request: Resources) -> tuple[str, str] | None:
    """The first queue of the path, and resource, whose quota `request` would take non-preemptible
    allocations above."""
    return next(
        (
            (q.name, r)
            for q in path
            for r in RESOURCE_NAMES
            if not is_unlimited(q.deserved.get(r))
            and request.get(r) > EPSILON
            and q.allocated_non_preemptible.get(r) + request.get(r) > q.deserved.get(r) + EPSILON
        ),
        None,
    )


@st.composite
def trees(draw: st.DrawFn) -> list[Any]:
    # (GPUs of two sizes: a shared GPU asked by memory counts by its node's, or else the smallest.)
    objects: list[Any] = [node("n0", gpus=8, gpu_memory=81920), node("n1", gpus=8, gpu_memory=40960)]
    departments = draw(st.booleans())
    if departments:
        objects += [queue(d, gpu=draw(AMOUNTS), gpu_limit=draw(AMOUNTS)) for d in ("dept-a", "dept-b")]
    for i in range(draw(st.integers(1, 4))):
        objects.append(
            queue(
                f"q{i}",
                parent=("dept-a", "dept-b")[i % 2] if departments else None,
                gpu=draw(AMOUNTS),
                gpu_limit=draw(AMOUNTS),
                cpu=draw(AMOUNTS) * 1000,
                cpu_limit=draw(AMOUNTS) * 1000,
                memory=draw(AMOUNTS) * 1000,
                memory_limit=draw(AMOUNTS) * 1000,
            )
        )
        shared = draw(st.sampled_from([{}, {}, {"fraction": 0.5}, {"gpu_memory": 20480}]))
        priority = draw(st.sampled_from(["train", "build"]))
        objects.append(pod(f"p{i}", f"q{i}", gpus=0 if shared else 1, priority_class=priority, **shared))
    return objects


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=trees(), data=st.data())
def test_the_written_out_checks_answer_as_the_plain_loop(objects: list[Any], data: st.DataObject) -> None:
    session = open_session(objects)
    checks = {check.__name__: check for check in session.points.job_capacity_checks}
    queues = session.snapshot.queues
    for q in queues:
        for allocation in (q.allocated, q.allocated_non_preemptible):
            for r in RESOURCE_NAMES:
                # Often exactly at a bound (or a hair past it), where `>` and EPSILON decide.
                bound = data.draw(st.sampled_from([q.limit.get(r), q.deserved.get(r), 0.0]))
                allocation.set(r, max(0.0, bound) + data.draw(st.sampled_from([0.0, -1.0, 1e-10, 1e-8, 0.5])))
    for job in session.snapshot.jobs.values():
        path = queues.ancestry(job.queue)
        for _ in range(4):
            request = Resources(*(data.draw(st.sampled_from([0.0, 1e-10, 0.5, 1.0, 3.0])) for _ in range(3)))
            request.cpu *= 1000
            refused = checks["over_limit"](job, request)
            expected = reference_over_limit(path, request)
            assert (refused is None) == (expected is None)
            if refused is not None and expected is not None:
                assert code_of(refused) == OVER_LIMIT
                assert refused.startswith(
                    f"OverLimit: queue {expected[0]} would exceed its {expected[1]} limit"
                )
            refused = checks["non_preemptible_over_quota"](job, request)
            expected = None if job.preemptible else reference_over_quota(path, request)
            assert (refused is None) == (expected is None)
            if refused is not None and expected is not None:
                assert code_of(refused) == NON_PREEMPTIBLE_OVER_QUOTA
                assert f"take queue {expected[0]} above its {expected[1]} quota" in refused


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=trees(), data=st.data())
def test_capacity_inputs_are_equal_when_the_plain_values_are(objects: list[Any], data: st.DataObject) -> None:
    """What allocate keeps its admission answers by (`Session.job_capacity_inputs`), over two sessions
    that share what was handed out, the second after random allocations: two jobs' inputs are equal
    exactly when what the checks' readers give for them is, and equal inputs are the same objects."""
    seen: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []
    held: dict[Any, Any] = {}
    for _ in range(2):
        session = open_session(objects)
        session.capacity_inputs = held
        readers = [session.points.job_capacity_inputs[c] for c in session.points.job_capacity_checks]
        for q in session.snapshot.queues:
            if data.draw(st.booleans()):
                q.allocated.set("gpu", data.draw(st.sampled_from([0.0, 1.0, 2.0])))
        for job in session.snapshot.jobs.values():
            inputs = session.job_capacity_inputs(job)
            assert inputs is not None
            seen.append((inputs, tuple(read(job.queue) for read in readers)))
    for inputs, plain in seen:
        for other_inputs, other_plain in seen:
            assert (inputs == other_inputs) == (plain == other_plain)
            if inputs == other_inputs:
                assert all(a is b for a, b in zip(inputs, other_inputs, strict=True))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=trees(), data=st.data())
def test_kept_capacity_inputs_follow_the_placements(objects: list[Any], data: st.DataObject) -> None:
    """What the capacity checks read of each queue's path (kept per queue until a queue on its path
    shifts: `ProportionPlugin._path_inputs`), read before and after pods are placed and taken back one at
    a time, is what the reader gives with nothing kept; and what each pod takes of its queue (kept per
    request, and the node's GPU memory for a shared GPU on a node: `_task_resources`) is what its request
    gives."""
    session = open_session(objects)
    read = session.points.job_capacity_inputs[session.points.job_capacity_checks[0]]
    plugin = read.__self__  # type: ignore[attr-defined]
    names = [q.name for q in session.snapshot.queues]
    tasks = [task for job in session.snapshot.jobs.values() for task in job.tasks]
    for _ in range(data.draw(st.integers(1, 6))):
        for name in names:
            read(name)
        task = data.draw(st.sampled_from(tasks))
        if task.status is TaskStatus.PENDING:
            session.state.place(task, 0, (), TaskStatus.ALLOCATED)
        else:
            session.state.unplace(task, TaskStatus.PENDING, -1, ())
        kept = {name: read(name) for name in names}
        plugin._path_values.clear()
        plugin._segments.clear()
        assert kept == {name: read(name) for name in names}
        # What each pod takes of its queue, kept by its request where it reads no node, as worked out.
        snapshot = session.snapshot
        for each in tasks:
            on_node = each.request.shared_gpu is not None and each.node >= 0
            memory = float(snapshot.nodes.gpu_memory_mib[each.node]) if on_node else None
            fresh = each.request.queue_resources(memory, snapshot.min_gpu_memory_mib)
            assert plugin._task_resources(each).values() == fresh.values()
