"""jobset.x-k8s.io JobSet and leaderworkerset.x-k8s.io LeaderWorkerSet, as their controllers run them.

JobSet: for each replicated job, `replicas` batch Jobs `<jobset>-<replicated job>-<job index>`, each labelled
and annotated (and its pods too) with `jobset.sigs.k8s.io/jobset-name`, `replicatedjob-name`, `job-index`,
...; pods get the JobSet as DNS subdomain. The JobSet completes when all its Jobs have. With
`startupPolicyOrder: InOrder`, a replicated job's Jobs are made once every pod of the ones before runs.

LeaderWorkerSet: a StatefulSet `<lws>` of `replicas` leader pods `<lws>-<group>` (the leader template, else
the worker template) and, per leader, a StatefulSet `<lws>-<group>` owned by the leader pod, of `size - 1`
workers `<lws>-<group>-<1..size-1>`; `startupPolicy: LeaderReady` makes the workers only once their
leader runs. LWS's pod webhook labels each pod with its group and worker index (`admit_lws_pod`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kai_scheduler.workloads.apps import POD_INDEX_LABEL  # the StatefulSet controller writes it
from kai_scheduler.workloads.batch import job_finished
from kai_scheduler.workloads.errors import WorkloadError
from kai_scheduler.workloads.objects import (
    Manifest,
    Reconciled,
    View,
    at,
    child_object,
    field_path,
    integer,
    is_active,
    is_running,
    items,
    labels_of,
    mapping,
    name_of,
    namespace_of,
    ref,
    template_of,
    text,
    with_labels,
)

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"


def reconcile_job_set(job_set: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    replicated = items(job_set, "spec", "replicatedJobs")
    if not replicated:
        raise WorkloadError("has no replicated jobs", object_ref=ref(job_set), field="spec.replicatedJobs")
    in_order = (
        text(
            job_set,
            "spec",
            "startupPolicy",
            "startupPolicyOrder",
            default="AnyOrder",
            choices=("AnyOrder", "InOrder"),
        )
        == "InOrder"
    )
    jobs = {name_of(job): job for job in view.owned(job_set)}
    out = Reconciled()
    if (
        jobs
        and all(job_finished(job) for job in jobs.values())
        and len(jobs) == _job_count(job_set, replicated)
    ):
        out.status = {"conditions": [{"type": "Completed", "status": "True"}]}
        return out
    name, namespace = name_of(job_set), namespace_of(job_set)
    dns = at(job_set, "spec", "network", "enableDNSHostnames")
    subdomain = at(job_set, "spec", "network", "subdomain") or name
    global_index = 0
    for i, entry in enumerate(replicated):
        path = ("spec", "replicatedJobs", str(i))
        rj = text(entry, "name")
        if not rj:
            raise WorkloadError("is missing", object_ref=ref(job_set), field=field_path((*path, "name")))
        replicas = integer(job_set, *path, "replicas", default=1)
        job_template = mapping(job_set, *path, "template", required=True)
        template_of(job_set, *path, "template", "spec", "template")
        ready = True
        for index in range(replicas):
            job_name = f"{name}-{rj}-{index}"
            meta = {
                JOBSET_NAME: name,
                REPLICATED_JOB_NAME: rj,
                REPLICATED_JOB_REPLICAS: str(replicas),
                JOB_INDEX: str(index),
                JOB_GLOBAL_INDEX: str(global_index),
                JOB_KEY: hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest(),
            }
            global_index += 1
            if job_name in jobs:
                ready = ready and _job_ready(jobs[job_name], view)
                continue
            ready = False
            spec = dict(mapping(job_template, "spec"))
            pod_template = with_labels(mapping(job_template, "spec", "template"), meta, meta)
            if dns is None or dns is True:
                pod_spec = dict(pod_template.get("spec") or {})
                pod_spec.setdefault("subdomain", subdomain)
                pod_template["spec"] = pod_spec
            spec["template"] = pod_template
            template_meta = mapping(job_template, "metadata")
            out.create.append(
                child_object(
                    job_set,
                    "batch/v1",
                    "Job",
                    spec,
                    name=job_name,
                    labels={**(template_meta.get("labels") or {}), **meta},
                    annotations={**(template_meta.get("annotations") or {}), **meta},
                )
            )
        if in_order and not ready:
            break  # the next replicated job starts once every Job of this one runs
    return out


def _job_ready(job: Mapping[str, Any], view: View) -> bool:
    """All the pods the Job runs at once are running (or it has finished)."""
    if job_finished(job):
        return True
    parallelism = integer(job, "spec", "parallelism", default=1)
    completions = integer(job, "spec", "completions", default=parallelism)
    running = sum(1 for pod in view.owned(job) if is_running(pod))
    return running >= min(parallelism, completions)


def _job_count(job_set: Mapping[str, Any], replicated: list[Mapping[str, Any]]) -> int:
    return sum(
        integer(job_set, "spec", "replicatedJobs", str(i), "replicas", default=1)
        for i in range(len(replicated))
    )


def _lws_templates(lws: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any], int]:
    size = integer(lws, "spec", "leaderWorkerTemplate", "size", default=1, minimum=1)
    worker = template_of(lws, "spec", "leaderWorkerTemplate", "workerTemplate")
    leader = (
        template_of(lws, "spec", "leaderWorkerTemplate", "leaderTemplate")
        if at(lws, "spec", "leaderWorkerTemplate", "leaderTemplate") is not None
        else worker
    )
    return leader, worker, size


def reconcile_leader_worker_set(lws: Mapping[str, Any], view: View, now: datetime) -> Reconciled:
    leader, worker, size = _lws_templates(lws)
    replicas = integer(lws, "spec", "replicas", default=1)
    policy = text(
        lws, "spec", "startupPolicy", default="LeaderCreated", choices=("LeaderCreated", "LeaderReady")
    )
    name = name_of(lws)
    base = {LWS_NAME: name}
    annotations = {LWS_SIZE: str(size)}
    out = Reconciled()
    leader_sets = [obj for obj in view.owned(lws) if obj.get("kind") == "StatefulSet"]
    if not leader_sets:
        spec = {
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "serviceName": name,
            "selector": {"matchLabels": {**base, LWS_WORKER_INDEX: "0"}},
            "template": with_labels(leader, {**base, LWS_WORKER_INDEX: "0"}, annotations),
        }
        out.create.append(
            child_object(lws, "apps/v1", "StatefulSet", spec, name=name, labels=base, annotations=annotations)
        )
        return out
    if size == 1:
        return out
    for leader_pod in view.owned(leader_sets[0]):
        if not is_active(leader_pod):
            continue
        if policy == "LeaderReady" and not is_running(leader_pod):
            continue
        if any(obj.get("kind") == "StatefulSet" for obj in view.owned(leader_pod)):
            continue
        group = labels_of(leader_pod).get(LWS_GROUP_INDEX, "0")
        labels = {**base, LWS_GROUP_INDEX: group, LWS_GROUP_KEY: labels_of(leader_pod).get(LWS_GROUP_KEY, "")}
        spec = {
            "replicas": size - 1,
            "ordinals": {"start": 1},
            "podManagementPolicy": "Parallel",
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": with_labels(worker, labels, annotations),
        }
        out.create.append(
            child_object(
                leader_pod,
                "apps/v1",
                "StatefulSet",
                spec,
                name=name_of(leader_pod),
                labels=labels,
                annotations=annotations,
            )
        )
    return out


def admit_lws_pod(pod: Manifest) -> Manifest:
    """LWS's pod webhook: a leader gets its group index (its StatefulSet ordinal) and group key; every pod
    its worker index (a worker's ordinal; 0 for the leader)."""
    labels = pod.setdefault("metadata", {}).setdefault("labels", {})
    if LWS_NAME not in labels or POD_INDEX_LABEL not in labels:
        return pod
    ordinal = labels[POD_INDEX_LABEL]
    if labels.get(LWS_WORKER_INDEX) == "0":
        labels[LWS_GROUP_INDEX] = ordinal
        key = f"{namespace_of(pod)}/{labels[LWS_NAME]}-{ordinal}"
        labels[LWS_GROUP_KEY] = hashlib.sha1(key.encode()).hexdigest()
    else:
        labels[LWS_WORKER_INDEX] = ordinal
    return pod
