"""stalegangeviction: a gang that keeps running below its minMember is evicted after a grace period.

A job is stale when it has pods running but fewer than a pod set's minMember (some of its pods failed or
were evicted) and none has succeeded. The first cycle that sees it stamps the time (KAI's
`kai.scheduler/stale-podgroup-timestamp`); once the job has been stale for
`defaultStalenessGracePeriod` (negative: never), all its running pods are evicted so that the gang can
start again whole. A job that is no longer stale has its stamp cleared.
"""

from __future__ import annotations

from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, TaskStatus


def is_stale(job: JobInfo) -> bool:
    tally = job.tally()
    return not tally.succeeded and tally.active_allocated > 0 and not tally.gang_satisfied


class StaleGangEviction:
    name = "stalegangeviction"

    def execute(self, session: Session) -> None:
        grace = session.config.default_staleness_grace_period
        updates = session.points.stale_updates
        for job in session.snapshot.jobs_at_open().may_go_stale:
            if not is_stale(job):
                if job.stale_since is not None:
                    updates[job.key] = None
                continue
            if job.stale_since is None:
                updates[job.key] = session.now
                continue
            if grace < 0 or session.now - job.stale_since < grace:
                continue
            self._evict(session, job, session.now - job.stale_since)
            updates[job.key] = None

    def _evict(self, session: Session, job: JobInfo, stale_for: float) -> None:
        statement = session.statement(self.name)
        running = job.active_allocated()
        reason = (
            f"stale gang {job.key}: {running} pods running, below its minMember {job.min_member}, "
            f"for {stale_for:g}s (grace period {session.config.default_staleness_grace_period:g}s)"
        )
        for task in job.tasks:
            if task.status is TaskStatus.RUNNING:
                statement.evict(task, reason)
        statement.commit()
