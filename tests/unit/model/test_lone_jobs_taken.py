"""`LoneJobs.take_current`: the plain jobs made as their pods arrived, handed to the cycle that makes every
job at once, are exactly those `LoneJobs.of` would give: none whose pod's state, the priority classes or
the pod's nomination changed since it was made."""

from __future__ import annotations

import pytest

from helpers import node, pod, queue
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.cache.lone_jobs import LoneJobMismatch
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import PodState


def _cache_with(*names: str) -> ClusterCache:
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=4)])
    cache.set_queues([queue("a")])
    cache.set_priorities(Priorities({"train": 50}))
    for rank, name in enumerate(names):
        cache.upsert_pod(PodState(pod(name, "a", gpus=1), rank))
    return cache


def _states(cache: ClusterCache) -> dict[str, PodState]:
    return cache._pods.pods


def test_the_jobs_made_as_their_pods_arrived_are_taken_once() -> None:
    cache = _cache_with("p1", "p2")
    taken = cache.lone_jobs.take_current(_states(cache))
    assert sorted(taken) == ["default/p1", "default/p2"]
    job = taken["default/p1"]
    assert job.key == "default/pg-p1" and job.lone_task is not None and job.lone_task.key == "default/p1"
    assert cache.lone_jobs.take_current(_states(cache)) == {}


def test_a_pod_whose_state_is_another_object_is_not_taken() -> None:
    cache = _cache_with("p1", "p2")
    states = dict(_states(cache))
    states["default/p1"] = PodState(pod("p1", "a", gpus=1), 0)
    assert sorted(cache.lone_jobs.take_current(states)) == ["default/p2"]


def test_no_job_is_taken_once_the_priority_classes_changed() -> None:
    cache = _cache_with("p1", "p2")
    cache.set_priorities(Priorities({"train": 60}))
    assert cache.lone_jobs.take_current(_states(cache)) == {}


def test_a_pod_nominated_since_it_arrived_is_not_taken() -> None:
    cache = _cache_with("p1", "p2")
    cache.nominate({"default/p2": ("n1", ())})
    assert sorted(cache.lone_jobs.take_current(_states(cache))) == ["default/p1"]


def test_the_cycles_rebuild_holds_the_jobs_taken() -> None:
    cache = _cache_with("p1")
    made = cache.lone_jobs._made["default/p1"].job
    cache.catch_up()
    assert cache._jobs.jobs["default/pg-p1"] is made
    assert made.invalid_reason is None


def test_verify_makes_each_job_taken_again_and_raises_on_a_difference() -> None:
    cache = _cache_with("p1")
    cache.lone_jobs.verify = True
    cache.lone_jobs._made["default/p1"].job.priority += 1
    with pytest.raises(LoneJobMismatch):
        cache.lone_jobs.take_current(_states(cache))
