"""What a cluster remembers between cycles, by the same rules in the simulator and live mode: a pod's
phase as the scheduler sees it, and each job's start, staleness and last eviction times (KAI keeps the
last three on the PodGroup as `kai.scheduler/last-start-timestamp`, `kai.scheduler/stale-podgroup-timestamp`
and `kai.scheduler/last-eviction-timestamp`; they are read as RFC 3339 by `api.timestamps`)."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import replace

from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.snapshot import JobTimes

FINISHED_PHASES = ("Succeeded", "Failed")


def scheduler_phase(node_name: str | None, phase: str | None) -> tuple[str | None, str]:
    """(node, phase) as the scheduler sees a pod: bound to a node and not finished, it runs there and
    holds its resources (Unknown included, as Kubernetes counts it); otherwise it is not on a node, and
    Unknown counts as Pending."""
    raw = phase or "Pending"
    if node_name and raw not in FINISHED_PHASES:
        return node_name, "Running"
    return None, "Pending" if raw in ("Pending", "Unknown") else raw


def next_job_times(
    times: Mapping[str, JobTimes],
    running_before: Set[str],
    running_after: Set[str],
    stale_since: Mapping[str, float | None],
    now: float,
    evicted: Set[str] = frozenset(),
    reservations: Mapping[str, Reservation | None] | None = None,
) -> dict[str, JobTimes]:
    """The job times after a cycle: a job that went from no running pod to some has (re)started now
    (minimum runtimes count from here), one with no running pod has no start; the cycle's staleness
    updates (None: no longer stale) replace the old ones; a job the cycle evicted a pod of was last evicted
    now (its preemption delay starts again, as KAI stamps it when it commits an eviction); the cycle's
    reservation updates (None: let go) replace the old ones, and a job that runs holds none. Jobs with no
    time are left out."""
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
    for job, reservation in (reservations or {}).items():
        updated[job] = replace(updated.get(job, JobTimes()), reservation=reservation)
    for job in running_after:
        if (held := updated.get(job)) is not None and held.reservation is not None:
            updated[job] = replace(held, reservation=None)
    return {job: t for job, t in updated.items() if not t.empty()}
