"""Accounted-resource limits (KAI's AccountedResource design, phase 1): a queue's `spec.accountedResources`
hold for the queue and every ancestor, on every placement.

Opened by the proportion plugin, next to the queue limits of `spec.resources` it checks, when the snapshot
has accounted resources at all (`ClusterSnapshot.accounted`); a cluster without them runs none of this.
A queue's limit for a resource is its own entry, else the AccountedResource's `defaults.limit`; -1 is
unlimited. Limits only: these resources take no part in fair share, queue order or reclaim.

What a pod charges can depend on its node (`model.accounted`), so there are two checks:

* per candidate node (a task predicate): a node where the pod's charge would take a queue on its path
  over a limit is no candidate. A pod over its queue's H200 limit may still go to an A100 node; when
  other nodes lack room, it waits as any pod without room does (a new A100 node would help);
* per attempt (a job capacity check, KAI's OverLimit path): the attempt's pods charge at least their
  cheapest node among those they may use (node selector, affinity, taints); when even that takes a
  queue over a limit, no node can help and the job waits with `OverLimit` naming the resource. A queue
  naming an AccountedResource that does not exist blocks its jobs (`AccountedResourceNotFound`).

At queue admission (the `ungate` action, `framework.admission_checks`) the same limits decide which gated
pods lose their gate, as KAI's queue-admission design asks of every queue-capacity failure: a pod group
whose pods' least charge (the per-attempt rule above: exact for requests and annotations, the cheapest
node they may use for node-derived charges, so gating never holds back pods some node would take) takes a
queue over a limit stays gated, and what is admitted counts as held until the action ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from kai_scheduler.api.reasons import ACCOUNTED_RESOURCE_NOT_FOUND, OVER_LIMIT, WaitReason
from kai_scheduler.framework.gang import tasks_to_allocate
from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.accounted import AccountedInputs, Charges, queue_usage, shown
from kai_scheduler.model.admission import PodAsk
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.queues import QueueInfo, is_unlimited
from kai_scheduler.model.resources import Resources
from kai_scheduler.plugins.shared_claims import open_shared_claims

REJECTION: Final = "node(s) would take the queue over an accounted-resource limit"
_RELATIVE: Final = 1e-9  # sums of fractions and of bytes alike compare within this part of the limit

# (queue, its limit) for each queue on a path with a finite limit on one resource.
Bounds = list[tuple[str, float]]


class AccountedLimits:
    """See the module doc. Keeps each queue's usage current as actions place and evict pods."""

    def __init__(self, session: Session, inputs: AccountedInputs) -> None:
        self._session = session
        self._definitions = inputs.definitions
        self.charges = Charges(inputs, session.snapshot.nodes, session.snapshot.dra)
        self.usage = queue_usage(session.snapshot, self.charges)
        self._paths: dict[str, list[QueueInfo]] = {}
        self._limited: dict[str, dict[str, Bounds]] = {}
        self._everywhere = np.ones(session.snapshot.nodes.size, dtype=np.bool_)
        self._everywhere.flags.writeable = False  # handed out to every pod no limit concerns
        self._nowhere = np.zeros(session.snapshot.nodes.size, dtype=np.bool_)
        self._nowhere.flags.writeable = False
        # While the ungate action runs: each queue's usage before its reservations (put back at the end).
        self._admitting: dict[str, dict[str, float]] | None = None

    def register(self) -> None:
        points = self._session.points
        points.job_capacity_checks.append(self.over_limit)
        points.task_predicates.append(
            NamedPredicate("accounted-limits", REJECTION, self.nodes_passing, self._depends_on)
        )
        points.on_allocate.append(self._on_allocate)
        points.on_deallocate.append(self._on_deallocate)
        points.admission_checks.append(self)
        # The nodes a pod may use now depend on its queue: a shape that found no room for one queue's job
        # may find it for another's.
        points.queue_bound_placement = True
        # Pods alike but for an annotation a source counts charge differently: not alike for allocate.
        if self.charges.counts_annotations:
            points.signature_reads.append(("accounted-annotations", self.charges.annotations_of))

    # --- the checks ---------------------------------------------------------------------------------

    def nodes_passing(self, task: TaskInfo) -> BoolArray:
        limited = self._limits_on_path(task.job.queue)
        if not limited:
            return self._everywhere
        charges = self.charges.on_nodes(task)
        passing: BoolArray | None = None
        for name, bounds in limited.items():
            charge = charges.get(name)
            if charge is None:
                continue
            room = min(
                limit - self.usage[queue].get(name, 0.0) + _tolerance(limit) for queue, limit in bounds
            )
            if isinstance(charge, float):
                if charge > room:
                    return self._nowhere
                continue
            fits = np.asarray(charge <= room, dtype=np.bool_)
            passing = fits if passing is None else passing & fits
        return self._everywhere if passing is None else passing

    def over_limit(self, job: JobInfo, request: Resources) -> str | None:
        """Why the job's next attempt cannot take any node it may use (None: some node may do)."""
        missing = self._missing_reference(job.queue)
        if missing is not None:
            return missing
        if self._admitting is not None:
            return None  # the admission check judges the pods (its reservations hold the waiting ones)
        return self._exceeded(job, tasks_to_allocate(self._session, job))

    def _exceeded(self, job: JobInfo, pods: Sequence[PodAsk]) -> str | None:
        """The OverLimit reason when the pods' least charges take a queue on the job's path over a limit."""
        limited = self._limits_on_path(job.queue)
        if not limited:
            return None
        least = self._least_charges(pods, set(limited))
        for name, bounds in limited.items():
            asked = least.get(name, 0.0)
            if asked <= 0.0:
                continue
            for queue, limit in bounds:
                used = self.usage[queue].get(name, 0.0)
                if used + asked > limit + _tolerance(limit):
                    return WaitReason(
                        f"OverLimit: queue {queue} would exceed its accounted {name} limit "
                        f"({shown(used)} used + {shown(asked)} requested > limit {shown(limit)})",
                        OVER_LIMIT,
                    )
        return None

    def _least_charges(self, tasks: Sequence[PodAsk], names: set[str]) -> dict[str, float]:
        """Per resource, the least the pods charge together: each on the cheapest node it may use."""
        least: dict[str, float] = {}
        for task in tasks:
            usable: BoolArray | None = None
            for name, charge in self.charges.on_nodes(task).items():
                if name not in names:
                    continue
                if not isinstance(charge, float):
                    if usable is None:
                        usable = self._session.usable_nodes([task])
                    if not usable.any():
                        continue
                    charge = float(charge[usable].min())
                least[name] = least.get(name, 0.0) + charge
        return least

    # --- queue admission (framework.admission_checks) ----------------------------------------------

    def begin_admission(self) -> None:
        self._admitting = {}

    def admission_refusal(self, job: JobInfo, pods: Sequence[PodAsk]) -> str | None:
        return self._missing_reference(job.queue) or self._exceeded(job, pods)

    def reserve_admission(self, job: JobInfo, pods: Sequence[PodAsk]) -> None:
        before = self._admitting
        assert before is not None, "reserve_admission outside begin_admission/end_admission"
        limited = self._limits_on_path(job.queue)
        if not limited or not pods:
            return
        least = self._least_charges(pods, set(limited))
        for queue in self._path(job.queue):
            held = self.usage[queue.name]
            before.setdefault(queue.name, dict(held))
            for name, amount in least.items():
                held[name] = held.get(name, 0.0) + amount

    def end_admission(self) -> None:
        for queue, held in (self._admitting or {}).items():
            usage = self.usage[queue]  # put back as it was, not subtracted: floats
            usage.clear()
            usage.update(held)
        self._admitting = None

    def _missing_reference(self, queue_name: str) -> str | None:
        for queue in self._path(queue_name):
            for ref in queue.accounted_limits:
                if ref not in self._definitions:
                    return WaitReason(
                        f"{ACCOUNTED_RESOURCE_NOT_FOUND}: queue {queue.name} names AccountedResource {ref}, "
                        "which does not exist",
                        ACCOUNTED_RESOURCE_NOT_FOUND,
                    )
        return None

    # --- limits and usage ---------------------------------------------------------------------------

    def _path(self, queue_name: str) -> list[QueueInfo]:
        path = self._paths.get(queue_name)
        if path is None:
            queues = self._session.snapshot.queues
            path = self._paths[queue_name] = queues.ancestry(queue_name) if queue_name in queues else []
        return path

    def _limits_on_path(self, queue_name: str) -> dict[str, Bounds]:
        """Per resource with a finite limit somewhere on the queue's path: the queues and their limits."""
        limited = self._limited.get(queue_name)
        if limited is None:
            limited = {}
            for queue in self._path(queue_name):
                for name, definition in self._definitions.items():
                    limit = queue.accounted_limits.get(name, definition.default_limit)
                    if not is_unlimited(limit):
                        limited.setdefault(name, []).append((queue.name, limit))
            self._limited[queue_name] = limited
        return limited

    def _on_allocate(self, task: TaskInfo) -> None:
        self._shift(task, 1.0)

    def _on_deallocate(self, task: TaskInfo) -> None:
        self._shift(task, -1.0)

    def _shift(self, task: TaskInfo, sign: float) -> None:
        if task.node < 0:
            return
        charged = self.charges.on_node(task, task.node)
        if not charged:
            return
        for queue in self._path(task.job.queue):
            held = self.usage[queue.name]
            for name, amount in charged.items():
                held[name] = held.get(name, 0.0) + sign * amount

    def _depends_on(self, task: TaskInfo) -> tuple[str, tuple[str | None, ...]] | None:
        # The answer reads the job's queue (with its usage, which moves as pods are placed and evicted: the
        # victim search then looks beyond its victims' nodes) and the annotations some source counts;
        # nothing of the pod where no limit is on its queue's path.
        if not self._limits_on_path(task.job.queue):
            return None
        return task.job.queue, self.charges.annotations_of(task)


def _tolerance(limit: float) -> float:
    return _RELATIVE * max(1.0, abs(limit))


def open_accounted_limits(session: Session) -> AccountedLimits | None:
    """The limits' checks on the session, when the snapshot has accounted resources (None otherwise)."""
    inputs = session.snapshot.accounted
    if inputs is None:
        return None
    limits = AccountedLimits(session, inputs)
    limits.register()
    open_shared_claims(session)
    return limits
