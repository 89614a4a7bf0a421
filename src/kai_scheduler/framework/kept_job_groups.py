"""The jobs the actions look at (`model.snapshot.JobsAtOpen`: the waiting, the preemptible running, those
that may go stale, and among the waiting the victims already and those with a preemption delay), carried
from one session to the next (issue #23, point 1).

Every session groups every job of the cluster when an action first asks (80,000 jobs at 5,000 nodes,
each asked for its pods' tally), though a cycle after one change moves a job or two. `KeptJobGroups`
keeps each group's jobs in creation order and, for a later snapshot of the same cache, groups again only
the jobs the cache's log names (`model.job_changes`) and those whose reason a plugin may set as it opens
(the jobs with a topology constraint, `ClusterSnapshot.topology_jobs`). It is asked once the plugins
have opened, as the session would first ask.

A group is in snapshot order, which is creation order (`rank`): the cache keeps its jobs sorted by rank,
and ranks are unique (pods and PodGroups share one rank space, a bare pod's job takes its pod's). Should
two jobs of a group share a rank, their order would be the cache's and not known here: the groups are
then made in full.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import ge

from kai_scheduler.model.job_changes import JobChangeMark
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.snapshot import JOB_GROUPS, ClusterSnapshot, JobsAtOpen


class _SharedRank(Exception):
    """Two jobs of a group have the same rank: their order is not known here."""


class _Group:
    """A group's jobs sorted by rank, with each key's rank to find it by."""

    __slots__ = ("jobs", "rank_of", "ranks")

    def __init__(self, jobs: tuple[JobInfo, ...]) -> None:
        self.jobs = list(jobs)
        ranks = self.ranks = [job.rank for job in jobs]
        self.rank_of = dict(zip([job.key for job in jobs], ranks, strict=True))
        # (Each rank compared with the next by `map`: a generator's step costs a few hundred instructions,
        # and a first cycle makes groups of every job, 15,000 waiting at 5,000 nodes.)
        if len(self.rank_of) != len(self.jobs) or any(map(ge, ranks, ranks[1:])):
            raise _SharedRank

    def put(self, key: str, job: JobInfo | None) -> None:
        """`key`'s job is `job` now (None: not in the group)."""
        rank = self.rank_of.pop(key, None)
        if rank is not None:
            where = bisect_left(self.ranks, rank)
            del self.ranks[where], self.jobs[where]
        if job is not None:
            where = bisect_left(self.ranks, job.rank)
            if where < len(self.ranks) and self.ranks[where] == job.rank:
                raise _SharedRank
            self.ranks.insert(where, job.rank)
            self.jobs.insert(where, job)
            self.rank_of[key] = job.rank


class KeptJobGroups:
    """The groups of the last snapshot asked about, brought up to date for the next (see the module doc)."""

    __slots__ = ("_groups", "_mark")

    def __init__(self) -> None:
        self._mark: JobChangeMark | None = None
        self._groups: tuple[_Group, ...] | None = None  # one for each of `JOB_GROUPS`

    def at_open(self, snapshot: ClusterSnapshot) -> JobsAtOpen:
        mark = snapshot.job_changes
        changed = mark.since(self._mark) if mark is not None and self._groups is not None else None
        self._mark = mark
        if changed is None or self._groups is None:
            return self._made_in_full(snapshot)
        jobs = snapshot.jobs
        try:
            for key in changed | snapshot.topology_jobs:
                job = jobs.get(key)
                within = JobsAtOpen.groups_of(job) if job is not None else (False,) * len(JOB_GROUPS)
                for group, member in zip(self._groups, within, strict=True):
                    group.put(key, job if member else None)
        except _SharedRank:
            return self._made_in_full(snapshot)
        return JobsAtOpen(*(tuple(group.jobs) for group in self._groups))

    def _made_in_full(self, snapshot: ClusterSnapshot) -> JobsAtOpen:
        at_open = JobsAtOpen.of(snapshot.jobs.values())
        try:
            self._groups = tuple(_Group(getattr(at_open, name)) for name in JOB_GROUPS)
        except _SharedRank:
            self._groups = None
        return at_open
