"""A bare pod's plain job (most jobs of a large cluster: a pod of ours that names no PodGroup and shares
its job with no other pod), made from the pod alone, and made as the pod arrives when nothing else it
reads can change before its cycle.

A pending pod with no nomination and no DRA claim reads, besides its own objects, only the priority
classes (its priority) and what the pod asks for (`PodAsks.derivations`): its job is made when the pod
arrives (`arrived`, from `PodIndex._index`), where a live scheduler handles the pod's watch event and the
simulator loads it, and the cycle that makes the job takes it (`of`) when the pod's state, the priority
classes and the derivations are the very objects it was made with and the cache has nominated the pod
nowhere since; else the job is made then, as it always was. What the cycle's own inputs decide (the
queue's problem, the job's times: `JobRebuild._make_lone`) is left to the cycle.
A first cycle at 5,000 nodes makes ~15,400 such jobs. With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`) a job
taken is made again and compared, a difference raising `LoneJobMismatch`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Final, NamedTuple

from kai_scheduler.api import constants as c
from kai_scheduler.model.builder import PodDerivations, implicit_group_name, implicit_job, task_status
from kai_scheduler.model.cache.accounting import NodeAccounting
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.cache.inputs import ClusterInputs
from kai_scheduler.model.cache.nominations import Nominations
from kai_scheduler.model.jobs import JobInfo, TaskInfo
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.releasing import StuckReleases
from kai_scheduler.model.snapshot import PodState

# Annotations of a bare pod that make its job more than the plain one `LoneJobs` makes.
_NOT_LONE = (
    c.POD_GROUP_ANNOTATION,
    c.SKIP_PODGROUPER_ANNOTATION,
    c.TOPOLOGY_ANNOTATION,
)
# What a job and its task are compared by under `verify`: every field but the links between them (the
# job's tasks and pod sets, the task's job and pod set), compared by shape.
_JOB_FIELDS: Final = tuple(f.name for f in fields(JobInfo) if f.name not in ("tasks", "podsets", "lone_task"))
_TASK_FIELDS: Final = tuple(name for name in TaskInfo.__slots__ if name not in ("job", "podset"))


class LoneJobMismatch(AssertionError):
    """A bare pod's job made as it arrived differs from the one its cycle makes (a missed input)."""


class _Made(NamedTuple):
    state: PodState
    priorities: Priorities
    derivations: PodDerivations
    job: JobInfo


class LoneJobs:
    __slots__ = ("_accounting", "_asks", "_inputs", "_made", "_nominations", "_stuck", "verify")

    def __init__(
        self,
        inputs: ClusterInputs,
        asks: PodAsks,
        accounting: NodeAccounting,
        nominations: Nominations,
        stuck_releases: StuckReleases,
    ) -> None:
        self._inputs = inputs
        self._asks = asks
        self._accounting = accounting
        self._nominations = nominations
        self._stuck = stuck_releases
        self._made: dict[str, _Made] = {}  # pod key -> its job made as it arrived, not yet taken
        self.verify = False

    def arrived(self, key: str, state: PodState) -> None:
        """Our pod `key` arrived (or changed) as `state`: its job is made now when nothing but the pod,
        the priority classes and its derivations decide it."""
        pod = state.pod
        if (
            state.node_name is not None
            or state.nominated_node is not None
            or pod.spec.resource_claims
            or key in self._nominations.by_pod
        ):
            return
        try:
            job = self.make(state)
        except ValueError:
            return  # (a label or annotation it cannot read): its cycle makes it, and raises, as ever
        if job is not None:
            self._made[key] = _Made(state, self._inputs.priorities, self._asks.derivations, job)

    def left(self, key: str) -> None:
        """Our pod `key` left, changed or is no longer ours: a job made as it arrived is not its job."""
        self._made.pop(key, None)

    def of(self, key: str, state: PodState) -> JobInfo | None:
        """The plain job of our bare pod `key` (`make`): the one made as the pod arrived (each is taken
        once: the cycle's sessions change it) when what it was made of is still what the cache holds."""
        made = self._made.pop(key, None)
        if (
            made is None
            or made.state is not state
            or made.priorities is not self._inputs.priorities
            or made.derivations is not self._asks.derivations
            or key in self._nominations.by_pod
        ):
            return self.make(state)
        if self.verify:
            _check(made.job, self.make(state))
        return made.job

    def take_current(self, states: dict[str, PodState]) -> dict[str, JobInfo]:
        """Every job made as its pod arrived that `of` would give now, by pod key (`states`: the cache's
        pod states), all taken at once; the others are forgotten (`of` makes their pods' jobs again, as
        ever). The cycle that makes every job asks this once rather than `of` a pod (a first cycle's
        ~15,400 plain jobs at 5,000 nodes): one comprehension, no call a job."""
        made, self._made = self._made, {}
        priorities, derivations = self._inputs.priorities, self._asks.derivations
        nominated = self._nominations.by_pod
        current = {
            key: entry.job
            for key, entry in made.items()
            if entry.state is states.get(key)
            and entry.priorities is priorities
            and entry.derivations is derivations
            and not (nominated and key in nominated)
        }
        if self.verify:
            for key, job in current.items():
                _check(job, self.make(states[key]))
        return current

    def make(self, state: PodState) -> JobInfo | None:
        """The job of a bare pod of ours that no PodGroup names and no other pod shares, as
        `JobRebuild._make_job` makes it (the job by `implicit_job`, its one task read off the pod without
        `make_task`'s questions for sub-groups and strays), but for its invalid reason, its times and the
        answers it is told; None when the pod needs more than the plain case (an annotation naming a
        PodGroup, a topology or no grouping, a gate, an admission, a sub-group label, no task)."""
        pod = state.pod
        metadata, spec = pod.metadata, pod.spec
        annotations, labels = metadata.annotations, metadata.labels
        node_name = state.node_name
        if annotations:
            for name in _NOT_LONE:
                if name in annotations:
                    return None
        if node_name is None and (spec.scheduling_gates or state.admitted is not None):
            return None
        subgroup = labels.get(c.SUBGROUP_LABEL)
        if subgroup is not None and subgroup != "default":
            return None
        stuck = state.terminating and node_name is not None and self._stuck.is_stuck(pod.key)
        status = task_status(state, stuck=stuck)
        node_index = self._accounting.table.index
        node = node_index.get(node_name, -1) if node_name else -1
        if status is None or (node_name and node < 0):
            return None
        name = metadata.name
        job = implicit_job(state, implicit_group_name(name), self._inputs.priorities)
        podset = job.podsets[""]
        if self._nominations.by_pod:
            state = self._nominations.of(state)
        nominated = state.nominated_node
        request, placement, host_ports = self._asks.of(pod)
        task_priority = labels.get(c.TASK_PRIORITY_LABEL)
        task = TaskInfo(  # by position (most tasks are made here): as `make_task` names them
            job.namespace,
            name,
            job,
            podset,
            request,
            status,
            placement,
            labels,
            state.rank,
            0 if task_priority is None else int(task_priority),
            node,
            state.gpu_groups,
            node_index.get(nominated, -1) if nominated else -1,
            state.nominated_gpu_groups,
            host_ports,
        )
        job.tasks.append(task)
        podset.tasks.append(task)
        job.lone_task = task
        # What every session asks of every job, known of a plain job as it is made: it has no topology
        # constraint (a pod naming one is left out above) and one pod set of minMember 1, so it never goes
        # stale (told here rather than worked out as the cycle makes or opens on ~15,000 of them).
        job.know_as(job.tally(), False, False)
        return job


def _check(kept: JobInfo, made: JobInfo | None) -> None:
    differences = [] if made is not None else ["the cycle makes no plain job"]
    if made is not None:
        differences += [name for name in _JOB_FIELDS if getattr(kept, name) != getattr(made, name)]
        kept_task, made_task = kept.lone_task, made.lone_task
        if kept_task is None or made_task is None or kept.tasks != [kept_task]:
            differences.append("tasks")
        else:
            differences += [
                f"task.{name}"
                for name in _TASK_FIELDS
                if getattr(kept_task, name) is not getattr(made_task, name)
                and getattr(kept_task, name) != getattr(made_task, name)
            ]
            if kept_task.job is not kept or kept.podsets != {"": kept_task.podset}:
                differences.append("links")
            if made.podsets.keys() != kept.podsets.keys() or any(
                (p.name, p.min_member, p.topology, p.parent, len(p.tasks))
                != (q.name, q.min_member, q.topology, q.parent, len(q.tasks))
                for p, q in zip(kept.podsets.values(), made.podsets.values(), strict=True)
            ):
                differences.append("podsets")
    if differences:
        raise LoneJobMismatch(f"job of {kept.key} made as its pod arrived differs in {differences}")
