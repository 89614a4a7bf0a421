"""Each job's times the cluster remembers for it (last start, stale since, last eviction: KAI keeps them
as PodGroup annotations), which the cache stamps on the job whenever it is made or they change."""

from __future__ import annotations

from collections.abc import Mapping

from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.snapshot import JobTimes


class JobTimesBook:
    __slots__ = ("by_job",)

    def __init__(self) -> None:
        self.by_job: dict[str, JobTimes] = {}

    def set(self, key: str, times: JobTimes) -> None:
        if times.empty():
            self.by_job.pop(key, None)
        else:
            self.by_job[key] = times

    def differences(self, times: Mapping[str, JobTimes]) -> dict[str, JobTimes]:
        """What to set so that the book holds exactly `times` (jobs left out have none)."""
        if times is self.by_job:
            return {}
        by_job = self.by_job
        changed = {key: JobTimes() for key in by_job.keys() - times.keys()}
        # A job new to the book differs without a comparison (dataclass equality is a Python call).
        changed.update(
            (key, value)
            for key, value in times.items()
            if (known := by_job.get(key)) is None or known != value
        )
        return changed


def stamp(job: JobInfo, times: JobTimes) -> None:
    job.last_start, job.stale_since, job.last_eviction, job.reservation = (
        times.last_start,
        times.stale_since,
        times.last_eviction,
        times.reservation,
    )
