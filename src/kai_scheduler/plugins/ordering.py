"""Plugins that only order things: jobs (priority, elastic), pods within a job (taskorder, kubeflow,
ray) and pod sets within a job (subgrouporder)."""

from __future__ import annotations

from typing import Any

from kai_scheduler.framework.gang import allocation_rank
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo, PodSet, SubGroupSet, TaskInfo


class _OrderingPlugin:
    name = ""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        raise NotImplementedError

    def on_session_close(self, session: Session) -> None:
        return None


class PriorityPlugin(_OrderingPlugin):
    """Higher-priority jobs first."""

    name = "priority"

    def on_session_open(self, session: Session) -> None:
        session.points.job_order.append(lambda job: -job.priority)
        session.points.victim_job_order.append(lambda job, left: -job.priority)


def elastic_rank(job: JobInfo) -> int:
    """Jobs below their minMember first, then jobs exactly at it, then jobs above it; with sub-groups, as
    KAI's `minAvailableState`: below if a pod set is below its minMember, at it if every pod set is."""
    if len(job.podsets) == 1 and not job.subgroups:
        return elastic_rank_with(job, job.active_allocated())
    exact = True
    for podset in job.podsets.values():
        active = podset.active_allocated()
        if active < podset.min_member:
            return 0
        exact = exact and active == podset.min_member
    return 1 if exact else 2


def elastic_rank_with(job: JobInfo, allocated: int) -> int:
    """`elastic_rank` of the job with `allocated` active pods (against the PodGroup's minMember, or its
    pod sets' together when it states none)."""
    threshold = job.min_member or sum(podset.min_member for podset in job.podsets.values())
    if allocated < threshold:
        return 0
    return 1 if allocated == threshold else 2


class ElasticPlugin(_OrderingPlugin):
    name = "elastic"

    def on_session_open(self, session: Session) -> None:
        session.points.job_order.append(elastic_rank)
        session.points.victim_job_order.append(elastic_rank_with)


class TaskOrderPlugin(_OrderingPlugin):
    """Pods with a higher `kai.scheduler/task-priority` label are placed first within their job."""

    name = "taskorder"

    def on_session_open(self, session: Session) -> None:
        session.points.task_order.append(lambda task: -task.task_priority)


_KUBEFLOW_LEADERS = frozenset({"master", "launcher", "chief"})


def kubeflow_rank(task: TaskInfo) -> int:
    """Kubeflow's master/launcher/chief replica is placed before its workers."""
    replica = task.labels.get("training.kubeflow.org/replica-type", "").lower()
    return 0 if replica in _KUBEFLOW_LEADERS else 1


class KubeflowPlugin(_OrderingPlugin):
    name = "kubeflow"

    def on_session_open(self, session: Session) -> None:
        session.points.task_order.append(kubeflow_rank)


def ray_rank(task: TaskInfo) -> int:
    """Ray's head pod is placed before its workers."""
    return 0 if task.labels.get("ray.io/node-type") == "head" else 1


class RayPlugin(_OrderingPlugin):
    name = "ray"

    def on_session_open(self, session: Session) -> None:
        session.points.task_order.append(ray_rank)


def podset_rank(member: PodSet | SubGroupSet) -> tuple[int, int, float]:
    """Sub-groups below their minimum first, then by allocation ratio (`allocation_rank`)."""
    return allocation_rank(member.satisfied_members(), member.min_to_satisfy())


class SubGroupOrderPlugin(_OrderingPlugin):
    name = "subgrouporder"

    def on_session_open(self, session: Session) -> None:
        session.points.podset_order.append(podset_rank)
