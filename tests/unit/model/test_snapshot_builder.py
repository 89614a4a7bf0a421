"""The snapshot (`build_snapshot`): jobs, tasks and queues as a session sees them.

Reference: kai-reference §2.1 (queue units, -1 unlimited), §2.2 (priority class resolution,
preemptibility), §3 (labels, default priority classes), §4.1 (session open: orphan queues dropped,
statuses), §4.2 (jobs filtered before actions), §5.1 (capacity minus other schedulers' pods);
simulate-contract "Rules".
"""

from __future__ import annotations

import pytest

from helpers import gang, node, pod, pod_group, priority_class, queue, snapshot_of
from kai_scheduler.model.jobs import TaskStatus


def test_a_pod_without_a_pod_group_gets_its_own_with_min_member_1_and_its_queue_label() -> None:
    snap = snapshot_of([node("n0"), queue("team"), pod("p", "team", gpus=1)])
    job = snap.jobs["default/pg-p"]
    assert job.queue == "team"
    assert job.min_member == 1
    assert [t.name for t in job.tasks] == ["p"]
    assert job.invalid_reason is None


def test_a_pod_without_a_queue_label_goes_to_default_queue() -> None:
    snap = snapshot_of([node("n0"), queue("default-queue"), pod("p", None)])
    assert snap.jobs["default/pg-p"].queue == "default-queue"


def test_pod_group_wins_over_its_pods_on_queue_and_priority() -> None:
    snap = snapshot_of(
        [
            node("n0"),
            queue("a"),
            queue("b"),
            pod_group("pg", "a", priority_class="inference"),
            pod("p0", "b", group="pg", priority_class="train"),
        ]
    )
    job = snap.jobs["default/pg"]
    assert job.queue == "a"
    assert job.priority == 125
    assert job.preemptible is False


@pytest.mark.parametrize(
    ("class_name", "priority", "preemptible"),
    [("train", 50, True), ("build-preemptible", 75, True), ("build", 100, False), ("inference", 125, False)],
)
def test_builtin_priority_classes_and_preemptibility(
    class_name: str, priority: int, preemptible: bool
) -> None:
    snap = snapshot_of([node("n0"), queue("q"), pod("p", priority_class=class_name)])
    job = snap.jobs["default/pg-p"]
    assert (job.priority, job.preemptible) == (priority, preemptible)


def test_default_priority_is_50_and_preemptible() -> None:
    snap = snapshot_of([node("n0"), queue("q"), pod("p")])
    job = snap.jobs["default/pg-p"]
    assert (job.priority, job.preemptible) == (50, True)


def test_preemptibility_label_and_spec_override_the_priority_rule() -> None:
    snap = snapshot_of(
        [
            node("n0"),
            queue("q"),
            pod(
                "np-train", priority_class="train", labels={"kai.scheduler/preemptibility": "non-preemptible"}
            ),
            pod_group("pre-inf", priority_class="inference", preemptibility="preemptible"),
            pod("i0", group="pre-inf"),
        ]
    )
    assert snap.jobs["default/pg-np-train"].preemptible is False
    assert snap.jobs["default/pre-inf"].preemptible is True


def test_a_redefined_priority_class_takes_its_new_value() -> None:
    from helpers import cluster_state
    from kai_scheduler.model.cache import build_snapshot

    objects = [node("n0"), queue("q"), priority_class("train", 200), pod("p", priority_class="train")]
    snap = build_snapshot(cluster_state(objects))
    job = snap.jobs["default/pg-p"]
    assert job.priority == 200
    assert job.preemptible is False


def test_missing_queue_and_orphan_queue_and_parent_queue_make_jobs_invalid() -> None:
    snap = snapshot_of(
        [
            node("n0"),
            queue("dept"),
            queue("team", parent="dept"),
            queue("lost", parent="nowhere"),
            pod("a", "ghost"),
            pod("b", "lost"),
            pod("c", "dept"),
            pod("d", "team"),
        ]
    )
    assert snap.jobs["default/pg-a"].invalid_reason.startswith("QueueDoesNotExist")
    assert snap.jobs["default/pg-b"].invalid_reason.startswith("QueueDoesNotExist")
    assert "nowhere" in snap.jobs["default/pg-b"].invalid_reason
    assert "leaf" in snap.jobs["default/pg-c"].invalid_reason
    assert snap.jobs["default/pg-d"].invalid_reason is None
    assert "lost" not in snap.queues
    assert snap.queues["dept"].children == ["team"]


def test_a_pod_naming_a_missing_pod_group_is_invalid() -> None:
    snap = snapshot_of([node("n0"), queue("q"), pod("p", group="nope")])
    assert "does not exist" in snap.jobs["default/nope"].invalid_reason


def test_a_gang_with_fewer_pods_than_min_member_is_not_ready() -> None:
    objects = [
        node("n0"),
        queue("q"),
        pod_group("g", min_member=3),
        pod("g-0", group="g"),
        pod("g-1", group="g"),
    ]
    snap = snapshot_of(objects)
    assert "2 of minMember 3" in snap.jobs["default/g"].invalid_reason


def test_task_statuses_from_runtime_state() -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=4),
            queue("q"),
            pod("pending"),
            pod("running", node_name="n0"),
            pod("bound-no-phase", node_name="n0", phase="Pending"),
            pod("leaving", node_name="n0", terminating=True),
            pod("done", node_name="n0", phase="Succeeded"),
        ]
    )
    statuses = {key.split("/")[1]: task.status for key, task in snap.tasks.items()}
    assert statuses == {
        "pending": TaskStatus.PENDING,
        "running": TaskStatus.RUNNING,
        "bound-no-phase": TaskStatus.RUNNING,
        "leaving": TaskStatus.RELEASING,
        "done": TaskStatus.SUCCEEDED,
    }


def test_pods_of_other_schedulers_hold_node_capacity_and_shrink_fair_share_capacity() -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=4, cpu="8"),
            queue("q"),
            pod("foreign", None, gpus=1, cpu="2", scheduler="default-scheduler", node_name="n0"),
            pod("foreign-unbound", None, gpus=1, scheduler="default-scheduler"),
        ]
    )
    assert snap.nodes.free_gpus[0] == 3
    assert snap.nodes.used_cpu[0] == 2000
    assert snap.capacity.gpu == 3
    assert snap.capacity.cpu == 6000
    assert snap.tasks == {}  # not ours to schedule


def test_queue_units_cpu_millicores_memory_megabytes_and_unlimited() -> None:
    snap = snapshot_of([node("n0"), queue("q", gpu=2, cpu=1500, memory=1000, gpu_limit=4)])
    q = snap.queues["q"]
    assert q.deserved.gpu == 2
    assert q.deserved.cpu == 1500  # already millicores
    assert q.deserved.memory == 1000 * 10**6  # MB
    assert q.limit.gpu == 4
    assert q.limit.cpu == -1 and q.limit.memory == -1
    assert q.priority == 100  # default queue priority


def test_gang_members_share_one_job_and_pod_set() -> None:
    snap = snapshot_of([node("n0"), queue("q"), *gang("g", size=3, min_member=2)])
    job = snap.jobs["default/g"]
    assert job.min_member == 2
    assert [t.name for t in job.tasks] == ["g-0", "g-1", "g-2"]
    assert list(job.podsets) == [""]
    assert job.podsets[""].min_member == 2


def test_sub_groups_become_pod_sets_and_pods_join_by_label() -> None:
    snap = snapshot_of(
        [
            node("n0"),
            queue("q"),
            pod_group(
                "g",
                min_member=3,
                sub_groups=[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 2}],
            ),
            pod("l", group="g", labels={"kai.scheduler/subgroup-name": "leader"}),
            pod("w0", group="g", labels={"kai.scheduler/subgroup-name": "workers"}),
            pod("w1", group="g", labels={"kai.scheduler/subgroup-name": "workers"}),
        ]
    )
    job = snap.jobs["default/g"]
    assert {name: [t.name for t in ps.tasks] for name, ps in job.podsets.items()} == {
        "leader": ["l"],
        "workers": ["w0", "w1"],
    }


def test_task_priority_label_is_read() -> None:
    snap = snapshot_of([node("n0"), queue("q"), pod("p", task_priority=7)])
    assert snap.tasks["default/p"].task_priority == 7


def test_a_running_fractional_pod_joins_its_named_gpu_group() -> None:
    snap = snapshot_of(
        [
            node("n0", gpus=2),
            queue("q"),
            pod("a", fraction=0.5, node_name="n0", labels={"runai-gpu-group": "grp"}),
            pod("b", fraction=0.25, node_name="n0", labels={"runai-gpu-group": "grp"}),
        ]
    )
    nodes = snap.nodes
    assert nodes.free_gpus[0] == 1
    assert nodes.group_by_id["grp"].used == pytest.approx(0.75)
    assert "grp" in snap.existing_gpu_groups
