"""A PodGroup's job made as the PodGroup and its pods arrive, when all its pods are plain pending ones.

A PodGroup whose pods (ours, as `PodIndex.ours_by_job` holds them) are all pending, unbound, unnominated,
ungated, unadmitted and without DRA claims has a job that reads, besides those objects, only the priority
classes and what the pods ask for (`PodAsks.derivations`): no node table, nomination or stuck release.
Such a job is drafted when its PodGroup arrives (`group_arrived`: from its pods already there, in the order
they were made) and a pod that arrives after it, made after every pod in it, adds its task (`pod_arrived`; a
pod that cannot be added gives the draft up); any other change leaves the draft as it is, to be found stale.
The cycle that makes the job takes the draft (`take`) when the PodGroup, each of its pods' states, the first
pod that names it, the priority classes and the derivations are still the very objects it was made of, and
no pod of it is nominated; what the cycle's own inputs decide (the queue's problem, the job's times, why it
waits) is left to it (`JobRebuild._make_job`). A first cycle at 5,000 nodes takes 433 such jobs of 4,600
pods. `check_gang_job` compares a draft taken with the job made anew (`KAI_SCHEDULER_VERIFY_REUSE=1`).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Final

from kai_scheduler.api import constants as c
from kai_scheduler.model.builder import PodDerivations, job_from_pod_group, podset_of, task_status
from kai_scheduler.model.cache.accounting import NodeAccounting
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.cache.inputs import ClusterInputs
from kai_scheduler.model.cache.lone_jobs import LoneJobs
from kai_scheduler.model.cache.nominations import Nominations
from kai_scheduler.model.cache.pods import PodIndex
from kai_scheduler.model.jobs import JobInfo, PodSet, SubGroupSet, TaskInfo, TaskStatus
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import PodGroupState, PodState

# What a job and its tasks are compared by under verify: every field but the links between them, which
# are compared by shape (pod sets and sub-groups by name, a task by its pod set's name).
_JOB_FIELDS: Final = tuple(
    f.name for f in fields(JobInfo) if f.name not in ("tasks", "podsets", "subgroups", "_root", "lone_task")
)
_TASK_FIELDS: Final = tuple(name for name in TaskInfo.__slots__ if name not in ("job", "podset"))
# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup (~10x a global's cost), and this is asked of every pod of a PodGroup as it arrives.
_PENDING: Final = TaskStatus.PENDING


class GangJobMismatch(AssertionError):
    """A PodGroup's job drafted as it arrived differs from the one its cycle makes (a missed input)."""


class _Draft:
    """A PodGroup's job made of `group`, `first` (the first pod that names it, or None) and `members`
    (its pods' keys and states, in creation order) under `priorities` and `derivations`."""

    __slots__ = ("derivations", "first", "group", "job", "members", "priorities")

    def __init__(
        self,
        group: PodGroupState,
        first: PodState | None,
        priorities: Priorities,
        derivations: PodDerivations,
        job: JobInfo,
    ) -> None:
        self.group = group
        self.first = first
        self.priorities = priorities
        self.derivations = derivations
        self.job = job
        self.members: list[tuple[str, PodState]] = []


class GangJobs:
    __slots__ = ("_accounting", "_asks", "_drafts", "_inputs", "_lone", "_nominations", "_pods")

    def __init__(
        self,
        pods: PodIndex,
        inputs: ClusterInputs,
        asks: PodAsks,
        accounting: NodeAccounting,
        nominations: Nominations,
        lone_jobs: LoneJobs,
    ) -> None:
        self._pods = pods
        self._inputs = inputs
        self._asks = asks
        self._accounting = accounting
        self._nominations = nominations
        self._lone = lone_jobs
        self._drafts: dict[str, _Draft] = {}  # PodGroup key -> its job drafted, not yet taken

    @property
    def verify(self) -> bool:
        """Whether a draft taken is compared with the job made anew: as the bare pods' jobs are (one
        switch, `LoneJobs.verify`, which `CycleDriver` sets)."""
        return self._lone.verify

    def group_arrived(self, key: str) -> None:
        """The PodGroup `key` arrived or changed: its job is drafted from the pods already there, when
        they are all plain."""
        self._drafts.pop(key, None)
        group = self._pods.groups.get(key)
        if group is None:
            return
        index = self._pods
        states = index.pods
        members = sorted(
            ((pod_key, states[pod_key]) for pod_key in index.ours_by_job.get(key, ())),
            key=lambda member: member[1].rank,
        )
        first, priorities = self._first_naming(key), self._inputs.priorities
        job = job_from_pod_group(group, first.pod if first is not None else None, priorities)
        draft = _Draft(group, first, priorities, self._asks.derivations, job)
        for pod_key, state in members:
            if not self._add(draft, pod_key, state):
                return
        self._drafts[key] = draft

    @property
    def drafting(self) -> bool:
        """Whether any job is drafted (else no pod's arrival needs telling: `pod_arrived`)."""
        return bool(self._drafts)

    def pod_arrived(self, job_key: str, key: str, state: PodState) -> None:
        """Our pod `key` of the job `job_key` arrived or changed as `state`: a draft of that job takes its
        task when it was made after every pod in it; else the draft is given up (its cycle makes the job),
        or made again when it has no pod yet (the pod may speak for its PodGroup)."""
        draft = self._drafts.get(job_key)
        if draft is None:
            return
        if not draft.members:
            self.group_arrived(job_key)
            return
        if (
            state.rank <= draft.members[-1][1].rank
            or draft.priorities is not self._inputs.priorities
            or draft.derivations is not self._asks.derivations
            or not self._add(draft, key, state)
        ):
            del self._drafts[job_key]

    def forget(self, key: str) -> None:
        """The PodGroup `key` is gone: no draft of its job."""
        self._drafts.pop(key, None)

    def take(self, key: str, group: PodGroupState | None) -> JobInfo | None:
        """The job of PodGroup `key` drafted as it arrived (each is taken once), when what it was made of
        is still what the cache holds; None: to be made now."""
        draft = self._drafts.pop(key, None)
        if draft is None or draft.group is not group or not self._current(key, draft):
            return None
        return draft.job

    def _current(self, key: str, draft: _Draft) -> bool:
        index = self._pods
        ours = index.ours_by_job.get(key, ())
        states, nominated = index.pods, self._nominations.by_pod
        if (
            draft.priorities is not self._inputs.priorities
            or draft.derivations is not self._asks.derivations
            or len(ours) != len(draft.members)
        ):
            return False
        for pod_key, state in draft.members:
            if pod_key not in ours or states.get(pod_key) is not state or pod_key in nominated:
                return False
        return self._first_naming(key) is draft.first

    def _first_naming(self, key: str) -> PodState | None:
        """The first pod made of those that name the PodGroup `key` (what speaks for it where it is
        silent), as `JobRebuild._make_job` finds it."""
        states = self._pods.pods
        named = (states[pod_key] for pod_key in self._pods.named_by_group.get(key, ()))
        return min(named, key=lambda state: state.rank, default=None)

    def _add(self, draft: _Draft, key: str, state: PodState) -> bool:
        """The task of a plain pending pod added to the draft's job, as `make_task` makes it (False: the
        pod is not plain, or names a sub-group the PodGroup does not have)."""
        pod = state.pod
        spec = pod.spec
        if (
            state.node_name is not None
            or state.nominated_node is not None
            or state.admitted is not None
            or spec.scheduling_gates
            or spec.resource_claims
            or key in self._nominations.by_pod
            or task_status(state) is not _PENDING
        ):
            return False
        job = draft.job
        podset = podset_of(job, pod)
        if podset is None:
            return False
        request, placement, host_ports = self._asks.of(pod)
        labels = pod.metadata.labels
        task_priority = labels.get(c.TASK_PRIORITY_LABEL)
        task = TaskInfo(  # by position, as `LoneJobs.make` (no node, no nomination: a pending pod's)
            pod.namespace,
            pod.metadata.name,
            job,
            podset,
            request,
            _PENDING,
            placement,
            labels,
            state.rank,
            0 if task_priority is None else int(task_priority),
            -1,
            state.gpu_groups,
            -1,
            state.nominated_gpu_groups,
            host_ports,
        )
        job.tasks.append(task)
        podset.tasks.append(task)
        draft.members.append((key, state))
        return True


def check_gang_job(kept: JobInfo, made: JobInfo | None) -> None:
    """Raise `GangJobMismatch` where a job drafted as its PodGroup arrived differs from `made` anew."""
    if made is None:
        raise GangJobMismatch(f"job of {kept.key} drafted as it arrived: the cycle makes none")
    differences = [name for name in _JOB_FIELDS if getattr(kept, name) != getattr(made, name)]
    if _shape(kept) != _shape(made):
        differences.append("pod sets and sub-groups")
    if len(kept.tasks) != len(made.tasks):
        differences.append("tasks")
    else:
        for kept_task, made_task in zip(kept.tasks, made.tasks, strict=True):
            differences += [
                f"{kept_task.key}.{name}"
                for name in _TASK_FIELDS
                if getattr(kept_task, name) is not getattr(made_task, name)
                and getattr(kept_task, name) != getattr(made_task, name)
            ]
            if kept_task.job is not kept or kept_task.podset.name != made_task.podset.name:
                differences.append(f"{kept_task.key} links")
    if differences:
        raise GangJobMismatch(f"job of {kept.key} drafted as it arrived differs in {differences}")


def _shape(job: JobInfo) -> list[object]:
    """A job's pod sets and sub-groups by their own fields, links by name, tasks by key."""

    def parent(part: PodSet | SubGroupSet) -> str | None:
        return part.parent.name if part.parent is not None else None

    podsets = [
        (name, p.name, p.min_member, p.topology, parent(p), [t.key for t in p.tasks])
        for name, p in job.podsets.items()
    ]
    subgroups = [
        (name, g.name, g.topology, g.min_sub_group, parent(g), [child.name for child in g.children])
        for name, g in job.subgroups.items()
    ]
    return [podsets, subgroups]
