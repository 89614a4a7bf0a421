"""Realistic Kubernetes objects, as the API returns them, for the pod grouper tests."""

from __future__ import annotations

import copy
from typing import Any

NS = "team-a"


def obj(
    api_version: str,
    kind: str,
    name: str,
    uid: str,
    *,
    owner: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    namespace: str = NS,
) -> dict[str, Any]:
    """An object as a GET returns it; `owner` becomes its controller owner reference."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "resourceVersion": "4711",
        "creationTimestamp": "2025-01-01T00:00:00Z",
    }
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        metadata["ownerReferences"] = [controller_ref(owner)]
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        out["spec"] = copy.deepcopy(spec)
    return out


def controller_ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def container(gpus: int = 1) -> dict[str, Any]:
    resources = {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": gpus}}
    return {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.01-py3", "resources": resources}


def pod(
    name: str,
    uid: str,
    *,
    owner: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "restartPolicy": "Never",
        "containers": [container()],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    out = obj("v1", "Pod", name, uid, owner=owner, labels=labels, annotations=annotations, spec=spec)
    out["status"] = {"phase": "Pending"}
    return out


def pod_template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels or {}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [container()]},
    }


def replica(replicas: int | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"restartPolicy": "OnFailure", "template": pod_template(labels)}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def pytorchjob(
    name: str = "mnist",
    uid: str = "uid-ptj",
    *,
    master: int | None = 1,
    workers: int = 4,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    specs: dict[str, Any] = {"Worker": replica(workers)}
    if master is not None:
        specs["Master"] = replica(master)
    return obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        name,
        uid,
        labels=labels,
        annotations=annotations,
        spec={"pytorchReplicaSpecs": specs, **spec},
    )


def kubeflow_pod(job: dict[str, Any], replica_type: str, index: int, **labels: str) -> dict[str, Any]:
    name = job["metadata"]["name"]
    all_labels = {
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": replica_type,
        "training.kubeflow.org/replica-index": str(index),
        **labels,
    }
    return pod(
        f"{name}-{replica_type}-{index}", f"uid-{name}-{replica_type}-{index}", owner=job, labels=all_labels
    )


def batch_job(owner: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return obj(
        "batch/v1",
        "Job",
        "nightly-eval-28901234" if owner else "eval",
        "uid-job",
        owner=owner,
        labels=labels,
        spec={"parallelism": 3, "completions": 3, "backoffLimit": 2, "template": pod_template()},
    )


def mpijob(version: str, policy: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "slotsPerWorker": 8,
        "mpiReplicaSpecs": {"Launcher": replica(1), "Worker": replica(4)},
        **extra,
    }
    if policy:
        spec["launcherCreationPolicy"] = policy
    return obj(f"kubeflow.org/{version}", "MPIJob", "allreduce", "uid-mpi", spec=spec)


def ray_cluster_spec() -> dict[str, Any]:
    return {
        "rayVersion": "2.9.0",
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": pod_template()},
        "workerGroupSpecs": [
            {
                "groupName": "gpu-small",
                "replicas": 4,
                "minReplicas": 2,
                "maxReplicas": 8,
                "template": pod_template(),
            },
            {"groupName": "gpu-tpu-like", "replicas": 2, "numOfHosts": 2, "template": pod_template()},
        ],
    }


def ray_pod(owner: dict[str, Any], node_type: str, group: str, i: int) -> dict[str, Any]:
    labels = {
        "ray.io/node-type": node_type,
        "ray.io/group": group,
        "ray.io/cluster": owner["metadata"]["name"],
    }
    return pod(f"rc-{group}-{i}", f"uid-ray-{group}-{i}", owner=owner, labels=labels)


def jobset(order: str | None = None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": "driver",
                "replicas": 1,
                "template": {"spec": {"parallelism": 1, "template": pod_template()}},
            },
            {
                "name": "workers",
                "replicas": 2,
                "template": {"spec": {"parallelism": 4, "completions": 4, "template": pod_template()}},
            },
        ]
    }
    if order:
        spec["startupPolicy"] = {"startupPolicyOrder": order}
    return obj("jobset.x-k8s.io/v1alpha2", "JobSet", "llama", "uid-js", owner=owner, spec=spec)


def jobset_pod(js: dict[str, Any], rj: str, job_index: int, i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    job = obj("batch/v1", "Job", f"llama-{rj}-{job_index}", f"uid-js-{rj}-{job_index}", owner=js)
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "llama",
        "jobset.sigs.k8s.io/replicatedjob-name": rj,
        "jobset.sigs.k8s.io/job-index": str(job_index),
    }
    return pod(
        f"llama-{rj}-{job_index}-{i}-abcde", f"uid-jsp-{rj}-{job_index}-{i}", owner=job, labels=labels
    ), job


def lws(
    policy: str | None = None, size: int = 4, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": 2,
        "leaderWorkerTemplate": {"size": size, "workerTemplate": pod_template()},
    }
    if policy:
        spec["startupPolicy"] = policy
    return obj(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        "uid-lws",
        annotations=annotations,
        spec=spec,
    )


def lws_pods(ws: dict[str, Any], group: int, worker: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The pod and its owners: leader sts -> leader pod -> worker sts -> worker pod."""
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "vllm",
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    leader_sts = obj("apps/v1", "StatefulSet", "vllm", "uid-lsts", owner=ws)
    leader = pod(f"vllm-{group}", f"uid-leader-{group}", owner=leader_sts, labels=labels)
    if worker == 0:
        return leader, [leader_sts, ws]
    worker_sts = obj("apps/v1", "StatefulSet", f"vllm-{group}", f"uid-wsts-{group}", owner=leader)
    labels = {**labels, "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}
    p = pod(f"vllm-{group}-{worker}", f"uid-w-{group}-{worker}", owner=worker_sts, labels=labels)
    return p, [worker_sts, leader, leader_sts, ws]


def knative(min_scale: str | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    annotations = {"autoscaling.knative.dev/min-scale": min_scale} if min_scale is not None else {}
    svc = obj(
        "serving.knative.dev/v1",
        "Service",
        "chat",
        "uid-ksvc",
        labels={"kai.scheduler/queue": "serving"},
        spec={"template": {"metadata": {"annotations": annotations}, "spec": {"containers": []}}},
    )
    config = obj("serving.knative.dev/v1", "Configuration", "chat", "uid-kcfg", owner=svc)
    revision = obj(
        "serving.knative.dev/v1",
        "Revision",
        "chat-00002",
        "uid-krev",
        owner=config,
        annotations=annotations,
        labels={"serving.knative.dev/service": "chat"},
    )
    deploy = obj("apps/v1", "Deployment", "chat-00002-deployment", "uid-kdep", owner=revision)
    rs = obj("apps/v1", "ReplicaSet", "chat-00002-deployment-5f6b", "uid-krs", owner=deploy)
    p = pod(
        "chat-00002-deployment-5f6b-x1",
        "uid-kp",
        owner=rs,
        labels={"serving.knative.dev/revision": "chat-00002"},
    )
    return p, [rs, deploy, revision, config, svc]
