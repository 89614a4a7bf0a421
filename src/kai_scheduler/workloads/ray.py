"""ray.io RayCluster and RayJob, as KubeRay runs them.

RayCluster: a head pod `<cluster>-head-<random>` and, per worker group, `replicas` (kept within
`minReplicas`..`maxReplicas`) × `numOfHosts` pods `<cluster>-<group>-worker-<random>`, labelled
`ray.io/cluster`, `ray.io/node-type`, `ray.io/group`; a pod that fails, is evicted or deleted is replaced.
`suspend: true` runs nothing.

RayJob: a RayCluster `<rayjob>-raycluster-<random>` from `rayClusterSpec` (none: the job runs on an
existing cluster), then, in `K8sJobMode` (the default) once the head and every worker run, the
submitter, a batch Job `<rayjob>` from `submitterPodTemplate` (else a small `ray job submit` pod carrying
the RayJob's `simulation.kai.scheduler/duration`). When the submitter Job finishes, the cluster stays,
unless `shutdownAfterJobFinishes: true`: then it is deleted `ttlSecondsAfterFinished` (0) later.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from kai_scheduler.api.constants import SIM_DURATION_ANNOTATION
from kai_scheduler.api.timestamps import format_rfc3339, parse_rfc3339
from kai_scheduler.workloads.batch import job_finished
from kai_scheduler.workloads.objects import (
    Reconciled,
    View,
    at,
    child_object,
    flag,
    integer,
    is_active,
    is_running,
    items,
    mapping,
    name_of,
    pod_from_template,
    template_of,
    text,
    with_labels,
)

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
IDENTIFIER_LABEL = "ray.io/identifier"
HEAD_GROUP = "headgroup"
ORIGIN_KIND_LABEL = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"


def worker_groups(cluster: Mapping[str, Any], *path: str) -> list[tuple[str, int, Mapping[str, Any]]]:
    """Each worker group's (name, pods wanted, template); `path` leads to the cluster spec."""
    groups = []
    for i, group in enumerate(items(cluster, *path, "workerGroupSpecs")):
        at_group = (*path, "workerGroupSpecs", str(i))
        name = text(group, "groupName") or f"group-{i}"
        minimum = integer(cluster, *at_group, "minReplicas", default=0)
        maximum = integer(cluster, *at_group, "maxReplicas", default=2**31 - 1)
        replicas = min(max(integer(cluster, *at_group, "replicas", default=minimum), minimum), maximum)
        hosts = integer(cluster, *at_group, "numOfHosts", default=1, minimum=1)
        groups.append((name, replicas * hosts, template_of(cluster, *at_group, "template")))
    return groups


def reconcile_ray_cluster(cluster: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    head_template = template_of(cluster, "spec", "headGroupSpec", "template")
    groups = worker_groups(cluster, "spec")
    pods = [pod for pod in view.owned(cluster) if is_active(pod)]
    out = Reconciled()
    if flag(cluster, "spec", "suspend"):
        out.delete = pods
        return out
    name = name_of(cluster)

    def labels(node_type: str, group: str) -> dict[str, str]:
        return {
            CLUSTER_LABEL: name,
            NODE_TYPE_LABEL: node_type,
            GROUP_LABEL: group,
            IDENTIFIER_LABEL: f"{name}-{node_type}",
            "ray.io/is-ray-node": "yes",
        }

    heads = [pod for pod in pods if (at(pod, "metadata", "labels") or {}).get(NODE_TYPE_LABEL) == "head"]
    if not heads:
        out.create.append(
            pod_from_template(
                cluster, head_template, generate_name=f"{name}-head-", labels=labels("head", HEAD_GROUP)
            )
        )
    for group, wanted, template in groups:
        have = sum(
            1
            for pod in pods
            if (at(pod, "metadata", "labels") or {}).get(NODE_TYPE_LABEL) == "worker"
            and (at(pod, "metadata", "labels") or {}).get(GROUP_LABEL) == group
        )
        out.create += [
            pod_from_template(
                cluster, template, generate_name=f"{name}-{group}-worker-", labels=labels("worker", group)
            )
            for _ in range(wanted - have)
        ]
    return out


def reconcile_ray_job(ray_job: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    mode = text(
        ray_job,
        "spec",
        "submissionMode",
        default="K8sJobMode",
        choices=("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"),
    )
    has_cluster = at(ray_job, "spec", "rayClusterSpec") is not None
    if has_cluster:
        template_of(ray_job, "spec", "rayClusterSpec", "headGroupSpec", "template")
        worker_groups(ray_job, "spec", "rayClusterSpec")
    owned = list(view.owned(ray_job))
    clusters = [obj for obj in owned if obj.get("kind") == "RayCluster"]
    submitters = [obj for obj in owned if obj.get("kind") == "Job"]
    out = Reconciled()
    name = name_of(ray_job)
    if any(job_finished(job) for job in submitters):
        ended = at(ray_job, "status", "endTime") or format_rfc3339(now)
        out.status = {"jobDeploymentStatus": "Complete", "endTime": ended}
        cleanup = ray_job_cleanup_time({**ray_job, "status": out.status})
        if cleanup is not None and now >= cleanup:
            out.delete = clusters
        return out
    if flag(ray_job, "spec", "suspend"):
        out.delete = clusters + submitters
        return out
    if has_cluster and not clusters:
        origin = {ORIGIN_KIND_LABEL: "RayJob", ORIGIN_NAME_LABEL: name}
        spec = mapping(ray_job, "spec", "rayClusterSpec")
        out.create.append(
            child_object(
                ray_job, "ray.io/v1", "RayCluster", spec, generate_name=f"{name}-raycluster-", labels=origin
            )
        )
        return out
    if mode != "K8sJobMode" or submitters:
        return out
    if clusters and not _cluster_up(clusters[0], view):
        return out
    template = mapping(ray_job, "spec", "submitterPodTemplate") or _default_submitter(ray_job)
    backoff = integer(ray_job, "spec", "submitterConfig", "backoffLimit", default=2)
    spec = {"backoffLimit": backoff, "template": with_labels(template, {})}
    out.create.append(child_object(ray_job, "batch/v1", "Job", spec, name=name))
    return out


def ray_job_cleanup_time(ray_job: Mapping[str, Any]) -> datetime | None:
    """When a finished RayJob with `shutdownAfterJobFinishes` deletes its cluster:
    `ttlSecondsAfterFinished` (default 0) after it ended."""
    ended = at(ray_job, "status", "endTime")
    if not ended or not flag(ray_job, "spec", "shutdownAfterJobFinishes"):
        return None
    ttl = integer(ray_job, "spec", "ttlSecondsAfterFinished", default=0)
    return parse_rfc3339(str(ended)) + timedelta(seconds=ttl)


def ray_job_next_time(ray_job: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the RayJob next has work by the clock alone: deleting its cluster after the TTL."""
    cleanup = ray_job_cleanup_time(ray_job)
    return cleanup if cleanup is not None and cleanup > now else None


def _cluster_up(cluster: Mapping[str, Any], view: View) -> bool:
    wanted = 1 + sum(count for _, count, _ in worker_groups(cluster, "spec"))
    return sum(1 for pod in view.owned(cluster) if is_running(pod)) >= wanted


def _default_submitter(ray_job: Mapping[str, Any]) -> dict[str, Any]:
    """KubeRay's default submitter: one `ray job submit` container of the head's image."""
    head = mapping(ray_job, "spec", "rayClusterSpec", "headGroupSpec", "template")
    head_spec = mapping(head, "spec")
    containers = head_spec.get("containers") or [{}]
    image = (
        containers[0].get("image", "rayproject/ray")
        if isinstance(containers[0], Mapping)
        else "rayproject/ray"
    )
    annotations = {}
    duration = (at(ray_job, "metadata", "annotations") or {}).get(SIM_DURATION_ANNOTATION)
    if duration is not None:
        annotations[SIM_DURATION_ANNOTATION] = duration
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "ray-job-submitter",
                "image": image,
                "command": ["ray", "job", "submit"],
                "resources": {
                    "requests": {"cpu": "500m", "memory": "200Mi"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                },
            }
        ],
    }
    if head_spec.get("schedulerName"):
        spec["schedulerName"] = head_spec["schedulerName"]
    return {"metadata": {"annotations": annotations}, "spec": spec}
