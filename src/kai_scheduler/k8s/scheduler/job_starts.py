"""A job's last start as its pods show it, for minimum runtimes after a restart (issue #23).

KAI stamps a PodGroup's `kai.scheduler/last-start-timestamp` when allocate places a job that had no pod
allocated; this scheduler writes no such annotation (one API write a started job fewer) and reads the same
instant off the cluster instead. Every pod that runs now was placed after the job's last start (at that
start the job had no pod allocated), so the job's last start is the earliest placement among the pods
it runs now: a pod's `PodScheduled=True` transition, which the API server stamps at the binding (RFC 3339
seconds, like the annotation), or, for a pod still binding, its BindRequest's creation, which the
scheduler makes in the cycle that placed it. A job restarted with new pods starts at its new pods' first
placement; an elastic job that grows keeps the start of its oldest running pod.

Both are the moment of the bind or of the request, at or just after the cycle KAI would stamp, so the
derived start is never earlier than KAI's: a job protected by KAI's rule stays protected. Where the first
pods of a run have finished while others run on, the oldest running pod is later than KAI's stamp (it
protects a little longer). A PodGroup's annotation (a cluster migrated from KAI, or this scheduler before
this change) is still read and wins when it is newer (`later_start`).

In-process the loop's own bookkeeping (`controlplane.bookkeeping.next_job_times`, the cycle's `now`)
overrides both; this is what a scheduler that just started, or a new leader, reads.
"""

from __future__ import annotations

from dataclasses import replace

from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.object_times import stamp_at
from kai_scheduler.model.snapshot import JobTimes

POD_SCHEDULED = "PodScheduled"


def placed_at(clock: SessionClock, pod: JsonObject, request: JsonObject | None) -> float | None:
    """When a running pod was placed, on the session clock: its PodScheduled=True transition when bound,
    its BindRequest's creation while binding; None when neither can be read."""
    if (pod.get("spec") or {}).get("nodeName"):
        for condition in (pod.get("status") or {}).get("conditions") or ():
            if condition.get("type") == POD_SCHEDULED and condition.get("status") == "True":
                stamp = condition.get("lastTransitionTime")
                try:
                    return clock.seconds(str(stamp)) if stamp else None
                except ValueError:
                    return None
        return None
    return stamp_at(clock, request, "creationTimestamp") if request is not None else None


def later_start(times: JobTimes, placed: float | None) -> JobTimes:
    """`times` (from the PodGroup's annotations) with the start its pods show when that is newer. A job
    whose pods run (`placed` is not None) holds no reservation, whatever its annotation says (one left by
    a scheduler that stopped before it could take it off): reservations are for jobs that wait."""
    if placed is None:
        return times
    if times.reservation is not None:
        times = replace(times, reservation=None)
    if times.last_start is not None and times.last_start >= placed:
        return times
    return replace(times, last_start=placed)


class JobStarts:
    """Per job, when each of its running pods was placed (kept per changed pod), and the jobs whose
    earliest placement may have moved since `take_changed`."""

    def __init__(self) -> None:
        self._by_job: dict[str, dict[str, float]] = {}
        self._of_pod: dict[str, tuple[str, float]] = {}  # pod key -> (its job, when it was placed)
        self._changed: set[str] = set()

    def note(self, pod: str, job: str | None, placed: float | None) -> None:
        """The pod `pod` now runs in `job`, placed at `placed` (None for either: it runs in no job of ours,
        or when is not known)."""
        new = (job, placed) if job is not None and placed is not None else None
        old = self._of_pod.get(pod)
        if old == new:
            return
        if old is not None:
            pods = self._by_job[old[0]]
            del pods[pod]
            if not pods:
                del self._by_job[old[0]]
            self._changed.add(old[0])
            del self._of_pod[pod]
        if new is not None:
            self._of_pod[pod] = new
            self._by_job.setdefault(new[0], {})[pod] = new[1]
            self._changed.add(new[0])

    def earliest(self, job: str) -> float | None:
        pods = self._by_job.get(job)
        return min(pods.values()) if pods else None

    def jobs(self) -> set[str]:
        return set(self._by_job)

    def take_changed(self) -> set[str]:
        changed, self._changed = self._changed, set()
        return changed


__all__ = ["POD_SCHEDULED", "JobStarts", "later_start", "placed_at"]
