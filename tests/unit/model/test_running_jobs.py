"""The running jobs made from what the change log names equal those counted afresh, over random changes
(jobs starting and stopping, noted; the log forgetting; every job made again), and so does the difference
of two answers, which `next_job_times` takes (jobs that started during a cycle)."""

from __future__ import annotations

import random

import pytest

from kai_scheduler.model.cache.running_jobs import RunningJobs, RunningJobsKeeper, RunningJobsMismatch
from kai_scheduler.model.job_changes import JobChangeLog

JOBS = [f"ns/job-{number}" for number in range(600)]


def _step(rng: random.Random, counts: dict[str, int], log: JobChangeLog) -> None:
    """A few jobs change (each noted, as the cache notes every job whose tasks change), some of them
    gaining or losing their running pods; now and then every job is made again."""
    if rng.random() < 0.02:
        log.note_everything()
        return
    for job in rng.sample(JOBS, rng.choice((1, 3, 40, 400))):
        log.note(job)
        if rng.random() < 0.5:
            counts[job] = counts.get(job, 0) + 1
        elif rng.random() < 0.7:
            counts.pop(job, None)


@pytest.mark.parametrize("seed", range(12))
def test_answers_equal_the_sets_counted_afresh(seed: int) -> None:
    rng = random.Random(seed)
    counts = {job: 1 for job in JOBS if rng.random() < 0.6}
    log = JobChangeLog()
    keeper = RunningJobsKeeper(log)
    keeper.verify = True
    before, plain_before = keeper.of(counts), frozenset(counts)
    for _ in range(60):
        _step(rng, counts, log)
        after, plain_after = keeper.of(counts), frozenset(counts)
        assert frozenset(after) == plain_after and after == plain_after and len(after) == len(plain_after)
        assert all((job in after) is (job in plain_after) for job in JOBS)
        assert after - before == plain_after - plain_before
        assert before - after == plain_before - plain_after
        assert after - plain_before == plain_after - plain_before  # another kind of set: walked
        before, plain_before = after, plain_after


def test_answers_share_their_base_until_enough_changed() -> None:
    counts = {job: 1 for job in JOBS[:300]}
    log = JobChangeLog()
    keeper = RunningJobsKeeper(log)
    first = keeper.of(counts)
    log.note(JOBS[400])
    counts[JOBS[400]] = 1
    second = keeper.of(counts)
    assert second - first == {JOBS[400]} and first - second == frozenset()
    for job in JOBS[:300]:  # more than the base's share changed: made again
        log.note(job)
    assert isinstance(keeper.of(counts), RunningJobs)
    assert keeper.of(counts) == frozenset(counts)


def test_a_change_the_log_missed_raises_under_verify() -> None:
    counts = {job: 1 for job in JOBS[:10]}
    log = JobChangeLog()
    keeper = RunningJobsKeeper(log)
    keeper.verify = True
    keeper.of(counts)
    log.note(JOBS[0])
    counts[JOBS[20]] = 1  # not noted
    with pytest.raises(RunningJobsMismatch):
        keeper.of(counts)
    keeper.verify = False
    assert JOBS[20] not in keeper.of(counts)  # what the shortcut would have answered
