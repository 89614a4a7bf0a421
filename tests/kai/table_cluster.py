"""A KAI test table's cluster (`TestTopologyBasic`), built as the objects and state a cluster would hold.

How KAI's harness (`pkg/scheduler/test_utils`) builds a cluster, and so how these cases are read:
- a node has 20000 CPUs and 20G memory unless the case says otherwise, 110 pods, GPU memory 100 MiB per GPU,
  and the label `kai.scheduler/type: <node name>` (what `NodeAffinityNames` select); a node's
  `NumaTopology` is its NodeResourceTopology (zones with their allocatable and available resources, the
  kubelet's Topology Manager policy and scope), and a cluster with one turns the `numa` plugin on;
- a queue's GPU quota is `DeservedGPUs`, its limit `MaxAllowedGPUs` (0: none), its over-quota weight
  `GPUOverQuotaWeight` (default 0); CPU and memory quotas and limits are unlimited unless given; without
  departments every queue goes under one department `default` with an unlimited quota; a department's
  over-quota weight is its GPU quota;
- jobs are created in the order of their priority (highest first, stable), the first the oldest, unless
  `JobAgeInMinutes`; a job's pods are ordered by name (KAI's tasks have no creation time: their UID, the
  pod name, decides); a job without sub-groups needs all its pods (minMember = its number of pods);
  `MinSubGroup` on its sub-group tree is the PodGroup's (or sub-group's) `minSubGroup`;
- a job's `PreemptionDelay` is its PodGroup's `spec.preemptionDelay`, counted from its creation;
  `StaleDuration` is how long ago it was found stale (KAI's `kai.scheduler/stale-podgroup-timestamp`),
  `PerJobStalenessGracePeriod` its `spec.stalenessGracePeriod`; durations are seconds in the tables;
- a pod asks for 1 CPU and 1G memory unless the job says otherwise, `RequiredGPUsPerTask` whole GPUs or a
  `gpu-fraction`; a running fractional pod without `GPUGroups` holds a GPU of its own; a `Guaranteed`
  `QOSClass` gives its containers limits equal to their requests (and the status says so); `Releasing`
  is a pod deleted a second ago, `StuckInReleasing` one deleted longer ago than KAI's 2m threshold;
  a finished pod keeps the node it ran on.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from helpers import cluster_state, open_session
from kai_scheduler.api.objects import (
    ApiObject,
    Node,
    NodeResourceTopology,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    Topology,
)
from kai_scheduler.cycle import ACTIONS, PLUGINS
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.framework.session import Session
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.snapshot import ClusterState, JobTimes

NOW = datetime(2026, 1, 1, tzinfo=UTC)  # the session's clock starts here
NAMESPACE = "default"
# KAI's --stuck-in-releasing-threshold is 2m: a pod deleted this long ago is stuck.
STUCK_FOR = timedelta(minutes=10)


def cluster(case: dict[str, Any]) -> list[ApiObject]:
    nodes = case.get("Nodes") or {}
    objects: list[ApiObject] = [_node(name, spec) for name, spec in nodes.items()]
    objects += [
        _numa_topology(name, spec["NumaTopology"]) for name, spec in nodes.items() if spec.get("NumaTopology")
    ]
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


def run_case(action: str, case: dict[str, Any]) -> Session:
    """The case's action run once on a session of its cluster, opened as KAI's BuildSession opens one. The
    numa plugin, not in the default configuration, is opened after the others when a node has a NUMA
    topology (as KAI's harness does), and closed after the action: bind decisions get their predicted
    NUMA zones then."""
    session = open_session(build_snapshot(state(case, cluster(case))), configuration(case))
    numa = PLUGINS["numa"]({}) if has_numa(case) else None
    if numa is not None:
        numa.on_session_open(session)
    ACTIONS[action]().execute(session)
    if numa is not None:
        numa.on_session_close(session)
    return session


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


def state(case: dict[str, Any], objects: list[ApiObject]) -> ClusterState:
    """The objects as a cluster holds them, with what KAI's harness sets on its jobs besides: when each
    PodGroup was created and how long ago it was found stale, on the session's clock (NOW is 0)."""
    found = cluster_state(objects)
    jobs = {job["Name"]: job for job in case.get("Jobs") or []}
    groups = [
        replace(group, created=_seconds(group.pod_group.metadata.creation_timestamp))
        for group in found.pod_groups
    ]
    times = {
        f"{NAMESPACE}/{name}": JobTimes(stale_since=-job["StaleDuration"])
        for name, job in jobs.items()
        if job.get("StaleDuration") is not None
    }
    return replace(found, pod_groups=groups, job_times=times)


def has_numa(case: dict[str, Any]) -> bool:
    return any(spec.get("NumaTopology") for spec in (case.get("Nodes") or {}).values())


def _seconds(when: datetime | None) -> float | None:
    return None if when is None else (when - NOW).total_seconds()


def _stamp(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _duration(seconds: float) -> str:
    """Seconds as a Go duration (`600s`, `-1s`, `0.5s`)."""
    return f"{_quantity(seconds)}s"


def _numa_topology(node: str, topology: dict[str, Any]) -> NodeResourceTopology:
    """The node's NodeResourceTopology (topology.node.k8s.io/v1alpha2), as the NFD topology exporter
    publishes it and KAI's fake writes it: one zone of type Node per NUMA zone."""
    zones = []
    for zone in topology["zones"]:
        names = sorted({*zone["allocatable"], *zone["available"]})
        resources = [
            {
                "name": name,
                "capacity": zone["allocatable"].get(name, "0"),
                "allocatable": zone["allocatable"].get(name, "0"),
                "available": zone["available"].get(name, "0"),
            }
            for name in names
        ]
        zones.append({"name": zone["id"], "type": "Node", "resources": resources})
    manifest = {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": node},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": topology["policy"]},
            {"name": "topologyManagerScope", "value": topology["scope"]},
        ],
        "zones": zones,
    }
    return NodeResourceTopology.model_validate(manifest)


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
    if job.get("PreemptionDelay") is not None:
        spec["preemptionDelay"] = _duration(job["PreemptionDelay"])
    if job.get("PerJobStalenessGracePeriod") is not None:
        spec["stalenessGracePeriod"] = _duration(job["PerJobStalenessGracePeriod"])
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
        if root.get("minSubGroup") is not None:  # mutually exclusive with minMember (KAI's CRD)
            spec["minSubGroup"] = root["minSubGroup"]
            spec.pop("minMember", None)
    return PodGroup.model_validate(
        {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {
                "name": job["Name"],
                "namespace": NAMESPACE,
                "creationTimestamp": _stamp(created),
            },
            "spec": spec,
        }
    )


def _sub_groups(group: dict[str, Any], parent: str | None, found: list[dict[str, Any]]) -> None:
    for pod_set in group.get("podSets") or []:
        found.append(_sub_group(pod_set, parent, minMember=pod_set["minAvailable"], _leaf=True))
    for child in group.get("subGroups") or []:
        if child.get("minSubGroup") is not None:
            found.append(_sub_group(child, parent, minSubGroup=child["minSubGroup"]))
        else:
            found.append(_sub_group(child, parent, minMember=1))
        _sub_groups(child, child["name"], found)


def _sub_group(group: dict[str, Any], parent: str | None, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": group["name"], **fields}
    if parent:
        entry["parent"] = parent
    constraint = _constraint(group.get("topology"))
    if constraint:
        entry["topologyConstraint"] = constraint
    return entry


def _pod(job: dict[str, Any], index: int, task: dict[str, Any]) -> Pod:
    name = f"{job['Name']}-{index}"
    state = task.get("State", "Pending")
    labels = {"kai.scheduler/queue": job["QueueName"], **(task.get("PodAffinityLabels") or {})}
    annotations = {"pod-group-name": job["Name"], **(task.get("Annotations") or {})}
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
        if job.get("RequiredGpuMemory"):
            annotations["gpu-memory"] = str(job["RequiredGpuMemory"])
        if job.get("RequiredMultiFractionDevicesPerTask"):  # a fraction's or a gpu-memory request's
            annotations["gpu-fraction-num-devices"] = str(job["RequiredMultiFractionDevicesPerTask"])
        requests.update(
            {resource: str(count) for resource, count in (task.get("RequiredMigInstances") or {}).items()}
        )
    if task.get("Priority") is not None:
        labels["kai.scheduler/task-priority"] = str(task["Priority"])
    if task.get("SubGroupName"):
        labels["kai.scheduler/subgroup-name"] = task["SubGroupName"]
    resources: dict[str, Any] = {"requests": requests}
    if job.get("QOSClass") == "Guaranteed":
        resources["limits"] = dict(requests)
    spec: dict[str, Any] = {
        "schedulerName": "kai-scheduler",
        "containers": [{"name": "main", "resources": resources}],
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
    status: dict[str, Any] = {"phase": "Pending"}
    if state in ("Running", "Bound", "Binding", "Allocated", "Releasing", "StuckInReleasing") and task.get(
        "NodeName"
    ):
        spec["nodeName"] = task["NodeName"]
        status = {"phase": "Running"}
        if state == "Releasing":
            metadata["deletionTimestamp"] = _stamp(NOW - timedelta(seconds=1))
        elif state == "StuckInReleasing":
            metadata["deletionTimestamp"] = _stamp(NOW - STUCK_FOR)
        # KAI names a node's GPUs per node ("0", "1"); here a GPU group id is the cluster's.
        shared = "gpu-fraction" in annotations or "gpu-memory" in annotations
        groups = [f"{task['NodeName']}-{g}" for g in task.get("GPUGroups") or []] or (
            [f"{name}-gpu"] if shared else []
        )
        if groups:
            labels["runai-gpu-group"] = groups[0]
    elif state in ("Succeeded", "Failed"):
        status = {"phase": state}
        if task.get("NodeName"):
            spec["nodeName"] = task["NodeName"]
    if job.get("QOSClass"):
        status["qosClass"] = job["QOSClass"]
    return Pod.model_validate(
        {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}
    )
