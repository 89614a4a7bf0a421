"""Sub-group trees built directly, the way KAI's podgroup_info tests build them (`NewSubGroupSet`,
`AddPodSet`, `AssignTask`): `leaf("ps-a", 1, running=2)`, `group("inner", [..], min_sub_group=1)`, and
`job_of([...], min_sub_group=...)` for the job whose root holds them; and `job0_manifests`, the PodGroup
and pods of KAI's action tests' job0 in one queue on node0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helpers import pod_manifest
from kai_scheduler.api import constants as c
from kai_scheduler.model.jobs import JobInfo, Placement, PodSet, SubGroupSet, TaskInfo, TaskStatus
from kai_scheduler.model.resources import PodRequest

Member = PodSet | SubGroupSet

_PLACEMENT = Placement(key="", node_selector={}, affinity=None, tolerations=(), has_pod_affinity=False)
_JOB = JobInfo(namespace="default", name="pg", queue="q", priority=0, preemptible=True, min_member=0, rank=0)


def leaf(name: str, min_member: int, *, running: int = 0, pending: int = 0) -> PodSet:
    """A pod set with `running` pods running (on node 0) and `pending` pending, named `<name>-<i>`."""
    podset = PodSet(name, min_member)
    for index in range(running + pending):
        status = TaskStatus.RUNNING if index < running else TaskStatus.PENDING
        podset.tasks.append(
            TaskInfo(
                namespace="default",
                name=f"{name}-{index}",
                job=_JOB,
                podset=podset,
                request=PodRequest(),
                status=status,
                placement=_PLACEMENT,
                labels={},
                rank=float(index),
                node=0 if status is TaskStatus.RUNNING else -1,
            )
        )
    return podset


def group(name: str, children: Sequence[Member], *, min_sub_group: int | None = None) -> SubGroupSet:
    made = SubGroupSet(name, min_sub_group=min_sub_group)
    for child in children:
        child.parent = made
        made.children.append(child)
    return made


def job_of(children: Sequence[Member], *, min_sub_group: int | None = None) -> JobInfo:
    """A job whose root holds `children` (their pods become the job's)."""
    job = JobInfo(
        namespace="default",
        name="pg",
        queue="q",
        priority=0,
        preemptible=True,
        min_member=0,
        rank=0,
        min_sub_group=min_sub_group,
    )

    def add(member: Member) -> None:
        if isinstance(member, PodSet):
            job.podsets[member.name] = member
            for task in member.tasks:
                task.job = job
                job.tasks.append(task)
        else:
            job.subgroups[member.name] = member
            for child in member.children:
                add(child)

    for child in children:
        add(child)
    return job


def job0_manifests(
    sub_groups: list[dict[str, Any]],
    pods: Sequence[tuple[str, bool]],
    *,
    min_sub_group: int | None = None,
    priority_class: str | None = None,
) -> list[dict[str, Any]]:
    """PodGroup job0 in queue0 with `sub_groups`, and its one-GPU pods job0-<i>: (sub-group, running on
    node0)."""
    spec: dict[str, Any] = {"queue": "queue0", "subGroups": sub_groups}
    if min_sub_group is not None:
        spec["minSubGroup"] = min_sub_group
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job0"},
        "spec": spec,
    }
    made = [
        pod_manifest(
            f"job0-{index}",
            "queue0",
            gpus=1,
            group="job0",
            priority_class=priority_class,
            labels={c.SUBGROUP_LABEL: sub_group},
            node_name="node0" if running else None,
        )
        for index, (sub_group, running) in enumerate(pods)
    ]
    return [group, *made]
