"""Which pods one allocation attempt is about.

Reference: kai-reference §4.3 allocate (c): "unsatisfied podsets ask for minMember − allocated tasks;
satisfied elastic podsets ask for 1 more task"; §4.2 task order (taskorder label desc, then creation);
§4.2 subgrouporder (unsatisfied podsets first, then lower allocated/minMember).
"""

from __future__ import annotations

import itertools

import pytest

from helpers import gang, node, open_session, pod, pod_group, queue
from kai_scheduler.framework.gang import (
    _choose,
    _pending,
    fresh_tasks_to_allocate,
    kept_tasks,
    lone_next_pod,
    lone_whole_gang,
    next_request,
    next_signature,
    request_of,
    scheduling_signature,
    tasks_to_allocate,
)
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.model.jobs import TaskStatus, TopologyConstraint


def _names(tasks: list) -> list[str]:  # type: ignore[type-arg]
    return [t.name for t in tasks]


def test_an_unsatisfied_gang_asks_for_exactly_its_missing_members() -> None:
    session = open_session([node("n0"), queue("q"), *gang("g", size=5, min_member=3, gpus=1)])
    job = session.snapshot.jobs["default/g"]
    assert _names(tasks_to_allocate(session, job)) == ["g-0", "g-1", "g-2"]


def test_a_partly_running_gang_asks_for_the_rest_of_its_min_member() -> None:
    objects = [
        node("n0"),
        queue("q"),
        pod_group("g", min_member=3),
        pod("g-0", group="g", node_name="n0"),
        pod("g-1", group="g"),
        pod("g-2", group="g"),
        pod("g-3", group="g"),
    ]
    session = open_session(objects)
    job = session.snapshot.jobs["default/g"]
    assert _names(tasks_to_allocate(session, job)) == ["g-1", "g-2"]


def test_a_satisfied_elastic_job_asks_for_one_more() -> None:
    objects = [
        node("n0"),
        queue("q"),
        pod_group("g", min_member=2),
        pod("g-0", group="g", node_name="n0"),
        pod("g-1", group="g", node_name="n0"),
        pod("g-2", group="g"),
        pod("g-3", group="g"),
    ]
    session = open_session(objects)
    job = session.snapshot.jobs["default/g"]
    assert _names(tasks_to_allocate(session, job)) == ["g-2"]


def test_task_priority_label_orders_the_pods_chosen() -> None:
    objects = [
        node("n0"),
        queue("q"),
        pod_group("g", min_member=2),
        pod("g-0", group="g", task_priority=0),
        pod("g-1", group="g", task_priority=5),
        pod("g-2", group="g", task_priority=1),
    ]
    session = open_session(objects)
    job = session.snapshot.jobs["default/g"]
    assert _names(tasks_to_allocate(session, job)) == ["g-1", "g-2"]


def test_without_task_priority_creation_order_decides() -> None:
    objects = [
        node("n0"),
        queue("q"),
        pod_group("g", min_member=1),
        pod("z", group="g"),
        pod("a", group="g"),
    ]
    session = open_session(objects)
    assert _names(tasks_to_allocate(session, session.snapshot.jobs["default/g"])) == ["z"]


def test_sub_groups_each_ask_for_their_own_missing_members() -> None:
    objects = [
        node("n0"),
        queue("q"),
        pod_group(
            "g",
            min_member=3,
            sub_groups=[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 2}],
        ),
        pod("w0", group="g", labels={"kai.scheduler/subgroup-name": "workers"}),
        pod("w1", group="g", labels={"kai.scheduler/subgroup-name": "workers"}),
        pod("w2", group="g", labels={"kai.scheduler/subgroup-name": "workers"}),
        pod("l", group="g", labels={"kai.scheduler/subgroup-name": "leader"}),
    ]
    session = open_session(objects)
    chosen = _names(tasks_to_allocate(session, session.snapshot.jobs["default/g"]))
    assert sorted(chosen) == ["l", "w0", "w1"]


def test_request_of_sums_queue_resources() -> None:
    objects = [node("n0", gpu_memory=40000), queue("q"), *gang("g", size=2, gpus=1, cpu="500m", memory="1Gi")]
    session = open_session(objects)
    job = session.snapshot.jobs["default/g"]
    total = request_of(session, job.tasks)
    assert total.values() == (2.0, 1000.0, 2.0 * 2**30)


def test_a_signature_made_one_way_keeps_the_other_as_made_afresh() -> None:
    """`next_signature` asked with the queue keeps the one without too (and the other way round): each is
    what `scheduling_signature` makes, for gangs and single pods, before and after a placement."""
    objects = [node("n0"), queue("q"), *gang("g", size=3, min_member=2, gpus=1), pod("p", gpus=1)]
    for first_by_queue in (True, False):
        session = open_session(objects)
        for job in session.snapshot.jobs.values():
            for placed in (False, True):
                if placed:
                    task = tasks_to_allocate(session, job)[0]
                    statement = session.statement("allocate")
                    statement.allocate(task, 0, (), "test")
                    statement.commit()
                next_signature(session, job, by_queue=first_by_queue)
                for by_queue in (True, False):
                    tasks = tasks_to_allocate(session, job)
                    fresh = scheduling_signature(job, tasks, by_queue=by_queue)
                    assert next_signature(session, job, by_queue=by_queue) == fresh


def test_a_bare_pods_next_pod_is_its_pod_only_when_pending_and_none_is_evicted_virtually() -> None:
    """`lone_next_pod` is a bare pod's job's pod when the pod is pending and no pod is evicted virtually,
    and then `kept_tasks` gives that pod alone; None for every other status, while a pod is evicted
    virtually, and for a gang's pod."""
    session = open_session([node("n0"), queue("q"), pod("p", gpus=1), *gang("g", size=1, min_member=1)])
    bare, gang_job = session.snapshot.jobs["default/pg-p"], session.snapshot.jobs["default/g"]
    assert bare.lone_task is not None and gang_job.lone_task is None
    for virtually_evicted, status in itertools.product((False, True), TaskStatus):
        session.state.virtually_evicted = {"elsewhere/pod": TaskStatus.RUNNING} if virtually_evicted else {}
        for job in (bare, gang_job):
            job.tasks[0].status = status
            job.version += 1
        told = lone_next_pod(session, bare)
        if status is TaskStatus.PENDING and not virtually_evicted:
            assert told is bare.lone_task and kept_tasks(session, bare) == [told]
        else:
            assert told is None
        assert lone_next_pod(session, gang_job) is None


def test_a_bare_pods_signature_is_made_from_its_pod_as_the_general_form_makes_it() -> None:
    """A bare pod's plain job's signature (`lone_task`, made from its pod) is `scheduling_signature`'s for
    its next pods, both ways, for every status of the pod, with and without a nominated node, for pods
    whose requests or placements differ; and the same while a pod is evicted virtually (the general form
    then). Fails when the pod's shape, placement, nomination or status is left out."""
    objects = [
        node("n0", gpus=4),
        queue("q"),
        pod("one", gpus=1),
        pod("two", gpus=2),
        pod("fraction", fraction=0.5),
        pod("pinned", gpus=1, node_selector={"zone": "a"}),
    ]
    session = open_session(objects)
    jobs = list(session.snapshot.jobs.values())
    assert all(job.lone_task is not None for job in jobs)
    pending_signatures: set[tuple[object, ...]] = set()
    for virtually_evicted, status, nominated in itertools.product((False, True), TaskStatus, (None, "n0")):
        session.state.virtually_evicted = {"elsewhere/pod": TaskStatus.RUNNING} if virtually_evicted else {}
        for job in jobs:
            job.lone_task.status, job.lone_task.nominated_node = status, nominated  # type: ignore[union-attr]
            job.version += 1
            tasks = tasks_to_allocate(session, job)
            for by_queue in (False, True):
                signature = next_signature(session, job, by_queue=by_queue)
                assert signature == scheduling_signature(job, tasks, by_queue=by_queue), (job.key, status)
            if status is TaskStatus.PENDING:
                pending_signatures.add(next_signature(session, job, by_queue=False))
    assert len(pending_signatures) == 4 * 2  # (each pending pod's differs by job and by nomination)


def test_a_bare_pods_signature_unlike_the_general_forms_is_caught_when_verifying() -> None:
    """With `verify_carried` the signature made from a bare pod is compared with the general form: a job
    told a lone task it does not have (a constraint on its pods) raises `CarriedMismatch`."""
    session = open_session([node("n0", gpus=4), queue("q"), pod("p", gpus=1)])
    session.verify_carried = True
    (job,) = session.snapshot.jobs.values()
    assert next_signature(session, job) == scheduling_signature(job, tasks_to_allocate(session, job))
    job.topology = TopologyConstraint("rack-topology", required="rack")
    job._has_topology = None
    job.version += 1
    with pytest.raises(CarriedMismatch):
        next_signature(session, job)


def test_a_one_pod_job_asks_for_what_its_sub_group_tree_gives() -> None:
    """`fresh_tasks_to_allocate` takes a one-pod job's pod without walking its tree (`_only_pod`): the
    same pods as the walk (`_choose`) for every minimum of the job, its pod set and its root, every status
    of the pod, and a pod set that does not hold the pod; and a gang's as before. A bare pod's job as the
    cache made it (`lone_task`, told only while the job is left so) is given the same pods and request
    from its pod's status (fails when a pod not pending is handed out), and is a whole gang exactly when
    it is told nothing (`lone_whole_gang`), with the tally counted of a job told nothing (fails on a
    wrong count of any status)."""
    session = open_session([node("n0"), queue("q"), pod("p", gpus=1), *gang("g", size=2, min_member=1)])
    jobs = session.snapshot.jobs.values()
    lone = {job.key: job.lone_task for job in jobs}
    assert lone["default/pg-p"] is not None and lone["default/g"] is None
    choices = itertools.product((0, 1, 2), (None, 0, 1, 2), (0, 1, 2), (True, False), list(TaskStatus))
    for job_min, min_sub_group, podset_min, holds, status in choices:
        for job in jobs:
            as_made = (job_min, min_sub_group, podset_min, holds) == (1, None, 1, True)
            job.lone_task = lone[job.key] if as_made else None
            job.min_member, job.min_sub_group = job_min, min_sub_group
            job._root = None  # the tree is made again with them
            for podset in job.podsets.values():
                podset.min_member = podset_min
                podset.tasks = [task for task in job.tasks if task.podset is podset] if holds else []
            for task in job.tasks:
                task.status = status
            job.version += 1
            expected = _choose(session, job, _pending)
            assert fresh_tasks_to_allocate(session, job) == expected, (job.key, job_min, min_sub_group)
            assert tasks_to_allocate(session, job) == expected, (job.key, job_min, min_sub_group)
            assert next_request(session, job) == request_of(session, expected)
            assert job.has_pending() == any(task.status is TaskStatus.PENDING for task in job.tasks)
            if as_made:  # told its lone task, as a job told nothing
                told = [lone_whole_gang(job, tasks) for tasks in (expected, job.tasks[:1], job.tasks)]
                told_tally = job.tally()
                job.lone_task = None
                assert told == [lone_whole_gang(job, t) for t in (expected, job.tasks[:1], job.tasks)]
                assert told_tally == job.tally(), (job.key, status)


def test_asking_for_the_request_and_signature_leaves_the_kept_pods_as_handed_out() -> None:
    """`next_request` and `next_signature` read the kept pods without a copy; `tasks_to_allocate` hands
    out a copy, so a caller changing its list changes none of them (fails when the kept list is handed
    out)."""
    session = open_session([node("n0"), queue("q"), *gang("g", size=3, min_member=2, gpus=1)])
    job = session.snapshot.jobs["default/g"]
    asked = next_request(session, job).values()
    signature = next_signature(session, job)
    handed = tasks_to_allocate(session, job)
    handed.clear()
    assert _names(tasks_to_allocate(session, job)) == ["g-0", "g-1"]
    assert next_request(session, job).values() == asked == (2.0, 2000.0, 2.0 * 2**30)
    assert next_signature(session, job) == signature
    session.next_requests.clear()
    session.signatures.clear()
    assert next_request(session, job).values() == asked
    assert next_signature(session, job) == signature
