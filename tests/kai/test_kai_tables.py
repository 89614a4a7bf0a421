"""KAI's own action test tables, run against this project's actions.

Each file of `tables/` is one KAI test file (`pkg/scheduler/actions/<action>/*_test.go`, converted by
`convert_go_tables.py`); each case builds the cluster its `TestTopologyBasic` describes, the way KAI's test
harness does (`pkg/scheduler/test_utils`), opens a session with the default configuration (or the case's),
runs the one action the file tests, and checks every expected job's and task's pods as KAI's
`MatchExpectedAndRealTasks` does: status and node, and no more binds, evictions and pipelines than the
case's cache mock allows (none where it names no number).

Cases that do not pass here are listed in `not_ported.yaml` with the reason (strict xfails), cases the
converter could not read are skipped with theirs; `README.md` has the counts per file.

How KAI's harness builds a cluster, and so how these cases are read:
- a node has 20000 CPUs and 20G memory unless the case says otherwise, 110 pods, GPU memory 100 MiB per GPU,
  and the label `kai.scheduler/type: <node name>` (what `NodeAffinityNames` select);
- a queue's GPU quota is `DeservedGPUs`, its limit `MaxAllowedGPUs` (0: none), its over-quota weight
  `GPUOverQuotaWeight` (default 0); CPU and memory quotas and limits are unlimited unless given; without
  departments every queue goes under one department `default` with an unlimited quota; a department's
  over-quota weight is its GPU quota;
- jobs are created in the order of their priority (highest first, stable), the first the oldest, unless
  `JobAgeInMinutes`; a job's pods are ordered by name (KAI's tasks have no creation time: their UID, the
  pod name, decides); a job without sub-groups needs all its pods (minMember = its number of pods);
- a pod asks for 1 CPU and 1G memory unless the job says otherwise, `RequiredGPUsPerTask` whole GPUs or a
  `gpu-fraction`; a running fractional pod without `GPUGroups` holds a GPU of its own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import open_session, snapshot_of
from kai_scheduler.api.objects import ApiObject, Node, Pod, PodGroup, PriorityClass, Queue, Topology
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo, TaskStatus
from kai_scheduler.scheduler import ACTIONS

HERE = Path(__file__).parent
TABLES = sorted((HERE / "tables").glob("*.yaml"))
NOT_PORTED: dict[str, dict[str, str]] = yaml.safe_load((HERE / "not_ported.yaml").read_text()) or {}
NOW = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACE = "default"

# KAI's pod statuses, as the classes the tests compare: a pod placed in this session is "Binding" in
# KAI (Allocated until the statement commits), ALLOCATED here.
_PLACED = {"Allocated", "Binding", "Bound"}


def _cases() -> list[Any]:
    params = []
    for path in TABLES:
        document = yaml.safe_load(path.read_text())
        left_out = NOT_PORTED.get(path.stem, {})
        for index, case in enumerate(document["cases"]):
            name = case.get("Name", f"case {index}")
            marks = []
            if "unreadable" in case:
                marks.append(pytest.mark.skip(reason=f"not ported: {case['unreadable']}"))
            elif name in left_out:
                marks.append(pytest.mark.xfail(strict=True, reason=left_out[name]))
            params.append(
                pytest.param(document["action"], case, id=f"{path.stem}[{index}] {name}", marks=marks)
            )
    return params


@pytest.mark.parametrize(("action", "case"), _cases())
def test_kai_case(action: str, case: dict[str, Any]) -> None:
    objects = cluster(case)
    session = open_session(snapshot_of(objects), configuration(case))
    ACTIONS[action]().execute(session)
    check(case, session)


# --- the cluster ---------------------------------------------------------------------------------------


def cluster(case: dict[str, Any]) -> list[ApiObject]:
    objects: list[ApiObject] = [_node(name, spec) for name, spec in (case.get("Nodes") or {}).items()]
    objects += _queues(case)
    objects += [_topology(t) for t in case.get("Topologies") or []]
    jobs = sorted(case.get("Jobs") or [], key=lambda job: -job.get("Priority", 0))  # stable, as KAI
    created = {
        job["Name"]: NOW - timedelta(minutes=job.get("JobAgeInMinutes") or len(jobs) - index)
        for index, job in enumerate(jobs)
    }
    jobs.sort(key=lambda job: created[job["Name"]])  # creation order is input order here
    priorities = sorted({job.get("Priority", 0) for job in jobs})
    objects += [_priority_class(value) for value in priorities]
    objects += [_pod_group(job, created[job["Name"]]) for job in jobs]
    for job in jobs:
        pods = [_pod(job, index, task) for index, task in enumerate(job.get("Tasks") or [])]
        objects += sorted(pods, key=lambda pod: pod.metadata.name)  # KAI orders tasks by UID (the name)
    return objects


def _quantity(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _node(name: str, spec: dict[str, Any]) -> Node:
    gpus = spec.get("GPUs", 0)
    mig = spec.get("MigStrategy")
    labels = {
        "kai.scheduler/type": name,
        "nvidia.com/gpu.memory": str(spec.get("GPUMemory") or 100),
        "nvidia.com/gpu.count": str(gpus),
        **(spec.get("Labels") or {}),
    }
    if mig:
        labels["nvidia.com/mig.strategy"] = mig
        labels["node-role.kubernetes.io/mig-enabled"] = "true"
    allocatable = {
        "cpu": _quantity(spec.get("CPUMillis") or 20000),
        "memory": _quantity(spec["CPUMemory"]) if spec.get("CPUMemory") else "20G",
        "pods": str(spec.get("MaxTaskNum") or 110),
        "nvidia.com/gpu": "0" if mig == "mixed" else str(gpus),
    }
    allocatable.update({resource: str(count) for resource, count in (spec.get("MigInstances") or {}).items()})
    return Node.model_validate(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable},
        }
    )


def _resource(quota: float, limit: float, weight: float) -> dict[str, float]:
    return {"quota": quota, "limit": limit, "overQuotaWeight": weight}


def _queues(case: dict[str, Any]) -> list[Queue]:
    queues = [dict(q) for q in case.get("Queues") or []]
    departments = [dict(d) for d in case.get("Departments") or []]
    if not departments and not case.get("DisableDefaultDepartment"):
        for queue in queues:
            queue["ParentQueue"] = "default"
        departments = [{"Name": "default", "DeservedGPUs": -1, "MaxAllowedGPUs": -1}]
    found = []
    for index, queue in enumerate(queues):
        spec: dict[str, Any] = {
            "resources": {
                "gpu": _resource(
                    queue.get("DeservedGPUs", 0),
                    queue.get("MaxAllowedGPUs") or -1,
                    queue.get("GPUOverQuotaWeight", 0),
                ),
                "cpu": _resource(queue.get("DeservedCPUs", -1), queue.get("MaxAllowedCPUs", -1), 1),
                "memory": _resource(queue.get("DeservedMemory", -1), queue.get("MaxAllowedMemory", -1), 1),
            }
        }
        if queue.get("ParentQueue"):
            spec["parentQueue"] = queue["ParentQueue"]
        if queue.get("Priority") is not None:
            spec["priority"] = queue["Priority"]
        found.append(_queue(queue["Name"], index, spec))
    for index, department in enumerate(departments):
        deserved = department.get("DeservedGPUs", 0)
        spec = {
            "resources": {
                # KAI's harness gives a department its quota as its weight (the default one, -1: alone
                # at the top, any weight does).
                "gpu": _resource(deserved, department.get("MaxAllowedGPUs") or -1, max(deserved, 0)),
                "cpu": _resource(-1, department.get("MaxAllowedCPUs", -1), 1),
                "memory": _resource(-1, department.get("MaxAllowedMemory", -1), 1),
            }
        }
        found.append(_queue(department["Name"], index, spec))
    return found


def _queue(name: str, index: int, spec: dict[str, Any]) -> Queue:
    created = (NOW + timedelta(minutes=index)).isoformat().replace("+00:00", "Z")
    return Queue.model_validate(
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": spec,
        }
    )


def _topology(topology: dict[str, Any]) -> Topology:
    return Topology.model_validate(
        {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": topology["ObjectMeta"]["Name"]},
            "spec": {"levels": [{"nodeLabel": level["NodeLabel"]} for level in topology["Spec"]["Levels"]]},
        }
    )


def _priority_name(value: int) -> str:
    return f"priority-{value}" if value >= 0 else f"priority-minus-{-value}"


def _priority_class(value: int) -> PriorityClass:
    return PriorityClass.model_validate(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": _priority_name(value)},
            "value": value,
        }
    )


def _constraint(info: dict[str, Any] | None) -> dict[str, str] | None:
    if not info:
        return None
    found = {"topology": info["Topology"]}
    if info.get("RequiredLevel"):
        found["requiredTopologyLevel"] = info["RequiredLevel"]
    if info.get("PreferredLevel"):
        found["preferredTopologyLevel"] = info["PreferredLevel"]
    return found


def _pod_group(job: dict[str, Any], created: datetime) -> PodGroup:
    tasks = job.get("Tasks") or []
    spec: dict[str, Any] = {
        "queue": job["QueueName"],
        "priorityClassName": _priority_name(job.get("Priority", 0)),
        "minMember": max(len(tasks), 1),
    }
    if job.get("Preemptibility"):
        spec["preemptibility"] = job["Preemptibility"]
    root = job.get("RootSubGroupSet")
    if root:
        constraint = _constraint(root.get("topology"))
        if constraint:
            spec["topologyConstraint"] = constraint
        sub_groups: list[dict[str, Any]] = []
        _sub_groups(root, None, sub_groups)
        named = [group for group in sub_groups if group["name"]]
        default = [group for group in sub_groups if not group["name"]]
        if named:
            spec["subGroups"] = named
            spec["minMember"] = max(sum(g["minMember"] for g in named if g.get("_leaf")), 1)
            for group in named:
                group.pop("_leaf", None)
        elif default:
            spec["minMember"] = default[0]["minMember"]
    return PodGroup.model_validate(
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {
                "name": job["Name"],
                "namespace": NAMESPACE,
                "creationTimestamp": created.isoformat().replace("+00:00", "Z"),
            },
            "spec": spec,
        }
    )


def _sub_groups(group: dict[str, Any], parent: str | None, found: list[dict[str, Any]]) -> None:
    for pod_set in group.get("podSets") or []:
        entry: dict[str, Any] = {"name": pod_set["name"], "minMember": pod_set["minAvailable"], "_leaf": True}
        if parent:
            entry["parent"] = parent
        constraint = _constraint(pod_set.get("topology"))
        if constraint:
            entry["topologyConstraint"] = constraint
        found.append(entry)
    for child in group.get("subGroups") or []:
        entry = {"name": child["name"], "minMember": 1}
        if parent:
            entry["parent"] = parent
        constraint = _constraint(child.get("topology"))
        if constraint:
            entry["topologyConstraint"] = constraint
        found.append(entry)
        _sub_groups(child, child["name"], found)


def _pod(job: dict[str, Any], index: int, task: dict[str, Any]) -> Pod:
    name = f"{job['Name']}-{index}"
    state = task.get("State", "Pending")
    labels = {"kai.scheduler/queue": job["QueueName"], **(task.get("PodAffinityLabels") or {})}
    annotations = {"pod-group-name": job["Name"]}
    requests: dict[str, str] = {}
    if not job.get("IsBestEffortJob"):
        requests["cpu"] = _quantity(job["RequiredCPUsPerTask"]) if job.get("RequiredCPUsPerTask") else "1"
        requests["memory"] = (
            _quantity(job["RequiredMemoryPerTask"]) if job.get("RequiredMemoryPerTask") else "1G"
        )
        gpus = job.get("RequiredGPUsPerTask", 0)
        if task.get("RequiredGPUs") is not None:
            requests["nvidia.com/gpu"] = str(task["RequiredGPUs"])
        elif float(gpus).is_integer():
            if gpus:
                requests["nvidia.com/gpu"] = str(int(gpus))
        else:
            annotations["gpu-fraction"] = repr(float(gpus))
            if job.get("RequiredMultiFractionDevicesPerTask"):
                annotations["gpu-fraction-num-devices"] = str(job["RequiredMultiFractionDevicesPerTask"])
        if job.get("RequiredGpuMemory"):
            annotations["gpu-memory"] = str(job["RequiredGpuMemory"])
        requests.update(
            {resource: str(count) for resource, count in (task.get("RequiredMigInstances") or {}).items()}
        )
    if task.get("Priority") is not None:
        labels["kai.scheduler/task-priority"] = str(task["Priority"])
    if task.get("SubGroupName"):
        labels["kai.scheduler/subgroup-name"] = task["SubGroupName"]
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    affinity: dict[str, Any] = {}
    if task.get("NodeAffinityNames"):
        term = {
            "matchExpressions": [
                {"key": "kai.scheduler/type", "operator": "In", "values": task["NodeAffinityNames"]}
            ]
        }
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    for kind, key in (
        ("podAffinity", "PodAffinityTopologyKey"),
        ("podAntiAffinity", "PodAntiAffinityTopologyKey"),
    ):
        if task.get("PodAffinityLabels") and task.get(key):
            selector = {"matchLabels": task["PodAffinityLabels"]}
            affinity[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": task[key], "labelSelector": selector}
                ]
            }
    if affinity:
        spec["affinity"] = affinity
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "labels": labels,
        "annotations": annotations,
    }
    status = {"phase": "Pending"}
    if state in ("Running", "Bound", "Binding", "Allocated", "Releasing") and task.get("NodeName"):
        spec["nodeName"] = task["NodeName"]
        status = {"phase": "Running"}
        if state == "Releasing":
            metadata["deletionTimestamp"] = (NOW - timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
        # KAI names a node's GPUs per node ("0", "1"); here a GPU group id is the cluster's.
        shared = "gpu-fraction" in annotations or "gpu-memory" in annotations
        groups = [f"{task['NodeName']}-{g}" for g in task.get("GPUGroups") or []] or (
            [f"{name}-gpu"] if shared else []
        )
        if groups:
            labels["runai-gpu-group"] = groups[0]
    elif state in ("Succeeded", "Failed"):
        status = {"phase": state}
    return Pod.model_validate(
        {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
    )


def configuration(case: dict[str, Any]) -> SchedulerConfig:
    """The default configuration, or the case's; as KAI's harness, consolidation considers every
    preemptible job (maxConsolidationPreemptees -1) and reclaim may move victims."""
    conf = (case.get("Mocks") or {}).get("SchedulerConf") or {}
    document: dict[str, Any] = {"maxConsolidationPreemptees": -1, "allowConsolidatingReclaim": True}
    if conf.get("Actions"):
        document["actions"] = conf["Actions"]
    if conf.get("Tiers"):
        document["tiers"] = [
            {"plugins": [{"name": p["Name"], "arguments": p.get("Arguments") or {}} for p in tier["Plugins"]]}
            for tier in conf["Tiers"]
        ]
    return parse_config(document)


# --- the check -----------------------------------------------------------------------------------------


def _status(task: TaskInfo, initial: str) -> str:
    """The task's status in KAI's words, with a pod placed in this session called Allocated."""
    status = task.status
    if status is TaskStatus.ALLOCATED or (status is TaskStatus.RUNNING and initial in _PLACED):
        return "Allocated"
    return status.value


def _expected_status(status: str) -> str:
    return "Allocated" if status in _PLACED else status


def check(case: dict[str, Any], session: Session) -> None:
    tasks = {task.name: task for task in session.snapshot.tasks.values()}
    names = session.snapshot.nodes.names
    initial = {
        f"{job['Name']}-{index}": task.get("State", "Pending")
        for job in case.get("Jobs") or []
        for index, task in enumerate(job.get("Tasks") or [])
    }
    expected: dict[str, dict[str, Any]] = {}
    for job_name, result in (case.get("JobExpectedResults") or {}).items():
        members = [name for name in tasks if name.rsplit("-", 1)[0] == job_name]
        assert members, f"no pods of job {job_name}"
        for name in members:
            expected[name] = result
    # (KAI looks up each pod in the tasks' expectations: an expectation naming no pod checks nothing.)
    expected.update({k: v for k, v in (case.get("TaskExpectedResults") or {}).items() if k in tasks})
    problems = []
    for name, result in expected.items():
        task = tasks.get(name)
        if task is None:
            problems.append(f"{name}: no such pod")
            continue
        want = _expected_status(result["Status"])
        got = _status(task, initial.get(name, "Pending"))
        node = names[task.node] if task.node >= 0 else ""
        if got != want:
            problems.append(f"{name}: {got} on {node or '-'}, expected {want}")
        elif result.get("NodeName") and want != "Pending" and node != result["NodeName"]:
            problems.append(f"{name}: on {node}, expected on {result['NodeName']}")
    # (KAI's check of GPUGroups applies only to pods whose groups equal the expected labels already, so
    # it holds whenever it applies; the tables' labels for newly placed pods are not meant literally.)
    counts = {
        kind: sum(1 for d in session.decisions if d.type == kind) for kind in ("bind", "evict", "pipeline")
    }
    mock = (case.get("Mocks") or {}).get("CacheRequirements") or {}
    bounds = {
        "bind": mock.get("NumberOfCacheBinds", 0),
        "evict": mock.get("NumberOfCacheEvictions", 0),
        "pipeline": mock.get("NumberOfPipelineActions", 0),
    }
    problems += [
        f"{counts[kind]} {kind} decisions, at most {bound} expected"
        for kind, bound in bounds.items()
        if counts[kind] > bound
    ]
    table = "\n".join(f"  {d.action} {d.type} {d.pod} {d.node}" for d in session.decisions)
    assert not problems, "\n".join(problems) + f"\ndecisions:\n{table}"
