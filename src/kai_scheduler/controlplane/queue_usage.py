"""Who holds a queue's resources (`kubectl kai usage QUEUE`, issue #25): each pod group of the queue (or of
its leaf queues) that holds resources, its user, what it holds, where it stands against the queue's quota
and fair share, and the order in which reclaim would take them.

The numbers are the scheduler's: a session opened on the state a cycle scheduled accounts the queues as
that cycle did (each job's allocation is `JobInfo.queue_sums`, what the proportion plugin added up), the
order is the victim actions' within a queue (`Scheduler.victim_order`), and the quota and fair share are
the cycle's own division (`FairShareRecord`) when one is given.

Where a pod group stands follows KAI's reclaim rules (kai-reference §5.4): walking the queue's
preemptible jobs in victim order, a job is taken while what the queue still holds before it is not
within its allocatable share min(limit, max(quota, fair share)) ("over fair share": any queue below its
own fair share may reclaim it) or not within its quota ("over quota": a queue still within its quota
may reclaim it); otherwise it is "within quota". Non-preemptible jobs are never reclaimed. For a parent
queue the same walk runs over every leaf's jobs against the parent's numbers, which is how reclaim
weighs the parent against a queue outside it; within each leaf the order is the leaf's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kai_scheduler.api.objects import Namespaced, is_unlimited
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.fair_share_record import FairShareRecord
from kai_scheduler.model.jobs import ALLOCATED, JobInfo
from kai_scheduler.model.queues import QueueInfo, effective_deserved, effective_limit
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES
from kai_scheduler.model.snapshot import ClusterState

# KAI's pod grouper copies the workload's (else the pod's) `user` label, and the pod's `user`
# annotation, onto the PodGroup (podgrouper's `UserLabelKey`).
USER_KEY: Final = "user"
OVER_FAIR_SHARE: Final = "over fair share"
OVER_QUOTA: Final = "over quota"
WITHIN_QUOTA: Final = "within quota"
NOT_RECLAIMABLE: Final = "not reclaimable (non-preemptible)"
_CPU_CORES: Final = 1000.0


class UnknownQueue(LookupError):
    """The queue asked about is not in the state."""


@dataclass(frozen=True, slots=True)
class Holder:
    pod_group: str  # namespace/name
    queue: str  # its leaf queue
    user: str | None
    priority: int
    preemptible: bool
    pods: int
    held: tuple[float, float, float]  # gpu, cpu millicores, memory bytes
    standing: str
    reclaim_order: int | None  # 1: reclaimed first; None: never


def queue_usage(
    config: SchedulerConfig,
    state: ClusterState,
    queue: str,
    record: FairShareRecord | None,
    *,
    cycle: int,
    now: float,
) -> dict[str, Any]:
    """The JSON answer for `queue` (cpu in cores, memory in bytes). Raises UnknownQueue."""
    snapshot = build_snapshot(state, now)
    if queue not in snapshot.queues:
        raise UnknownQueue(queue)
    tree = snapshot.queues
    leaves = {leaf.name for leaf in tree.leaves(queue)}
    jobs = Scheduler(config).victim_order(snapshot, cycle=cycle, now=now, queues=leaves)
    target = tree[queue]
    total = snapshot.capacity
    fair = _fair_share(target, record)
    quota = tuple(effective_deserved(target, r, total.get(r)) for r in RESOURCE_NAMES)
    allocatable = tuple(
        min(effective_limit(target, r), max(q, f))
        for r, q, f in zip(RESOURCE_NAMES, quota, fair, strict=True)
    )
    labels = _users(state)
    holders = _holders(jobs, labels, quota, allocatable)
    users: dict[str, list[float]] = {}
    for holder in holders:
        sums = users.setdefault(holder.user or "-", [0.0, 0.0, 0.0])
        for i, value in enumerate(holder.held):
            sums[i] += value
    return {
        "queue": queue,
        "cycle": cycle if record is None else record.cycle,
        "leafQueues": sorted(leaves),
        # null: unlimited, as `kubectl kai queues -o json` writes it.
        "quota": {
            name: None if is_unlimited(target.deserved.get(r)) else value
            for (name, value), r in zip(_json(quota).items(), RESOURCE_NAMES, strict=True)
        },
        "fairShare": _json(fair),
        "allocated": _json(tuple(target.allocated.get(r) for r in RESOURCE_NAMES)),
        "podGroups": [
            {
                "podGroup": h.pod_group,
                "queue": h.queue,
                "user": h.user,
                "priority": h.priority,
                "preemptible": h.preemptible,
                "pods": h.pods,
                "allocated": _json(h.held),
                "standing": h.standing,
                "reclaimOrder": h.reclaim_order,
            }
            for h in holders
        ],
        "users": [{"user": name, "allocated": _json(tuple(sums))} for name, sums in sorted(users.items())],
    }


def _fair_share(queue: QueueInfo, record: FairShareRecord | None) -> tuple[float, ...]:
    """The cycle's division when recorded, else the session's own (the same state)."""
    values = []
    for resource in RESOURCE_NAMES:
        division = record.resources.get(resource) if record is not None else None
        share = division.fair_share(queue.name) if division is not None else None
        values.append(queue.fair_share.get(resource) if share is None else share)
    return tuple(values)


def _users(state: ClusterState) -> dict[str, str]:
    """The user of each pod group and pod that names one, by key: the `user` label, else the `user`
    annotation (a PodGroup's come from its workload and pods, as the pod grouper copies them)."""
    users: dict[str, str] = {}
    objects: list[Namespaced] = [entry.pod_group for entry in state.pod_groups]
    objects.extend(entry.pod for entry in state.pods)
    for obj in objects:
        user = obj.metadata.labels.get(USER_KEY) or obj.metadata.annotations.get(USER_KEY)
        if user:
            users[obj.key] = user
    return users


def _holders(
    jobs: list[JobInfo],
    users: dict[str, str],
    quota: tuple[float, ...],
    allocatable: tuple[float, ...],
) -> list[Holder]:
    held_by = {job.key: _held(job) for job in jobs}
    left = [sum(held[i] for held in held_by.values()) for i in range(3)]
    out: list[Holder] = []
    order = 0
    for job in jobs:
        held = held_by[job.key]
        if not job.preemptible:
            standing, rank = NOT_RECLAIMABLE, None
        else:
            if not _within(left, allocatable):
                standing = OVER_FAIR_SHARE
            elif not _within(left, quota):
                standing = OVER_QUOTA
            else:
                standing = WITHIN_QUOTA
            order += 1
            rank = order
            left = [value - h for value, h in zip(left, held, strict=True)]
        user = users.get(job.key) or next((users[t.key] for t in job.tasks if t.key in users), None)
        pods = sum(1 for task in job.tasks if task.status in ALLOCATED)
        out.append(
            Holder(job.key, job.queue, user, job.priority, job.preemptible, pods, held, standing, rank)
        )
    # Non-preemptible jobs after the ones reclaim would take, in the order they were listed.
    out.sort(key=lambda h: h.reclaim_order is None)
    return out


def _held(job: JobInfo) -> tuple[float, float, float]:
    sums = job.queue_sums
    return (0.0, 0.0, 0.0) if sums is None else (sums[0], sums[1], sums[2])


def _within(amounts: list[float], limits: tuple[float, ...]) -> bool:
    return all(value <= limit + EPSILON for value, limit in zip(amounts, limits, strict=True))


def _json(values: tuple[float, ...]) -> dict[str, float]:
    gpu, cpu, memory = values
    return {"gpu": gpu, "cpu": cpu / _CPU_CORES, "memory": memory}


__all__ = ["OVER_FAIR_SHARE", "OVER_QUOTA", "WITHIN_QUOTA", "UnknownQueue", "queue_usage"]
