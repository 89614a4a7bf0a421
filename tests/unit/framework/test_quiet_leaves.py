"""What allocate's walk keeps per leaf queue across sessions (`framework.quiet_walk.QuietLeaves.settle`):
kept at the jobs' versions only for the leaves the session found its jobs at, and forgotten for a leaf
with a job the session placed, evicted or ungated."""

from __future__ import annotations

from helpers import node, pod, queue, snapshot_of
from kai_scheduler.framework.quiet_walk import LeafOutcome, QuietLeaves
from kai_scheduler.model.jobs import JobInfo


def a_job() -> JobInfo:
    snapshot = snapshot_of([node("n0", gpus=1), queue("q"), pod("a", "q", gpus=2)])
    return next(iter(snapshot.jobs.values()))


def outcome_of(job: JobInfo) -> LeafOutcome:
    return LeafOutcome(
        jobs=[job],
        versions=job.version,
        capacity=(),
        order=[0],
        keys=[job.key],
        parts=[],
        firsts=[],
        followers={},
        refusals=[],
        first_pods=[],
        shapes=[],
        written=[],
        leaf_words=None,
        leaf_words_from=None,
        answers=[],
        answers_key=None,
    )


def test_a_confirmed_leaf_is_kept_at_its_jobs_versions() -> None:
    job, kept = a_job(), QuietLeaves()
    kept.by_leaf["q"] = outcome_of(job)
    kept.confirmed.add("q")
    job.version += 2  # an attempt placed and undone
    kept.settle(set())
    assert kept.by_leaf["q"].versions == job.version and not kept.confirmed


def test_a_leaf_not_confirmed_keeps_the_versions_it_was_made_at() -> None:
    job, kept = a_job(), QuietLeaves()
    made_at = job.version
    kept.by_leaf["q"] = outcome_of(job)
    job.version += 1  # changed in place by the cache between sessions: not this session's to vouch for
    kept.settle(set())
    assert kept.by_leaf["q"].versions == made_at


def test_a_leaf_with_a_job_decided_on_is_forgotten() -> None:
    for confirmed in (True, False):
        job, kept = a_job(), QuietLeaves()
        kept.by_leaf["q"] = outcome_of(job)
        if confirmed:
            kept.confirmed.add("q")
        kept.settle({job})
        assert "q" not in kept.by_leaf
