"""The cluster cache lists jobs and tasks in creation order, as a session reads them, however their objects
came: a full build makes the jobs in the order their objects came (nearly creation order, and cheaper to
read), and must still hand them on in creation order."""

from __future__ import annotations

from helpers import node, pod, pod_group, queue
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import ClusterSnapshot, PodGroupState, PodState


def _ranks(snapshot: ClusterSnapshot) -> tuple[list[float], list[float]]:
    return [job.rank for job in snapshot.jobs.values()], [task.rank for task in snapshot.tasks.values()]


def test_a_full_build_lists_jobs_and_tasks_in_creation_order_whatever_order_they_came_in() -> None:
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=8)])
    cache.set_queues([queue("q")])
    # Newest first: bare pods, the pods of a gang, then their PodGroup (created before all of them).
    for rank in range(9, 5, -1):
        cache.upsert_pod(PodState(pod(f"bare-{rank}", gpus=1), rank, "n1", "Running"))
    for rank in (5, 3, 4, 2):
        cache.upsert_pod(PodState(pod(f"gang-{rank}", group="gang"), rank, None, "Pending"))
    cache.upsert_pod_group(PodGroupState(pod_group("gang", min_member=4), 0))
    cache.upsert_pod(PodState(pod("bare-1", gpus=1), 1, "n1", "Running"))

    jobs, tasks = _ranks(cache.snapshot())
    assert jobs == [0, 1, 6, 7, 8, 9]
    assert tasks == list(range(1, 10))

    # Everything made again (the priority classes changed): the same order.
    cache.set_priorities(Priorities({"custom": 10}))
    assert _ranks(cache.snapshot()) == (jobs, tasks)
