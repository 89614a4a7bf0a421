"""Kubernetes manifests (plain dicts, as YAML writes them) for a trace's nodes, queues and jobs."""

from __future__ import annotations

from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.traces.jobs import PodShape, TraceJob

GPU_MODEL_LABEL = "nvidia.com/gpu.product"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
POD_GROUP_API = "scheduling.run.ai/v2alpha2"
QUEUE_API = "scheduling.run.ai/v2"
IMAGE = "trace"


def node_manifest(
    name: str, *, cpu_milli: int, memory_mib: int, gpus: int, gpu_model: str | None, pods: int = 110
) -> dict[str, Any]:
    resources = {
        "cpu": f"{cpu_milli}m",
        "memory": f"{memory_mib}Mi",
        "pods": str(pods),
        GPU_RESOURCE: str(gpus),
    }
    labels = {HOSTNAME_LABEL: name}
    if gpu_model:
        labels[GPU_MODEL_LABEL] = gpu_model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def queue_manifest(name: str, quota: float, limit: float = -1, weight: float = 1) -> dict[str, Any]:
    """A Queue with a GPU quota, limit and over-quota weight; CPU and memory not rationed (-1)."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": weight}
    return {
        "apiVersion": QUEUE_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "resources": {
                "gpu": {"quota": _number(quota), "limit": _number(limit), "overQuotaWeight": _number(weight)},
                "cpu": unlimited,
                "memory": dict(unlimited),
            }
        },
    }


def job_manifests(job: TraceJob, queue: str) -> list[dict[str, Any]]:
    """A bare pod, or a PodGroup and its pods; in the queue's namespace, with the simulation's arrival and
    duration annotations."""
    timing = {c.SIM_ARRIVAL_ANNOTATION: seconds(job.arrival)}
    if job.duration is not None:
        timing[c.SIM_DURATION_ANNOTATION] = seconds(job.duration)
    if job.min_member is None:
        return [_pod(job.name, queue, job.priority_class, job.pod, timing)]
    group = {
        "apiVersion": POD_GROUP_API,
        "kind": "PodGroup",
        "metadata": {
            "name": job.name,
            "namespace": queue,
            "annotations": {c.SIM_ARRIVAL_ANNOTATION: timing[c.SIM_ARRIVAL_ANNOTATION]},
        },
        "spec": {"minMember": job.min_member, "queue": queue, "priorityClassName": job.priority_class},
    }
    pods = [
        _pod(
            f"{job.name}-{i}",
            queue,
            job.priority_class,
            job.pod,
            {c.POD_GROUP_ANNOTATION: job.name, **timing},
        )
        for i in range(job.replicas)
    ]
    return [group, *pods]


def _pod(
    name: str, queue: str, priority_class: str, shape: PodShape, annotations: dict[str, str]
) -> dict[str, Any]:
    requests = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi"}
    container: dict[str, Any] = {"name": "main", "image": IMAGE, "resources": {"requests": requests}}
    annotations = dict(annotations)
    if shape.gpu_fraction is not None:
        annotations[c.GPU_FRACTION_ANNOTATION] = f"{shape.gpu_fraction:g}"
        if shape.gpus > 1:
            annotations[c.GPU_FRACTION_NUM_DEVICES_ANNOTATION] = str(shape.gpus)
    elif shape.gpus:
        requests[GPU_RESOURCE] = str(shape.gpus)
        container["resources"]["limits"] = {GPU_RESOURCE: str(shape.gpus)}
    spec: dict[str, Any] = {
        "schedulerName": c.SCHEDULER_NAME,
        "priorityClassName": priority_class,
        "containers": [container],
    }
    if shape.gpu_models:
        term = {
            "matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "In", "values": list(shape.gpu_models)}]
        }
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": queue,
            "labels": {c.QUEUE_LABEL: queue},
            "annotations": annotations,
        },
        "spec": spec,
    }


def seconds(value: float) -> str:
    """A duration annotation's value: whole seconds as `123s`, else to the millisecond."""
    return f"{int(value)}s" if value == int(value) else f"{round(value * 1000)}ms"


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value
