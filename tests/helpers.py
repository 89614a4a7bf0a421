"""Small builders for tests: tiny manifests as dicts, turned into API objects, and shortcuts to run one
scheduling cycle (through the simulator or by driving a Session by hand).

Everything is built the way a user writes it (camelCase manifests validated by the API models), so the
tests exercise the same path as real input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from kai_scheduler.actions.allocate import place_job_tasks
from kai_scheduler.actions.job_queue import QueueOrderedJobs
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import (
    ApiObject,
    DeviceClass,
    Node,
    NodeResourceTopology,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceClaim,
    ResourceSlice,
    Topology,
)
from kai_scheduler.cycle import PLUGINS
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.framework.decisions import Decision
from kai_scheduler.framework.gang import tasks_to_allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.snapshot import ClusterSnapshot, ClusterState, PodGroupState, PodState
from kai_scheduler.sim.engine import Simulation, SimulationOptions, SimulationResult
from kai_scheduler.sim.results import result_document

START = datetime(2026, 1, 1, tzinfo=UTC)
SCHEDULER = "kai-scheduler"


# --- manifests -----------------------------------------------------------------------------------


def node_manifest(
    name: str,
    *,
    gpus: int = 8,
    cpu: str | int = "64",
    memory: str = "512Gi",
    pods: str | int = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    gpu_memory: int | None = None,
    extra: dict[str, str | int] | None = None,
) -> dict[str, Any]:
    allocatable: dict[str, Any] = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    allocatable.update({k: str(v) for k, v in (extra or {}).items()})
    node_labels = dict(labels or {})
    if gpu_memory is not None:
        node_labels["nvidia.com/gpu.memory"] = str(gpu_memory)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels},
        "spec": spec,
        "status": {"allocatable": allocatable},
    }


def node(name: str, **kwargs: Any) -> Node:
    return Node.model_validate(node_manifest(name, **kwargs))


def pod_manifest(
    name: str,
    queue: str | None = "q",
    *,
    gpus: int = 0,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    group: str | None = None,
    priority_class: str | None = None,
    node_name: str | None = None,
    phase: str | None = None,
    fraction: float | None = None,
    gpu_memory: int | None = None,
    num_devices: int | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    terminating: bool = False,
    arrival: str | int | None = None,
    duration: str | int | None = None,
    namespace: str | None = None,
    scheduler: str = SCHEDULER,
    extra_requests: dict[str, str | int] | None = None,
    task_priority: int | None = None,
    created: str | None = None,
    claims: dict[str, str] | None = None,
    claim_templates: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`claims`: the pod's claim name -> a ResourceClaim it shares; `claim_templates`: -> a template."""
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    requests.update({k: str(v) for k, v in (extra_requests or {}).items()})
    pod_labels = dict(labels or {})
    if queue is not None:
        pod_labels["kai.scheduler/queue"] = queue
    if task_priority is not None:
        pod_labels["kai.scheduler/task-priority"] = str(task_priority)
    pod_annotations = dict(annotations or {})
    if group is not None:
        pod_annotations["pod-group-name"] = group
    if fraction is not None:
        pod_annotations["gpu-fraction"] = str(fraction)
    if gpu_memory is not None:
        pod_annotations["gpu-memory"] = str(gpu_memory)
    if num_devices is not None:
        pod_annotations["gpu-fraction-num-devices"] = str(num_devices)
    if arrival is not None:
        pod_annotations["simulation.kai.scheduler/arrival"] = str(arrival)
    if duration is not None:
        pod_annotations["simulation.kai.scheduler/duration"] = str(duration)
    metadata: dict[str, Any] = {"name": name, "labels": pod_labels, "annotations": pod_annotations}
    if namespace is not None:
        metadata["namespace"] = namespace
    if terminating:
        metadata["deletionTimestamp"] = "2025-12-31T23:59:00Z"
    if created is not None:
        metadata["creationTimestamp"] = created
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if requests:
        container["resources"] = {"requests": requests}
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if node_name is not None:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    resource_claims = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    resource_claims += [
        {"name": k, "resourceClaimTemplateName": v} for k, v in (claim_templates or {}).items()
    ]
    if resource_claims:
        spec["resourceClaims"] = resource_claims
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if phase is not None:
        manifest["status"] = {"phase": phase}
    elif node_name is not None:
        manifest["status"] = {"phase": "Running"}
    return manifest


def pod(name: str, queue: str | None = "q", **kwargs: Any) -> Pod:
    return Pod.model_validate(pod_manifest(name, queue, **kwargs))


# --- DRA (resource.k8s.io/v1) ----------------------------------------------------------------------

GPU_DRIVER = "gpu.nvidia.com"
DRA = "resource.k8s.io/v1"


def device_class_manifest(name: str = GPU_DRIVER, *selectors: str) -> dict[str, Any]:
    """A DeviceClass with CEL `selectors` (none: every device)."""
    spec = {"selectors": [{"cel": {"expression": e}} for e in selectors]} if selectors else {}
    return {"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def resource_slice_manifest(
    name: str,
    node: str | None,
    devices: int | list[dict[str, Any]],
    *,
    driver: str = GPU_DRIVER,
    pool: str | None = None,
    generation: int = 0,
    attributes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A slice of `devices` (a count: `gpu-0`, `gpu-1`, ... each with `attributes`) on `node` (None: all
    nodes)."""
    if isinstance(devices, int):
        devices = [
            {"name": f"gpu-{i}", **({"attributes": attributes} if attributes else {})} for i in range(devices)
        ]
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node or name, "generation": generation},
        "devices": devices,
    }
    if node is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    return {"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def claim_spec(
    count: int = 1, device_class: str = GPU_DRIVER, *selectors: str, all_devices: bool = False
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if all_devices:
        exactly["allocationMode"] = "All"
    else:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def resource_claim_manifest(
    name: str,
    count: int = 1,
    device_class: str = GPU_DRIVER,
    *selectors: str,
    namespace: str | None = None,
    queue: str | None = None,
    allocated: list[str] | None = None,
    node: str | None = None,
    reserved_for: list[str] | None = None,
    all_devices: bool = False,
    driver: str = GPU_DRIVER,
) -> dict[str, Any]:
    """A claim; `allocated`: device names (of `node`'s pool, of `driver`) it holds."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if queue is not None:
        metadata["labels"] = {"kai.scheduler/queue": queue}
    manifest: dict[str, Any] = {
        "apiVersion": DRA,
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": claim_spec(count, device_class, *selectors, all_devices=all_devices),
    }
    status: dict[str, Any] = {}
    if allocated is not None:
        results = [{"request": "gpu", "driver": driver, "pool": node, "device": d} for d in allocated]
        selector = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        status["allocation"] = {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [selector]},
        }
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": n, "uid": f"uid-{n}"} for n in reserved_for]
    if status:
        manifest["status"] = status
    return manifest


def claim_template_manifest(
    name: str, count: int = 1, device_class: str = GPU_DRIVER, *selectors: str
) -> dict[str, Any]:
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim_spec(count, device_class, *selectors)},
    }


def objects_of(*manifests: dict[str, Any]) -> list[ApiObject]:
    """Manifests as validated objects (with the simulator's checks)."""
    return [parse_object(m, "test", i + 1) for i, m in enumerate(manifests)]


def _resource(quota: float, limit: float, weight: float) -> dict[str, float]:
    return {"quota": quota, "limit": limit, "overQuotaWeight": weight}


def queue_manifest(
    name: str,
    *,
    gpu: float = -1,
    gpu_limit: float = -1,
    gpu_weight: float = 1,
    cpu: float = -1,
    cpu_limit: float = -1,
    cpu_weight: float = 1,
    memory: float = -1,
    memory_limit: float = -1,
    memory_weight: float = 1,
    parent: str | None = None,
    priority: int | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A queue; quotas default to -1 (unlimited) so tests only state what matters. CPU is in millicores
    and memory in MB, as in KAI's Queue spec."""
    spec: dict[str, Any] = {
        "resources": {
            "gpu": _resource(gpu, gpu_limit, gpu_weight),
            "cpu": _resource(cpu, cpu_limit, cpu_weight),
            "memory": _resource(memory, memory_limit, memory_weight),
        }
    }
    if parent is not None:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    metadata: dict[str, Any] = {"name": name}
    if created is not None:
        metadata["creationTimestamp"] = created
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": metadata, "spec": spec}


def queue(name: str, **kwargs: Any) -> Queue:
    return Queue.model_validate(queue_manifest(name, **kwargs))


def scheduling_shard_manifest(name: str = "default", **spec: Any) -> dict[str, Any]:
    """KAI's operator's SchedulingShard (kai.scheduler/v1) with `spec`."""
    return {
        "apiVersion": "kai.scheduler/v1",
        "kind": "SchedulingShard",
        "metadata": {"name": name},
        "spec": spec,
    }


def kai_config_manifest(**spec: Any) -> dict[str, Any]:
    """KAI's operator's Config `kai-config` (kai.scheduler/v1) with `spec`."""
    return {
        "apiVersion": "kai.scheduler/v1",
        "kind": "Config",
        "metadata": {"name": "kai-config"},
        "spec": spec,
    }


def pod_group_manifest(
    name: str,
    queue: str | None = "q",
    *,
    min_member: int = 1,
    priority_class: str | None = None,
    preemptibility: str | None = None,
    sub_groups: list[dict[str, Any]] | None = None,
    arrival: str | int | None = None,
    namespace: str | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if queue is not None:
        spec["queue"] = queue
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if preemptibility is not None:
        spec["preemptibility"] = preemptibility
    if sub_groups is not None:
        spec["subGroups"] = sub_groups
    metadata: dict[str, Any] = {"name": name, "annotations": {}}
    if arrival is not None:
        metadata["annotations"]["simulation.kai.scheduler/arrival"] = str(arrival)
    if namespace is not None:
        metadata["namespace"] = namespace
    if created is not None:
        metadata["creationTimestamp"] = created
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }


def pod_group(name: str, queue: str | None = "q", **kwargs: Any) -> PodGroup:
    return PodGroup.model_validate(pod_group_manifest(name, queue, **kwargs))


def priority_class_manifest(name: str, value: int, *, global_default: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }


def priority_class(name: str, value: int, *, global_default: bool = False) -> PriorityClass:
    return PriorityClass.model_validate(priority_class_manifest(name, value, global_default=global_default))


def topology_constraint(
    topology: str = "dc", *, required: str | None = None, preferred: str | None = None
) -> dict[str, Any]:
    """A PodGroup's (or sub-group's) `topologyConstraint`."""
    found: dict[str, Any] = {"topology": topology}
    if required is not None:
        found["requiredTopologyLevel"] = required
    if preferred is not None:
        found["preferredTopologyLevel"] = preferred
    return found


def gang(
    name: str, queue: str = "q", *, size: int, min_member: int | None = None, **pod_kwargs: Any
) -> list[ApiObject]:
    """A PodGroup and its `size` pods `<name>-0` ... (minMember defaults to size)."""
    objects: list[ApiObject] = [pod_group(name, queue, min_member=size if min_member is None else min_member)]
    objects += [pod(f"{name}-{i}", queue, group=name, **pod_kwargs) for i in range(size)]
    return objects


# --- configuration -------------------------------------------------------------------------------


def config(**document: Any) -> SchedulerConfig:
    """A configuration from a KAI-format document given as keyword arguments (empty: the defaults)."""
    return parse_config(document or None)


def config_with(
    plugin_arguments: dict[str, dict[str, Any]] | None = None, **document: Any
) -> SchedulerConfig:
    """The default plugin list with some plugins' arguments replaced (or plugins swapped: gpupack ->
    gpuspread when `gpuspread` is given)."""
    from kai_scheduler.framework.config import DEFAULT_PLUGIN_ARGUMENTS, DEFAULT_PLUGINS

    plugin_arguments = plugin_arguments or {}
    names = list(DEFAULT_PLUGINS)
    if "gpuspread" in plugin_arguments:
        names[names.index("gpupack")] = "gpuspread"
    plugins = [
        {"name": name, "arguments": plugin_arguments.get(name, DEFAULT_PLUGIN_ARGUMENTS.get(name, {}))}
        for name in names
    ]
    return parse_config({"tiers": [{"plugins": plugins}], **document})


# --- running -------------------------------------------------------------------------------------


def run(
    objects: Sequence[ApiObject],
    scheduler_config: SchedulerConfig | None = None,
    *,
    cycles: int | None = None,
    until: float | None = None,
    max_cycles: int = 1000,
    start: datetime = START,
) -> SimulationResult:
    options = SimulationOptions(start=start, cycles=cycles, until=until, max_cycles=max_cycles)
    return Simulation(list(objects), scheduler_config or SchedulerConfig(), options).run()


def simulate(
    objects: Sequence[ApiObject], scheduler_config: SchedulerConfig | None = None, **options: Any
) -> dict[str, Any]:
    """The result document (as `simulate --output json` prints it)."""
    return result_document(run(objects, scheduler_config, **options))


def one_cycle(
    objects: Sequence[ApiObject], scheduler_config: SchedulerConfig | None = None
) -> list[Decision]:
    """The decisions of the first cycle."""
    return run(objects, scheduler_config, cycles=1).cycles[0].decisions


def binds(decisions: Iterable[Decision]) -> dict[str, str]:
    """pod name (without namespace) -> node, for bind decisions."""
    return {d.pod.split("/", 1)[1]: d.node for d in decisions if d.type == "bind"}


def pipelines(decisions: Iterable[Decision]) -> dict[str, str]:
    return {d.pod.split("/", 1)[1]: d.node for d in decisions if d.type == "pipeline"}


def bound_order(decisions: Iterable[Decision]) -> list[str]:
    return [d.pod.split("/", 1)[1] for d in decisions if d.type == "bind"]


def pods_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in document["pods"]}


def groups_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in document["podGroups"]}


def queues_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["name"]: q for q in document["queues"]}


# --- driving a session by hand -------------------------------------------------------------------


def _session_seconds(stamp: datetime | None) -> float | None:
    """A timestamp on the session clock, which starts at START."""
    return None if stamp is None else (stamp - START).total_seconds()


def cluster_state(objects: Sequence[ApiObject], *, pending_terminating: bool = False) -> ClusterState:
    """A ClusterState from objects in creation order: pods with nodeName are running there (terminating
    when they carry a deletionTimestamp), the others pending; shared-GPU pods name their GPU by the
    `runai-gpu-group` label."""
    from kai_scheduler.api import constants as c

    nodes = [o for o in objects if isinstance(o, Node)]
    queues = [o for o in objects if isinstance(o, Queue)]
    classes = dict(c.BUILTIN_PRIORITY_CLASSES)
    for o in objects:
        if isinstance(o, PriorityClass):
            classes[o.metadata.name] = o.value
    pods = []
    groups = []
    for rank, o in enumerate(objects):
        if isinstance(o, Pod):
            bound = o.spec.node_name is not None
            group = o.metadata.labels.get(c.GPU_GROUP_LABEL)
            pods.append(
                PodState(
                    o,
                    rank,
                    node_name=o.spec.node_name,
                    phase=(o.status.phase or "Running") if bound else (o.status.phase or "Pending"),
                    gpu_groups=(group,) if group else (),
                    terminating=o.metadata.deletion_timestamp is not None,
                    deleted=_session_seconds(o.metadata.deletion_timestamp),
                )
            )
        elif isinstance(o, PodGroup):
            groups.append(PodGroupState(o, rank))
    topologies = [o for o in objects if isinstance(o, Topology)]
    return ClusterState(
        nodes=nodes,
        pods=pods,
        pod_groups=groups,
        queues=queues,
        priority_classes=classes,
        topologies=topologies,
        resource_claims=[o for o in objects if isinstance(o, ResourceClaim)],
        resource_slices=[o for o in objects if isinstance(o, ResourceSlice)],
        device_classes=[o for o in objects if isinstance(o, DeviceClass)],
        node_topologies=[o for o in objects if isinstance(o, NodeResourceTopology)],
    )


def snapshot_of(objects: Sequence[ApiObject]) -> ClusterSnapshot:
    return build_snapshot(cluster_state(objects))


def open_session(
    objects: Sequence[ApiObject] | ClusterSnapshot,
    scheduler_config: SchedulerConfig | None = None,
    *,
    plugins: Sequence[str] | None = None,
) -> Session:
    """A session on a fresh snapshot with the configuration's plugins opened (or just `plugins`)."""
    scheduler_config = scheduler_config or SchedulerConfig()
    snapshot = objects if isinstance(objects, ClusterSnapshot) else snapshot_of(objects)
    session = Session(snapshot, scheduler_config, cycle=1, now=0.0)
    options = scheduler_config.plugins()
    if plugins is not None:
        by_name = {o.name: o for o in options}
        chosen = [(name, by_name[name].arguments if name in by_name else {}) for name in plugins]
    else:
        chosen = [(o.name, o.arguments) for o in options if o.name in PLUGINS]
    for name, arguments in chosen:
        PLUGINS[name](arguments).on_session_open(session)
    return session


def waiting_jobs(session: Session) -> list[JobInfo]:
    """The jobs with pods pending as the session opened."""
    return [job for job in session.snapshot.jobs_at_open().waiting if job.tally().pending]


def pop_and_place(
    session: Session, jobs: QueueOrderedJobs, pops: int, *, refresh_each: bool = False
) -> list[str]:
    """The queues of `pops` jobs popped from `jobs`, each placed whole before the next pop (as allocate's
    walk does); `refresh_each`: every queue marked to be ranked again before each pop (`refresh`)."""
    popped = []
    for _ in range(pops):
        if refresh_each:
            jobs.refresh()
        job = jobs.pop()
        assert job is not None
        popped.append(job.queue)
        assert place_job_tasks(session, job, tasks_to_allocate(session, job), "allocate")
    return popped


# --- victim actions (reclaim, preempt, consolidation, min runtime) ------------------------------------


def queue_with_min_runtime(
    name: str, *, preempt: str | None = None, reclaim: str | None = None, **kwargs: Any
) -> Queue:
    """A queue (as `queue`) that sets `preemptMinRuntime` / `reclaimMinRuntime`."""
    manifest = queue_manifest(name, **kwargs)
    if preempt is not None:
        manifest["spec"]["preemptMinRuntime"] = preempt
    if reclaim is not None:
        manifest["spec"]["reclaimMinRuntime"] = reclaim
    return Queue.model_validate(manifest)


def labelled_pod_group(
    name: str, queue: str | None = "q", *, labels: dict[str, str], **kwargs: Any
) -> PodGroup:
    """A PodGroup (as `pod_group`) with metadata labels, e.g. `kai.scheduler/preemptibility`."""
    manifest = pod_group_manifest(name, queue, **kwargs)
    manifest["metadata"]["labels"] = dict(labels)
    return PodGroup.model_validate(manifest)


def running_job(
    name: str, queue: str = "q", *, size: int, min_member: int, node_name: str, **pod_kwargs: Any
) -> list[ApiObject]:
    """A PodGroup whose `size` pods `<name>-0` ... all run on `node_name` (elastic when minMember < size)."""
    objects: list[ApiObject] = [pod_group(name, queue, min_member=min_member)]
    objects += [pod(f"{name}-{i}", queue, group=name, node_name=node_name, **pod_kwargs) for i in range(size)]
    return objects


def decision_rows(result: SimulationResult) -> list[tuple[int, str, str, str]]:
    """(cycle, action, type, pod name) of every decision of a run."""
    return [(r.cycle, d.action, d.type, d.pod.split("/", 1)[1]) for r in result.cycles for d in r.decisions]


def stale_evictions(result: SimulationResult) -> list[tuple[float, str]]:
    """(time, pod name) of each stale-gang eviction of a run."""
    return [
        (r.time, d.pod.split("/", 1)[1])
        for r in result.cycles
        for d in r.decisions
        if d.action == "stalegangeviction"
    ]


def evicted(result: SimulationResult, action: str | None = None) -> list[str]:
    """Names of the pods evicted in a run (by `action` if given), in order."""
    return [
        d.pod.split("/", 1)[1]
        for r in result.cycles
        for d in r.decisions
        if d.type == "evict" and (action is None or d.action == action)
    ]


def fingerprint(snapshot: ClusterSnapshot) -> dict[str, Any]:
    """Everything a session reads from a snapshot, in the order it reads it. Ranks only order things, so
    their values are left out (two edges may number the same order differently) and their order is
    checked against the order of jobs and tasks."""
    nodes = snapshot.nodes
    job_ranks = [j.rank for j in snapshot.jobs.values()]
    task_ranks = [t.rank for t in snapshot.tasks.values()]
    columns = (*NodeTable.USAGE_COLUMNS, *NodeTable.CAPACITY_COLUMNS)
    return {
        "nodes": nodes.names,
        "specs": nodes.specs,
        "scalar_names": nodes.scalar_names,
        "columns": {name: getattr(nodes, name).tolist() for name in columns},
        "groups": [
            (g.group_id, g.node, g.used, g.releasing, list(g.holders.items()), g.claimed)
            for node in sorted(nodes.groups)
            for g in nodes.groups[node]
        ],
        "capacity": snapshot.capacity.values(),
        "min_gpu_memory": snapshot.min_gpu_memory_mib,
        "max_gpu_memory": snapshot.max_gpu_memory_mib,
        "existing_gpu_groups": sorted(snapshot.existing_gpu_groups),
        "topologies": sorted(snapshot.topologies),
        "queues": [
            (q.name, q.parent, q.rank, q.deserved.values(), q.limit.values(), q.usage.values())
            for q in snapshot.queues
        ],
        "jobs": [
            (
                key,
                j.queue,
                j.priority,
                j.preemptible,
                j.min_member,
                j.invalid_reason,
                j.last_start,
                j.stale_since,
                j.gated,
                j.topology,
                [(p.name, p.min_member, p.topology, [t.key for t in p.tasks]) for p in j.podsets.values()],
                sorted(j.subgroups),
            )
            for key, j in snapshot.jobs.items()
        ],
        "tasks": [
            (
                key,
                t.status.value,
                t.node,
                t.gpu_groups,
                t.nominated_node,
                t.nominated_groups,
                t.request,
                t.placement.key,
                t.host_ports,
                t.job.key,
            )
            for key, t in snapshot.tasks.items()
        ],
        "ranks_in_order": (job_ranks == sorted(job_ranks), task_ranks == sorted(task_ranks)),
        "host_port_tasks": [t.key for t in snapshot.host_port_tasks],
        "nominated_tasks": None
        if snapshot.nominated_tasks is None
        else [t.key for t in snapshot.nominated_tasks],
        "asks_gpu_memory": snapshot.asks_gpu_memory,
        "foreign_host_ports": snapshot.foreign_host_ports,
        "dra": _dra_fingerprint(snapshot),
    }


def _dra_fingerprint(snapshot: ClusterSnapshot) -> Any:
    dra = snapshot.dra
    if dra is None:
        return None
    catalog = dra.catalog
    return (
        dra.enabled,
        catalog.ids,
        catalog.local_node.tolist(),
        catalog.gpu_nodes.tolist(),
        sorted(catalog.classes),
        sorted(dra.claims.items()),
        sorted(dra.pod_claims.items()),
    )
