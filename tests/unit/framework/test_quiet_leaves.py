"""What allocate's walk keeps per leaf queue across sessions (`framework.quiet_walk.QuietLeaves`): kept
while the cache's log of changed jobs names none of the leaf's jobs, and forgotten for a leaf with a job
the session placed, evicted or ungated."""

from __future__ import annotations

from helpers import node, pod, queue, snapshot_of
from kai_scheduler.framework.quiet_walk import LeafOutcome, QuietLeaves
from kai_scheduler.model.job_changes import JobChangeLog, JobChangeMark
from kai_scheduler.model.jobs import JobInfo


def a_job() -> JobInfo:
    snapshot = snapshot_of([node("n0", gpus=1), queue("q"), pod("a", "q", gpus=2)])
    return next(iter(snapshot.jobs.values()))


def outcome_of(job: JobInfo) -> LeafOutcome:
    return LeafOutcome(
        jobs=[job],
        capacity=(),
        order=[0],
        keys=[job.key],
        parts=[],
        firsts=[],
        first_keys=[],
        followers=[],
        refusals=[],
        first_pods=[],
        shapes=[],
        written=[],
        written_from=[],
        leaf_words=None,
        leaf_words_from=None,
        answers=[],
        answers_key=None,
    )


def marks() -> tuple[JobChangeLog, JobChangeMark]:
    log = JobChangeLog()
    return log, JobChangeMark(log, log.stamp)


def test_a_leaf_none_of_whose_jobs_changed_is_kept() -> None:
    job, kept = a_job(), QuietLeaves()
    log, first = marks()
    kept.catch_up(first, {job.key: job})
    kept.by_leaf["q"] = outcome_of(job)
    log.note("other/job")  # (a job of another queue, or gone)
    kept.settle(set(), JobChangeMark(log, log.stamp), {job.key: job})
    assert "q" in kept.by_leaf


def test_a_leaf_with_a_job_the_cache_changed_is_forgotten() -> None:
    job, kept = a_job(), QuietLeaves()
    log, first = marks()
    kept.catch_up(first, {job.key: job})
    kept.by_leaf["q"] = outcome_of(job)
    log.note(job.key)
    kept.catch_up(JobChangeMark(log, log.stamp), {job.key: job})
    assert "q" not in kept.by_leaf


def test_a_job_of_the_queue_the_leaf_did_not_read_keeps_it() -> None:
    """A job of the leaf's queue that is not among its waiting jobs (a running one, finishing) is not what
    the outcome was worked out from."""
    snapshot = snapshot_of([node("n0", gpus=1), queue("q"), pod("a", "q", gpus=2), pod("b", "q", gpus=1)])
    job, running = snapshot.jobs.values()  # (both of queue "q"; the second not among the leaf's jobs)
    kept = QuietLeaves()
    log, first = marks()
    kept.catch_up(first, {job.key: job})
    kept.by_leaf["q"] = outcome_of(job)
    log.note(running.key)
    kept.catch_up(JobChangeMark(log, log.stamp), {job.key: job, running.key: running})
    assert "q" in kept.by_leaf


def test_every_leaf_is_forgotten_when_the_log_does_not_know() -> None:
    job, kept = a_job(), QuietLeaves()
    first = marks()[1]
    kept.catch_up(first, {job.key: job})
    kept.by_leaf["q"] = outcome_of(job)
    other = JobChangeLog()  # (another cache's)
    kept.catch_up(JobChangeMark(other, other.stamp), {job.key: job})
    assert not kept.by_leaf


def test_a_leaf_with_a_job_decided_on_is_forgotten() -> None:
    job, kept = a_job(), QuietLeaves()
    first = marks()[1]
    kept.catch_up(first, {job.key: job})
    kept.by_leaf["q"] = outcome_of(job)
    kept.settle({job}, first, {job.key: job})
    assert "q" not in kept.by_leaf
