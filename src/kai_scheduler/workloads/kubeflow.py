"""Kubeflow training jobs (kubeflow.org PyTorchJob, TFJob, XGBoostJob, JAXJob, PaddleJob, MPIJob), as the
training operator (and, for MPIJob v2beta1, the MPI operator) run them.

Each replica type's pods are `<job>-<type, lower case>-<index>`, labelled with the job name, the operator,
the replica type and index (`training.kubeflow.org/...`), and `job-role: master` on the master / chief;
a missing pod (evicted, deleted) is made again under its name until the job succeeds: when its master,
chief or launcher pods have all succeeded, else all its workers. `runPolicy.suspend: true` runs nothing.

MPIJob of kubeflow.org/v2beta1 (the MPI operator): workers `<job>-worker-<index>`, and the launcher as a
batch Job `<job>-launcher` (its pod `<job>-launcher-<random>`), made at once (`launcherCreationPolicy:
AtStartup`) or once every worker runs (`WaitForWorkersReady`); the job succeeds with its launcher Job.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kai_scheduler.api.constants import KUBEFLOW_REPLICA_SPECS
from kai_scheduler.workloads.batch import job_finished
from kai_scheduler.workloads.errors import WorkloadError
from kai_scheduler.workloads.objects import (
    Reconciled,
    View,
    child_object,
    flag,
    integer,
    is_active,
    is_running,
    mapping,
    name_of,
    phase_of,
    pod_from_template,
    ref,
    template_of,
    text,
    with_labels,
)

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
_MASTER_TYPES = ("master", "chief", "launcher")


def _operator(kind: str, mpi_operator: bool) -> str:
    return "mpi-operator" if mpi_operator else f"{kind.lower()}-controller"


def _replica_specs(job: Mapping[str, Any]) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """Each replica type's (replicas, pod template), in the manifest's order."""
    field = KUBEFLOW_REPLICA_SPECS[str(job.get("kind"))]
    specs = mapping(job, "spec", field, required=True)
    if not specs:
        raise WorkloadError("has no replica types", object_ref=ref(job), field=f"spec.{field}")
    out = {}
    for replica_type in specs:
        path = ("spec", field, str(replica_type))
        out[str(replica_type)] = (
            integer(job, *path, "replicas", default=1),
            template_of(job, *path, "template"),
        )
    return out


def reconcile_kubeflow(job: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    kind = str(job.get("kind"))
    mpi_operator = kind == "MPIJob" and str(job.get("apiVersion", "")).endswith("/v2beta1")
    specs = _replica_specs(job)
    launcher_policy = text(
        job,
        "spec",
        "launcherCreationPolicy",
        default="AtStartup",
        choices=("AtStartup", "WaitForWorkersReady"),
    )
    owned = list(view.owned(job))
    pods = {name_of(obj): obj for obj in owned if obj.get("kind") == "Pod"}
    out = Reconciled()
    if _succeeded(job, specs, pods, owned, mpi_operator):
        out.status = {"conditions": [{"type": "Succeeded", "status": "True"}]}
        return out
    if flag(job, "spec", "runPolicy", "suspend"):
        out.delete = [pod for pod in pods.values() if is_active(pod)]
        return out
    name, operator = name_of(job), _operator(kind, mpi_operator)
    for replica_type, (replicas, template) in specs.items():
        lower = replica_type.lower()
        labels = {JOB_NAME_LABEL: name, OPERATOR_LABEL: operator}
        if mpi_operator and lower == "launcher":
            out.create += _mpi_launcher(job, template, labels, owned, specs, pods, launcher_policy)
            continue
        for index in range(replicas):
            pod_name = (
                f"{name}-{lower}" if kind == "MPIJob" and lower == "launcher" else f"{name}-{lower}-{index}"
            )
            if pod_name in pods:
                if phase_of(pods[pod_name]) != "Failed":
                    continue
                out.delete.append(pods[pod_name])  # made again under its name
            pod_labels = {**labels, REPLICA_INDEX_LABEL: str(index)}
            if mpi_operator:
                # The MPI operator labels the role only; the training operator the replica type too.
                pod_labels[JOB_ROLE_LABEL] = lower
            else:
                pod_labels[REPLICA_TYPE_LABEL] = lower
            if not mpi_operator and lower in _MASTER_TYPES:
                pod_labels[JOB_ROLE_LABEL] = "master"
            spec = {"hostname": pod_name, "subdomain": name}
            out.create.append(pod_from_template(job, template, name=pod_name, labels=pod_labels, spec=spec))
    return out


def _mpi_launcher(
    job: Mapping[str, Any],
    template: Mapping[str, Any],
    labels: dict[str, str],
    owned: list[Mapping[str, Any]],
    specs: dict[str, tuple[int, Mapping[str, Any]]],
    pods: dict[str, Mapping[str, Any]],
    policy: str,
) -> list[dict[str, Any]]:
    launcher = f"{name_of(job)}-launcher"
    if any(obj.get("kind") == "Job" and name_of(obj) == launcher for obj in owned):
        return []
    if policy == "WaitForWorkersReady":
        workers = specs.get("Worker", (0, {}))[0]
        running = sum(1 for pod in pods.values() if is_running(pod))
        if running < workers:
            return []
    role = {**labels, JOB_ROLE_LABEL: "launcher"}
    spec = {
        "backoffLimit": integer(job, "spec", "runPolicy", "backoffLimit", default=6),
        "template": with_labels(template, role),
    }
    return [child_object(job, "batch/v1", "Job", spec, name=launcher, labels=role)]


def _succeeded(
    job: Mapping[str, Any],
    specs: dict[str, tuple[int, Mapping[str, Any]]],
    pods: dict[str, Mapping[str, Any]],
    owned: list[Mapping[str, Any]],
    mpi_operator: bool,
) -> bool:
    if mpi_operator:
        return any(obj.get("kind") == "Job" and job_finished(obj) and not _failed(obj) for obj in owned)
    name = name_of(job)
    masters = [t for t in specs if t.lower() in _MASTER_TYPES] or [t for t in specs if t.lower() == "worker"]
    if not masters:
        masters = list(specs)
    wanted = []
    for replica_type in masters:
        lower = replica_type.lower()
        if job.get("kind") == "MPIJob" and lower == "launcher":
            wanted.append(f"{name}-launcher")
        else:
            wanted += [f"{name}-{lower}-{i}" for i in range(specs[replica_type][0])]
    return bool(wanted) and all(phase_of(pods.get(pod_name, {})) == "Succeeded" for pod_name in wanted)


def _failed(job: Mapping[str, Any]) -> bool:
    conditions = ((job.get("status") or {}).get("conditions")) or []
    return any(c.get("type") == "Failed" and c.get("status") == "True" for c in conditions)
