"""Job order (priority, elastic rank, creation) and task order (kai.scheduler/task-priority, kubeflow, ray).

Reference: kai-reference §4.2 Job order ("`priority` (higher first), `elastic` (jobs below minAvailable
first, then exactly at min, then above) — then earlier creation timestamp, then UID"), Task order
("`kubeflow` (master/launcher first), `ray` (head first), `taskorder` (label `kai.scheduler/task-priority`
desc), then creation time"), §3 (elastic jobs: pods above minMember are allocated one at a time);
simulate-contract "Rules" (document order is creation order when there is no creationTimestamp).
"""

from __future__ import annotations

from helpers import bound_order, config, gang, node, one_cycle, open_session, pod, pod_group, queue
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.plugins.ordering import elastic_rank

ALLOCATE = config(actions="allocate")


def test_higher_priority_job_goes_first_even_if_newer() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q"),
        pod("old-train", gpus=1, priority_class="train"),
        pod("new-build", gpus=1, priority_class="build-preemptible"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["new-build"]


def test_equal_priority_older_job_goes_first() -> None:
    objects = [node("n0", gpus=1), queue("q"), pod("first", gpus=1), pod("second", gpus=1)]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["first"]


def test_creation_timestamp_beats_document_order() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q"),
        pod("listed-first", gpus=1, created="2025-12-31T12:00:00Z"),
        pod("created-first", gpus=1, created="2025-12-31T06:00:00Z"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["created-first"]


def test_a_job_below_its_min_member_goes_before_one_at_its_min() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        # older elastic job, already at its minMember of 1, wants one more
        pod_group("elastic", min_member=1),
        pod("elastic-0", group="elastic", gpus=1, node_name="n0"),
        pod("elastic-1", group="elastic", gpus=1),
        # newer job with nothing running yet
        pod("fresh", gpus=1),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["fresh"]


def test_elastic_jobs_get_min_member_first_then_one_more_per_pass() -> None:
    objects = [
        node("n0", gpus=6),
        queue("q"),
        *gang("a", size=4, min_member=2, gpus=1),
        *gang("b", size=4, min_member=2, gpus=1),
    ]
    # a's gang (2), then b's gang (below min beats at min), then one more each, the older job first.
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["a-0", "a-1", "b-0", "b-1", "a-2", "b-2"]


def test_elastic_rank_values() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q"),
        pod_group("g", min_member=2),
        pod("g-0", group="g", node_name="n0"),
        pod("g-1", group="g"),
        pod("g-2", group="g"),
    ]
    session = open_session(objects)
    job: JobInfo = session.snapshot.jobs["default/g"]
    assert elastic_rank(job) == 0
    # A pod's status changes with a version bump (as a session's state changes do): counts are cached.
    session.snapshot.tasks["default/g-1"].status = session.snapshot.tasks["default/g-0"].status
    job.version += 1
    assert elastic_rank(job) == 1
    session.snapshot.tasks["default/g-2"].status = session.snapshot.tasks["default/g-0"].status
    job.version += 1
    assert elastic_rank(job) == 2


def test_priority_comes_before_elastic_rank() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod_group("elastic", min_member=1, priority_class="build-preemptible"),
        pod("elastic-0", group="elastic", gpus=1, node_name="n0"),
        pod("elastic-1", group="elastic", gpus=1),
        pod("fresh", gpus=1, priority_class="train"),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["elastic-1"]


# --- task order ----------------------------------------------------------------------------------


def test_task_priority_decides_which_pods_of_an_elastic_job_run() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod_group("g", min_member=1),
        pod("g-low", group="g", gpus=1, task_priority=0),
        pod("g-high", group="g", gpus=1, task_priority=10),
        pod("g-mid", group="g", gpus=1, task_priority=5),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["g-high", "g-mid"]


def test_task_priority_orders_the_binds_of_a_gang() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q"),
        pod_group("g", min_member=3),
        pod("g-0", group="g", gpus=1),
        pod("g-1", group="g", gpus=1, task_priority=2),
        pod("g-2", group="g", gpus=1, task_priority=1),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["g-1", "g-2", "g-0"]


def test_kubeflow_master_and_ray_head_go_first() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q"),
        pod_group("tf", min_member=3),
        pod("tf-worker-0", group="tf", gpus=1, labels={"training.kubeflow.org/replica-type": "worker"}),
        pod("tf-worker-1", group="tf", gpus=1, labels={"training.kubeflow.org/replica-type": "worker"}),
        pod("tf-master-0", group="tf", gpus=1, labels={"training.kubeflow.org/replica-type": "master"}),
        pod_group("ray", min_member=2),
        pod("ray-worker", group="ray", gpus=1, labels={"ray.io/node-type": "worker"}),
        pod("ray-head", group="ray", gpus=1, labels={"ray.io/node-type": "head"}),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == [
        "tf-master-0",
        "tf-worker-0",
        "tf-worker-1",
        "ray-head",
        "ray-worker",
    ]
