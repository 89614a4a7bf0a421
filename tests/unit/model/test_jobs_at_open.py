"""`JobsAtOpen.of` groups a bare pod's plain job whose pod waits (`JobInfo.lone_task`, most jobs of a first
cycle) without asking it `groups_of`'s questions: the groups must be the ones `groups_of` gives every job,
whatever the job's preemption delay, staleness and preemptibility."""

from __future__ import annotations

from helpers import node, pod, queue
from kai_scheduler.api import constants as c
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.snapshot import JOB_GROUPS, JobsAtOpen, JobTimes, PodState

DELAYED = {c.PREEMPTION_DELAY_ANNOTATION: "30s"}


def test_plain_jobs_are_grouped_as_groups_of_groups_every_job() -> None:
    cache = ClusterCache()
    cache.set_nodes([node("n1", gpus=8)])
    cache.set_queues([queue("q")])
    pods = [
        PodState(pod("waits"), rank=0),
        PodState(pod("delayed", annotations=DELAYED), rank=1),
        PodState(pod("stale"), rank=2),
        PodState(pod("runs", gpus=1), rank=3, node_name="n1", phase="Running"),
        PodState(pod("delayed-preemptible", annotations=DELAYED, priority_class="train"), rank=4),
    ]
    for state in pods:
        cache.upsert_pod(state)
    snapshot = cache.snapshot()
    jobs = list(snapshot.jobs.values())
    stale = next(job for job in jobs if job.lone_task is not None and job.lone_task.name == "stale")
    cache.set_job_times(stale.key, JobTimes(stale_since=5.0))
    snapshot = cache.snapshot()
    jobs = list(snapshot.jobs.values())
    assert len(jobs) == len(pods)
    assert all(job.lone_task is not None for job in jobs)  # every one a plain job

    found = JobsAtOpen.of(jobs)

    for position, name in enumerate(JOB_GROUPS):
        expected = [job.key for job in jobs if JobsAtOpen.groups_of(job)[position]]
        assert [job.key for job in getattr(found, name)] == expected, name
    assert len(found.waiting_delayed) == 2 and len(found.may_go_stale) == 1
