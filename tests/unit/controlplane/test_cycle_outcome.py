"""A cycle's outcome names the jobs it evicted a pod of as the cycle left them: its snapshot's jobs and
tasks are the cache's own dicts (`ClusterCache.snapshot`), which change once the cache catches up with
what happened after the cycle (here the evicted pod is deleted before the jobs' times are worked out)."""

from __future__ import annotations

from helpers import node, pod, queue
from kai_scheduler.controlplane.driver import CycleDriver
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import PodState


def test_the_evicted_jobs_are_those_of_the_cycle_after_the_cache_moved_on() -> None:
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=1)])
    cache.set_queues([queue("q")])
    cache.set_priorities(Priorities({"low": 10, "high": 200}))
    cache.upsert_pod(PodState(pod("victim", gpus=1, priority_class="low"), 0, "n1", "Running"))
    cache.upsert_pod(PodState(pod("urgent", gpus=1, priority_class="high"), 1))
    outcome = CycleDriver(SchedulerConfig(), cache).run(1, 0.0)
    decided = [(d.type, d.pod) for d in outcome.result.decisions]
    assert decided == [("evict", "default/victim"), ("pipeline", "default/urgent")]

    cache.remove_pod("default/victim")
    cache.catch_up()
    assert "default/victim" not in outcome.snapshot.tasks  # the cache's dict: the pod is gone
    assert outcome.evicted_jobs() == {"default/pg-victim"}
