"""`Scheduler.job_order` (KAI's reflectjoborder): the pending jobs in the order the allocate action takes
them up, computed without allocating."""

from __future__ import annotations

from typing import Any

from helpers import bound_order, config, node, pod, priority_class, queue, run, snapshot_of
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig


def two_queues() -> list[Any]:
    """alpha is owed 4 GPUs and stays within them, beta is owed none: alpha's jobs come first, by
    priority, then beta's. Creation order is the reverse of both (beta first, lowest priority first), so
    an order by creation fails."""
    return [
        node("n0", gpus=8),
        priority_class("low", 10),
        priority_class("mid", 20),
        priority_class("high", 30),
        queue("beta", gpu=0),
        queue("alpha", gpu=4),
        pod("beta-low", "beta", gpus=1, priority_class="low"),
        pod("beta-high", "beta", gpus=1, priority_class="high"),
        pod("alpha-low", "alpha", gpus=1, priority_class="low"),
        pod("alpha-mid", "alpha", gpus=1, priority_class="mid"),
        pod("alpha-high", "alpha", gpus=1, priority_class="high"),
    ]


def order(objects: list[Any], scheduler_config: SchedulerConfig | None = None) -> list[str]:
    scheduler = Scheduler(scheduler_config or SchedulerConfig())
    return [job.key for job in scheduler.job_order(snapshot_of(objects), cycle=1, now=0.0)]


def test_the_job_order_is_the_order_allocate_binds_in() -> None:
    objects = two_queues()
    expected = ["alpha-high", "alpha-mid", "alpha-low", "beta-high", "beta-low"]
    assert bound_order(run(objects, cycles=1).cycles[0].decisions) == expected
    assert order(objects) == [f"default/pg-{name}" for name in expected]


def test_only_pending_jobs_that_allocate_would_try_are_listed() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod("running", gpus=1, node_name="n0"),
        pod("waiting", gpus=1),
        pod("lost", "no-such-queue", gpus=1),  # invalid as it is: allocate does not try it
    ]
    assert order(objects) == ["default/pg-waiting"]


def test_the_queue_depth_of_allocate_bounds_each_queue() -> None:
    depth = config(queueDepthPerAction={"allocate": 1})
    assert order(two_queues(), depth) == ["default/pg-alpha-high", "default/pg-beta-high"]


def test_nothing_is_allocated() -> None:
    snapshot = snapshot_of(two_queues())
    Scheduler(SchedulerConfig()).job_order(snapshot, cycle=1, now=0.0)
    assert all(task.node < 0 for task in snapshot.tasks.values())
    assert snapshot.nodes.free_gpus.tolist() == [8.0]
