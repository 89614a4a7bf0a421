"""stalegangeviction: a gang that keeps running below its minMember is evicted after a grace period.

A job is stale when it has pods running but fewer than a pod set's minMember (some of its pods failed or
were evicted) and none has succeeded. The first cycle that sees it stamps the time (KAI's
`kai.scheduler/stale-podgroup-timestamp`); once the job has been stale for its grace period, all its
running pods are evicted so that the gang can start again whole. The grace period is the PodGroup's
`spec.stalenessGracePeriod` when set, else the scheduler's `defaultStalenessGracePeriod`; negative means
never, zero evicts in the cycle that first finds it stale (KAI v0.17, `stalegangeviction.go`). A job that is
no longer stale has its stamp cleared.
"""

from __future__ import annotations

from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskStatus


def is_stale(job: JobInfo) -> bool:
    tally = job.tally()
    return not tally.succeeded and tally.active_allocated > 0 and not tally.gang_satisfied


def grace_period(job: JobInfo, default: float) -> float:
    """The job's staleness grace period in seconds: its PodGroup's own, else the scheduler's default."""
    return default if job.staleness_grace is None else job.staleness_grace


class StaleGangEviction:
    name = "stalegangeviction"

    def execute(self, session: Session) -> None:
        default = session.config.default_staleness_grace_period
        updates = session.points.stale_updates
        for job in session.snapshot.jobs_at_open().may_go_stale:
            if not is_stale(job):
                if job.stale_since is not None:
                    updates[job.key] = None
                continue
            since = job.stale_since
            if since is None:
                since = updates[job.key] = session.now
            grace = grace_period(job, default)
            if grace < 0 or session.now - since < grace:
                continue
            self._evict(session, job, session.now - since, grace)
            updates[job.key] = None

    def _evict(self, session: Session, job: JobInfo, stale_for: float, grace: float) -> None:
        statement = session.statement(self.name)
        running = job.active_allocated()
        below = f"below its minMember {job.min_member}"
        # The job has its own minimum: say which pod set lacks its (a sub-group a minSubGroup left pending
        # is one, as KAI's IsStale asks every leaf).
        podset = next((p for p in job.podsets.values() if not p.is_satisfied()), None)
        if running >= job.min_member and podset is not None:
            where = f"sub-group {podset.name} " if len(job.podsets) > 1 else ""
            below = f"{where}below its minMember {podset.min_member}"
        reason = (
            f"stale gang {job.key}: {running} pods running, {below}, "
            f"for {stale_for:g}s (grace period {grace:g}s)"
        )
        for task in job.tasks:
            if task.status is TaskStatus.RUNNING:
                statement.evict(task, reason)
        statement.commit()
