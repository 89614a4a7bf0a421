"""`next_job_times` walks the times given once and the running jobs not at all (issue #23, point 1): the
same times, in the same order, as the rules applied to every job one by one (`_every_job_alike`), over
random inputs with jobs that start, stop, go stale, are evicted, take and hold reservations, and times
given empty or inconsistent with what ran."""

from __future__ import annotations

import random
from collections.abc import Mapping, Set
from dataclasses import replace

import pytest

from kai_scheduler.controlplane.bookkeeping import next_job_times
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.snapshot import JobTimes

# The arguments of `next_job_times`, in its order.
Inputs = tuple[
    Mapping[str, JobTimes],
    Set[str],
    Set[str],
    Mapping[str, float | None],
    float,
    Set[str],
    Mapping[str, Reservation | None],
]


def _every_job_alike(inputs: Inputs) -> dict[str, JobTimes]:
    """The rules of `next_job_times`, each applied to every job it may concern."""
    times, running_before, running_after, stale_since, now, evicted, reservations = inputs
    updated = dict(times)
    for job in running_after - running_before:
        updated[job] = replace(updated.get(job, JobTimes()), last_start=now)
    for job, current in times.items():
        if current.last_start is not None and job not in running_after:
            updated[job] = replace(updated[job], last_start=None)
    for job, since in stale_since.items():
        updated[job] = replace(updated.get(job, JobTimes()), stale_since=since)
    for job in evicted:
        updated[job] = replace(updated.get(job, JobTimes()), last_eviction=now)
    for job, reservation in reservations.items():
        updated[job] = replace(updated.get(job, JobTimes()), reservation=reservation)
    for job in running_after:
        if (held := updated.get(job)) is not None and held.reservation is not None:
            updated[job] = replace(held, reservation=None)
    return {job: t for job, t in updated.items() if not t.empty()}


def _maybe(rng: random.Random, value: float) -> float | None:
    return value if rng.random() < 0.5 else None


@pytest.mark.parametrize("seed", range(40))
def test_the_same_times_in_the_same_order(seed: int) -> None:
    rng = random.Random(seed)
    jobs = [f"ns/job-{i}" for i in range(rng.randint(0, 40))]
    held = Reservation(nodes=("n0",), start=5.0)
    times = {
        job: JobTimes(
            _maybe(rng, 1.0), _maybe(rng, 2.0), _maybe(rng, 3.0), held if rng.random() < 0.2 else None
        )
        for job in jobs
        if rng.random() < 0.7  # some empty, some inconsistent with what ran
    }
    running_before = {job for job in jobs if rng.random() < 0.5}
    running_after = {job for job in jobs if rng.random() < 0.5}
    stale_since = {job: _maybe(rng, 4.0) for job in jobs if rng.random() < 0.1}
    evicted = {job for job in jobs if rng.random() < 0.1}
    reservations = {job: held if rng.random() < 0.5 else None for job in jobs if rng.random() < 0.15}
    inputs = (
        times,
        frozenset(running_before),
        frozenset(running_after),
        stale_since,
        9.0,
        evicted,
        reservations,
    )
    expected = _every_job_alike(inputs)
    got = next_job_times(*inputs)
    assert list(got.items()) == list(expected.items())
