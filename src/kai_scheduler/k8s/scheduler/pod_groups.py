"""The scheduler's PodGroup effects: the job times as annotations (`kai.scheduler/stale-podgroup-timestamp`,
`kai.scheduler/last-eviction-timestamp` when a cycle evicts a pod of the job, `kai.scheduler/reservation`
with its events: `reservations.py`) and the status
`schedulingConditions` entry `UnschedulableOnNodePool` for this node pool with its reason and message, a
Warning event for each new reason (module doc of `loop.py`). The times are also kept in memory
(`job_times`), the last start only there: KAI writes it as `kai.scheduler/last-start-timestamp`, which
this scheduler reads but does not write (issue #23: one API write a started job fewer); after a restart
the job's running pods say when it started (`job_starts.py`).

The transitions a user follows on a PodGroup, as Normal events: `Evict` (KAI's reason) when a cycle evicts
pods of it, naming the action, the preemptor and the reason (`group_events`); `Running`, all its pods
running, is the status controller's (it counts pods by phase). No `Scheduled` event on the PodGroup: KAI
v0.17 writes none, and each bound pod's own `Scheduled` event (the binder's) already names its node: it
cost one API write per started job and said nothing new."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.api.reasons import code_of
from kai_scheduler.controlplane.bookkeeping import next_job_times
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import POD_GROUPS, ApiStatusError, JsonObject
from kai_scheduler.k8s.runtime.objects import annotations_of
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState
from kai_scheduler.k8s.scheduler.reservations import (
    HeldReservations,
    annotation_value,
    event_of,
    needs_writing,
)
from kai_scheduler.model.scheduling_backoff import prefixed, transition_id
from kai_scheduler.model.snapshot import JobTimes

# Annotations (staleness, last eviction, start estimate) and the scheduling conditions in the status.
ACCESS = (access(POD_GROUPS, "patch"), access(POD_GROUPS, "patch", subresource="status"))

UNSCHEDULABLE_ON_NODE_POOL = "UnschedulableOnNodePool"
GROUP_EVICTED = "Evict"  # KAI's reason for the event on an evicted PodGroup


def group_events(live: LiveState, result: SessionResult) -> list[tuple[str, str, str]]:
    """(job, reason, message) of the PodGroup events of one cycle: `Evict` for each (action, preemptor)
    that evicted pods of a job."""
    evicted: dict[tuple[str, str, str], list[str]] = defaultdict(list)  # (job, action, for) -> reasons
    for decision in result.decisions:
        job = live.job_of_pod.get(decision.pod)
        if job is None or job not in live.pod_groups:
            continue
        if decision.type == "evict":
            evicted[(job, decision.action, decision.for_job)].append(decision.reason)
    events = []
    for (job, action, preemptor), reasons in evicted.items():
        pods = f"{len(reasons)} pod{'s' if len(reasons) > 1 else ''}"
        by = f"{action} for {preemptor}" if preemptor else action
        events.append((job, GROUP_EVICTED, f"{pods} evicted by {by}: {reasons[0]}"))
    return events


def message_on(group: JsonObject, message: str, label_key: str) -> str:
    """What is written on a PodGroup and its pods for `message`: with `schedulingBackoff: 1`, prefixed
    with the PodGroup's node pool (`model.scheduling_backoff`)."""
    labels = (group.get("metadata") or {}).get("labels") or {}
    return prefixed(message, (group.get("spec") or {}).get("schedulingBackoff"), labels, label_key)


class PodGroupUpdates:
    """`label_key`: the node-pool label (messages name a PodGroup's pool); `backed_off`: the PodGroups the
    cache leaves out for their `schedulingBackoff`, which are not this scheduler's to write on."""

    def __init__(
        self,
        effects: Effects,
        node_pool: str,
        label_key: str = c.NODE_POOL_LABEL,
        backed_off: Callable[[], Collection[str]] = frozenset,
    ) -> None:
        self.effects = effects
        self.node_pool = node_pool
        self.label_key = label_key
        self.backed_off = backed_off
        self.job_times: dict[str, JobTimes] = {}  # last start / stale since, as last written
        self.job_times_changed: set[str] = set()  # jobs whose entry changed since the last build
        # Jobs whose times are looked at again after the next cycle: those whose pods or PodGroup changed
        # (kept until a cycle got that far), and those the last cycle decided on or found stale.
        self.jobs_changed: set[str] = set()
        self._decided_jobs: set[str] = set()
        self.held = HeldReservations()  # the GPUs the jobs' reservations hold, for the metrics

    def update(
        self, live: LiveState, result: SessionResult, now: float, report: CycleReport
    ) -> tuple[list[Awaitable[None]], set[str]]:
        """The writes of job times (annotations and `job_times`) and of the PodGroups' unschedulable
        conditions after a cycle, and the jobs the cycle placed. Only jobs whose pods or PodGroup changed
        since the last cycle that got this far, or that this cycle or the last decided on or reported
        staleness for, can get new times: for every other job this cycle would compute what the last one
        did (they are left as they are)."""
        job_pods = live.job_pods
        placed_jobs: set[str] = set()
        change: dict[str, int] = {}  # job -> pods this cycle binds (+) or evicts (-)
        evicted: set[str] = set()
        for decision in result.decisions:
            job = live.job_of_pod.get(decision.pod)
            if job is None:
                continue
            if decision.type == "evict":
                change[job] = change.get(job, 0) - 1
                evicted.add(job)
                continue
            placed_jobs.add(job)
            if decision.type == "bind":
                change[job] = change.get(job, 0) + 1
        decided_jobs = change.keys() | placed_jobs | result.stale_since.keys() | result.reservations.keys()
        touched = self.jobs_changed | decided_jobs | self._decided_jobs
        self.jobs_changed, self._decided_jobs = set(), decided_jobs
        jobs = {job for job in touched if job in live.pod_groups or job in job_pods}  # those that exist
        running = {job: pods.running for job in jobs if (pods := job_pods.get(job)) is not None}
        running_before = {job for job, n in running.items() if n > 0}
        running_after = {job for job in jobs if running.get(job, 0) + change.get(job, 0) > 0}

        annotations: dict[str, dict[str, str | None]] = {}

        def annotate(job: str, name: str, value: str | None) -> None:
            obj = live.pod_groups.get(job)
            if obj is None:
                return
            current = annotations_of(obj).get(name)
            if current != value:
                annotations.setdefault(job, {})[name] = value

        before = {job: live.job_times.get(job, JobTimes()) for job in jobs}
        after = next_job_times(
            before,
            running_before,
            running_after,
            result.stale_since,
            now,
            evicted,
            reservations=result.reservations,
        )
        reservation_events: list[tuple[str, str, str]] = []
        for job in jobs | after.keys():
            old, new = before.get(job, JobTimes()), after.get(job, JobTimes())
            obj = live.pod_groups.get(job)
            if obj is not None:
                # Written when it says something new; one a stopped scheduler left (or an unreadable
                # one) is taken off the first time this process looks at the job.
                current = annotations_of(obj).get(c.RESERVATION_ANNOTATION)
                first_look = job not in self.job_times
                if (old.reservation != new.reservation or first_look) and needs_writing(
                    current, new.reservation, self.effects.clock
                ):
                    value = new.reservation
                    annotate(
                        job,
                        c.RESERVATION_ANNOTATION,
                        None if value is None else annotation_value(value, self.effects.clock),
                    )
                event = event_of(old.reservation, new.reservation, job in running_after, self.effects.clock)
                if event is not None:
                    reservation_events.append((job, *event))
            if old.last_eviction != new.last_eviction and new.last_eviction is not None:
                # KAI stamps it and never takes it away (it starts the job's preemption delay again).
                annotate(
                    job, c.LAST_EVICTION_TIMESTAMP_ANNOTATION, self.effects.clock.stamp(new.last_eviction)
                )
            elif new.last_eviction is None and self._unreadable(
                live, job, c.LAST_EVICTION_TIMESTAMP_ANNOTATION
            ):
                # KAI reads an unreadable one as none and its status updater then removes it.
                annotate(job, c.LAST_EVICTION_TIMESTAMP_ANNOTATION, None)
        for job in placed_jobs:
            # A start-time estimate (start_times.py) is for a job that waits: it goes with its placement.
            annotate(job, c.ESTIMATED_START_ANNOTATION, None)
        for job, since in result.stale_since.items():
            annotate(
                job,
                c.STALE_PODGROUP_TIMESTAMP_ANNOTATION,
                None if since is None else self.effects.clock.stamp(since),
            )
        # Remembered for every job that exists: it overrides the annotations until the cache shows them
        # (the last start for good: no annotation of it is written).
        for job in touched:
            if job in jobs or job in after:
                self.job_times[job] = after.get(job, JobTimes())
            else:
                self.job_times.pop(job, None)
            self.held.note(job, self.job_times.get(job, JobTimes()).reservation)
        self.job_times_changed |= touched

        calls: list[Awaitable[None]] = []
        for job, changes in annotations.items():
            calls.append(
                self.effects.limited(
                    self._annotate(live.pod_groups[job], changes), report, f"annotate PodGroup {job}"
                )
            )
        # Only PodGroups with something to say or something said before can get new conditions.
        speaking = result.unschedulable.keys() | placed_jobs | live.conditioned_groups
        speaking -= set(self.backed_off())  # what a backed-off PodGroup says stays
        # Admitted at the queue-admission gate: the gated condition goes in the same transition (its
        # design), rather than staying until the pods are placed.
        admitted = {ungating.job for ungating in result.ungates} - result.unschedulable.keys()
        for job in sorted(job for job in speaking if job in live.pod_groups):
            obj = live.pod_groups[job]
            message = result.unschedulable.get(job) if job not in placed_jobs else None
            if message is not None:
                if job in job_pods and job_pods[job].running > 0:
                    continue  # KAI writes no condition on a job with allocated pods (what it said stays)
                message = message_on(obj, message, self.label_key)
            pods = job_pods.get(job)
            if (
                message is None
                and job not in admitted
                and pods is not None
                and (pods.unbound > 0 or pods.binding)
            ):
                # Not considered this cycle, or placed and its binds not yet confirmed: what it said last
                # stays (KAI v0.17 #1908), so a bind that fails still leaves why the pods waited.
                continue
            if message is None and not (obj.get("status") or {}).get("schedulingConditions"):
                continue  # nothing to say, nothing said before
            conditions = self._conditions(obj, message, now)
            if conditions is not None:
                call = self._set_conditions(obj, conditions, message, report)
                calls.append(self.effects.limited(call, report, f"status of PodGroup {job}"))
        report.pod_group_updates = len(calls)
        if self.effects.record_events:
            for job, reason, message in group_events(live, result) + reservation_events:
                call = self.effects.event(live.pod_groups[job], "Normal", reason, message)
                calls.append(self.effects.limited(call, report, f"event on PodGroup {job}"))
        return calls, placed_jobs

    def _unreadable(self, live: LiveState, job: str, name: str) -> bool:
        """Whether the PodGroup of `job` carries the annotation `name` and it is no RFC 3339 time."""
        obj = live.pod_groups.get(job)
        raw = None if obj is None else annotations_of(obj).get(name)
        if not raw:
            return False
        try:
            self.effects.clock.seconds(raw)
        except ValueError:
            return True
        return False

    async def _annotate(self, obj: JsonObject, changes: Mapping[str, str | None]) -> None:
        meta = obj["metadata"]
        try:
            await self.effects.client.patch(
                POD_GROUPS, meta["name"], {"metadata": {"annotations": dict(changes)}}, meta.get("namespace")
            )
        except ApiStatusError as error:
            if error.code != 404:
                raise

    def _conditions(self, obj: JsonObject, message: str | None, now: float) -> list[JsonObject] | None:
        """The new `schedulingConditions`, or None when nothing changes."""
        current: list[JsonObject] = list((obj.get("status") or {}).get("schedulingConditions") or [])
        ours = [
            cond
            for cond in current
            if cond.get("type") == UNSCHEDULABLE_ON_NODE_POOL and cond.get("nodePool") == self.node_pool
        ]
        others = [cond for cond in current if cond not in ours]
        if message is None:
            # Scheduled: KAI v0.17 (#1908) removes every pool's condition, not only this pool's.
            return [] if current else None
        reason = code_of(message)
        if ours and ours[0].get("reason") == reason and ours[0].get("message") == message and len(ours) == 1:
            return None
        # One more than the latest condition of any pool (KAI's setTransitionID), so that the newest
        # condition is the one `schedulingBackoff` reads.
        latest = max((transition_id(cond.get("transitionID")) for cond in current), default=0)
        transition = str(max(latest, 0) + 1)
        condition = {
            "type": UNSCHEDULABLE_ON_NODE_POOL,
            "nodePool": self.node_pool,
            "status": "True",
            "reason": reason,
            "message": message,
            "transitionID": transition,
            "lastTransitionTime": self.effects.clock.stamp(now),
            "reasons": [{"reason": reason, "message": message}],
        }
        return [*others, condition]

    async def _set_conditions(
        self, obj: JsonObject, conditions: list[JsonObject], message: str | None, report: CycleReport
    ) -> None:
        meta = obj["metadata"]
        try:
            await self.effects.client.patch(
                POD_GROUPS,
                meta["name"],
                {"status": {"schedulingConditions": conditions}},
                meta.get("namespace"),
                subresource="status",
            )
        except ApiStatusError as error:
            if error.code != 404:
                raise
            return
        if message is not None and self.effects.record_events:
            await self.effects.event(obj, "Warning", "Unschedulable", message)


__all__ = [
    "GROUP_EVICTED",
    "UNSCHEDULABLE_ON_NODE_POOL",
    "PodGroupUpdates",
    "group_events",
]
