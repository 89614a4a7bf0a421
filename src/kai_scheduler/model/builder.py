"""The rules that turn API objects into the scheduling model: a pod's request, placement constraints and
task; a PodGroup's (or a bare pod's) job; the node table; the queue tree. `model.cache.ClusterCache`
applies them to the objects that changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from kai_scheduler.api import constants as c
from kai_scheduler.api.durations import parse_duration, parse_go_duration
from kai_scheduler.api.gpu_request import node_gpu_memory_mib, read_shared_gpu_request
from kai_scheduler.api.objects import Container, Node, ObjectMeta, Pod, PodGroup, Queue, namespace_of
from kai_scheduler.api.objects import TopologyConstraint as TopologyConstraintSpec
from kai_scheduler.api.reasons import QUEUE_DOES_NOT_EXIST, WaitReason
from kai_scheduler.model.accounted import limit_value
from kai_scheduler.model.jobs import (
    ALL_HOST_IPS,
    HostPort,
    JobInfo,
    Placement,
    PodSet,
    SubGroupSet,
    TaskInfo,
    TaskStatus,
    TopologyConstraint,
)
from kai_scheduler.model.nodes import MIG_MIXED, MIG_NONE, MIG_SINGLE, FloatArray, NodeSpecInfo, NodeTable
from kai_scheduler.model.priorities import Priorities, is_preemptible
from kai_scheduler.model.queues import QueueInfo, QueueTree, is_unlimited
from kai_scheduler.model.resources import PodRequest, Resources
from kai_scheduler.model.snapshot import PodGroupState, PodState
from kai_scheduler.model.storage import claim_names, required_config_maps

# Resources that placement does not model as countable node capacity.
_NOT_SCALAR = frozenset(
    {c.CPU_RESOURCE, c.MEMORY_RESOURCE, c.PODS_RESOURCE, c.GPU_RESOURCE, "ephemeral-storage"}
)
_DEFAULT_MAX_PODS = 110


def implicit_pod_group_name(pod: Pod) -> str:
    """The PodGroup the pod grouper would make for a pod that names none."""
    return implicit_group_name(pod.metadata.name)


def implicit_group_name(pod_name: str) -> str:
    """`implicit_pod_group_name` of the pod named `pod_name`."""
    return f"pg-{pod_name}"


def pod_request(pod: Pod) -> PodRequest:
    """Split a pod's effective requests into what placement needs (see `PodRequest`); raises
    `api.gpu_request.InvalidGpuRequest` (a ValueError) for a shared-GPU request admission refuses."""
    requests = pod.resource_requests()
    shared = read_shared_gpu_request(pod.metadata.annotations)
    scalars = tuple(
        sorted(
            (name, float(amount))
            for name, amount in requests.items()
            if name not in _NOT_SCALAR and amount > 0
        )
    )
    return PodRequest(
        cpu=float(requests.get(c.CPU_RESOURCE, Fraction(0)) * 1000),
        memory=float(requests.get(c.MEMORY_RESOURCE, Fraction(0))),
        whole_gpus=int(requests.get(c.GPU_RESOURCE, Fraction(0))),
        gpu_portion=shared.fraction if shared else 0.0,
        gpu_memory_mib=shared.memory_mib if shared else 0,
        gpu_devices=shared.devices if shared else 0,
        scalars=scalars,
    )


def pod_host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The ports the pod takes on its node, by Kubernetes' rule: those with a `hostPort` of the main
    containers and of the sidecars (init containers with `restartPolicy: Always`: they run as long as
    the pod does). With `hostNetwork`, a port without a `hostPort` takes its `containerPort`."""
    spec = pod.spec
    containers = [*(c for c in spec.init_containers if c.restart_policy == "Always"), *spec.containers]
    ports: dict[HostPort, None] = {}
    for container in containers:
        for port in container.ports:
            host_port = port.host_port or (port.container_port if spec.host_network else 0)
            if host_port > 0:
                ports[HostPort(port.protocol, port.host_ip or ALL_HOST_IPS, host_port)] = None
    return tuple(ports)


# The placement key of a pod without node selector, node affinity or tolerations (most pods).
_UNCONSTRAINED_KEY = json.dumps([[], None, []], sort_keys=True)


def pod_placement(pod: Pod, host_ports: tuple[HostPort, ...] | None = None) -> Placement:
    """The pod's placement constraints; `host_ports` when already known (`pod_host_ports`)."""
    spec = pod.spec
    affinity = spec.affinity
    node_affinity = affinity.node_affinity if affinity else None
    has_pod_affinity = bool(affinity and (affinity.pod_affinity or affinity.pod_anti_affinity))
    if not spec.node_selector and node_affinity is None and not spec.tolerations:
        key = _UNCONSTRAINED_KEY
    else:
        key = json.dumps(
            [
                sorted(spec.node_selector.items()),
                node_affinity.model_dump(mode="json") if node_affinity else None,
                [t.model_dump(mode="json") for t in spec.tolerations],
            ],
            sort_keys=True,
        )
    if has_pod_affinity:
        # Pod affinity depends on the pod's own labels and namespace: such placements are never shared.
        key += f"|{pod.key}"
    if host_ports is None:
        host_ports = pod_host_ports(pod)
    if host_ports:
        # Where host ports are free differs from where they are not: jobs with other ports (or none) must
        # not share a scheduling signature.
        key += f"|ports={json.dumps(sorted(host_ports))}"
    config_maps = required_config_maps(pod)
    claims = claim_names(pod)
    if config_maps or claims:
        # Which ConfigMaps exist and where claims bind differ by name: such pods share placements only
        # with pods that need the same.
        key += f"|storage={json.dumps([config_maps, claims])}"
    return Placement(
        key,
        dict(spec.node_selector),
        affinity,
        tuple(spec.tolerations),
        has_pod_affinity,
        config_maps,
        claims,
    )


class _Quantities:
    """Nodes' allocatable quantities as floats, each quantity object converted once: parsing shares equal
    quantities' objects (`api.quantity`), so a cluster's nodes hold a few, and a Fraction's float is made
    in Python (5,000 nodes, 4 resources each: 20,000 conversions, a third of a node table's build). Keyed
    by id while the nodes that hold the objects are alive (one build)."""

    __slots__ = ("_floats",)

    def __init__(self) -> None:
        self._floats: dict[int, float] = {}

    def of(self, value: Fraction | None, default: float = 0.0) -> float:
        """A node's allocatable quantity `value` as a float (None, absent: `default`)."""
        if value is None:
            return default
        known = self._floats.get(id(value))
        if known is None:
            known = self._floats[id(value)] = float(value)
        return known


def _mig_mode(labels: Mapping[str, str], allocatable: Mapping[str, Fraction]) -> int:
    """A node's MIG mode, by its `labels` and its `allocatable` names."""
    strategy = labels.get(c.MIG_STRATEGY_LABEL, "")
    if strategy == "mixed":
        return MIG_MIXED
    if strategy == "single":
        return MIG_SINGLE
    if labels.get(c.MIG_ENABLED_LABEL) == "true" and any(
        name.startswith(c.MIG_RESOURCE_PREFIX) for name in allocatable
    ):
        return MIG_MIXED
    return MIG_NONE


def reported_gpu_memory_range(gpu_memory_mib: FloatArray) -> tuple[float, float]:
    """The smallest and largest per-GPU memory among the nodes that report one, GPU nodes or not (0, 0
    when none does: KAI v0.17's nil).

    KAI's snapshot reads a node without the label as 100 MiB and so counts only nodes above 100 MiB; its
    test harness, whose nodes have 100 MiB GPUs, falls back to 100 when none is above. Counting every
    node that reports its memory gives both: the two differ only for a node labelled below 200 MiB."""
    reported = gpu_memory_mib[gpu_memory_mib > 0]
    if not reported.size:
        return 0.0, 0.0
    return float(reported.min()), float(reported.max())


def _constraint(spec: TopologyConstraintSpec | None) -> TopologyConstraint | None:
    """A PodGroup's (or sub-group's) topology constraint; none without a topology or any level."""
    if spec is None or not spec.topology:
        return None
    if not spec.required_topology_level and not spec.preferred_topology_level:
        return None
    return TopologyConstraint(spec.topology, spec.required_topology_level, spec.preferred_topology_level)


class NodeRow(NamedTuple):
    """What a node table holds of one node that its object alone decides (`node_rows`): its columns but
    for the GPUs its ResourceSlices add and its extended resources' amounts."""

    node: Node  # the object it was read off
    spec: NodeSpecInfo
    cpu: float
    memory: float
    pods: float
    gpus: float
    gpu_memory_mib: float
    mig_mode: int
    extended: frozenset[str]  # its allocatable names that are not the table's fixed columns


def node_rows(nodes: Iterable[Node]) -> Iterator[NodeRow]:
    """Each node's row, in turn."""
    quantity = _Quantities().of  # (each quantity object converted once for them all)
    for node in nodes:
        yield _node_row(node, quantity)


def _node_row(node: Node, quantity: Callable[[Fraction | None, float], float]) -> NodeRow:
    metadata, spec, status = node.metadata, node.spec, node.status
    name, labels, allocatable = metadata.name, metadata.labels, status.allocatable
    names = allocatable.keys()
    # (Most nodes have none: asked as a subset, which makes no set.)
    extended = _NO_NAMES if names <= _NOT_SCALAR else frozenset(names - _NOT_SCALAR)
    return NodeRow(
        node,
        NodeSpecInfo(
            name,
            # The kubelet always labels a node with its hostname; manifests often leave it out.
            {c.HOSTNAME_LABEL: name, **labels},
            spec.unschedulable,
            tuple(spec.taints),
            # Without conditions (as simulator input usually is) a node is ready: not asked.
            status.ready if status.conditions else True,
        ),
        quantity(allocatable.get(c.CPU_RESOURCE), 0.0) * 1000,
        quantity(allocatable.get(c.MEMORY_RESOURCE), 0.0),
        quantity(allocatable.get(c.PODS_RESOURCE), _DEFAULT_MAX_PODS),
        quantity(allocatable.get(c.GPU_RESOURCE), 0.0),
        float(node_gpu_memory_mib(labels.get(c.GPU_MEMORY_LABEL))),
        _mig_mode(labels, allocatable),
        extended,
    )


_NO_NAMES: frozenset[str] = frozenset()
_row_name = attrgetter("spec.name")
_row_extended = attrgetter("extended")


def build_node_table(
    nodes: list[Node], dra_gpus: Mapping[str, int] | None = None, dra_backed: Collection[str] = ()
) -> NodeTable:
    """The nodes as columns (`node_table_of` their rows, read now)."""
    return node_table_of(node_rows(nodes), dra_gpus, dra_backed)


def node_table_of(
    rows: Iterable[NodeRow], dra_gpus: Mapping[str, int] | None = None, dra_backed: Collection[str] = ()
) -> NodeTable:
    """The nodes `rows` were read off (`node_rows`, in any order) as columns; `dra_gpus` (node name -> GPUs
    its ResourceSlices publish) join the nodes' GPUs, as KAI adds them to a node's allocatable GPUs.
    `dra_backed`: extended resources a DeviceClass backs (KEP-5004); a node without allocatable for one
    leaves its fit to the DRA allocator, so its room for it is unbounded here (KAI skips that dimension in
    fit and does not charge it)."""
    ordered = sorted(rows, key=_row_name)
    backed = set(dra_backed)
    scalar_names = sorted(set[str]().union(*map(_row_extended, ordered)) | backed)
    if ordered:
        _, specs, cpu, memory, pods, gpus, gpu_memory, mig, _ = zip(*ordered, strict=True)
    else:
        specs = cpu = memory = pods = gpus = gpu_memory = mig = ()
    if dra_gpus:
        gpus = tuple(gpu + dra_gpus.get(spec.name, 0) for gpu, spec in zip(gpus, specs, strict=True))
    scalars = np.zeros((len(ordered), len(scalar_names)))
    if scalar_names:  # most clusters have none: no loop made a node
        quantity = _Quantities().of
        for i, row in enumerate(ordered):
            allocatable = row.node.status.allocatable
            for j, scalar in enumerate(scalar_names):
                scalars[i, j] = quantity(allocatable.get(scalar), 0.0)
                if scalars[i, j] <= 0 and scalar in backed:
                    scalars[i, j] = np.inf
    return NodeTable(
        list(specs),
        cpu=np.array(cpu, dtype=np.float64),
        memory=np.array(memory, dtype=np.float64),
        pods=np.array(pods, dtype=np.float64),
        gpus=np.array(gpus, dtype=np.float64),
        gpu_memory_mib=np.array(gpu_memory, dtype=np.float64),
        mig_mode=np.array(mig, dtype=np.int8),
        scalar_names=scalar_names,
        scalars=scalars,
    )


def _queue_resources(queue: Queue, field: str) -> Resources:
    spec = queue.spec.resources

    def convert(value: float, unit: float) -> float:
        # Unlimited keeps its meaning whatever the unit.
        return value if is_unlimited(value) else value * unit

    return Resources(
        gpu=getattr(spec.gpu, field),
        cpu=getattr(spec.cpu, field),  # KAI's queue CPU is already in millicores
        memory=convert(getattr(spec.memory, field), c.QUEUE_MEMORY_UNIT_BYTES)
        if field != "over_quota_weight"
        else spec.memory.over_quota_weight,
    )


def _seconds(duration: str | None) -> float | None:
    return None if duration is None else parse_duration(duration)


def queue_specs(queues: list[Queue]) -> list[QueueInfo]:
    """What the queues' objects say of each (in their order, which ranks them), for `queue_tree_of`: kept
    out of any tree, so that a tree of them may be made again each session without reading the objects
    again."""
    return [
        QueueInfo(
            name=q.metadata.name,
            parent=q.spec.parent_queue or None,
            priority=q.spec.priority if q.spec.priority is not None else c.DEFAULT_QUEUE_PRIORITY,
            rank=rank,
            deserved=_queue_resources(q, "quota"),
            limit=_queue_resources(q, "limit"),
            weight=_queue_resources(q, "over_quota_weight"),
            preempt_min_runtime=_seconds(q.spec.preempt_min_runtime),
            reclaim_min_runtime=_seconds(q.spec.reclaim_min_runtime),
            accounted_limits={e.resource_ref: limit_value(e.limit) for e in q.spec.accounted_resources},
            admission_gating=bool(q.spec.admission_gating),
        )
        for rank, q in enumerate(queues)
    ]


def queue_tree_of(specs: list[QueueInfo], usage: Mapping[str, Resources] | None = None) -> QueueTree:
    """A tree of new queues made of `specs` (`queue_specs`: their spec fields copied, nothing shared that a
    session may change), with `usage`."""
    usage = usage or {}
    return QueueTree(
        [
            QueueInfo(
                name=spec.name,
                parent=spec.parent,
                priority=spec.priority,
                rank=spec.rank,
                deserved=spec.deserved.copy(),
                limit=spec.limit.copy(),
                weight=spec.weight.copy(),
                preempt_min_runtime=spec.preempt_min_runtime,
                reclaim_min_runtime=spec.reclaim_min_runtime,
                accounted_limits=dict(spec.accounted_limits),
                usage=usage[spec.name].copy() if spec.name in usage else Resources(),
                admission_gating=spec.admission_gating,
            )
            for spec in specs
        ]
    )


def task_status(state: PodState, *, stuck: bool = False) -> TaskStatus | None:
    """The status a pod starts a session with; None for a terminating pod that was never bound (it holds
    nothing and will not be scheduled). `stuck`: deleted too long ago (`model.releasing`)."""
    if state.phase == "Succeeded":
        return _SUCCEEDED
    if state.phase == "Failed":
        return _FAILED
    if state.node_name is None:
        return None if state.terminating else _PENDING
    if state.terminating:
        return _STUCK_IN_RELEASING if stuck else _RELEASING
    return _RUNNING


# The statuses `task_status` hands out, looked up once: Python 3.11 finds an enum's member through the
# hook `EnumType.__getattr__` puts on every lookup (~10x a global's cost), and it is asked of every pod as
# it arrives and again as a cycle's decisions are undone (`ClusterCache.after_cycle`).
_SUCCEEDED, _FAILED, _PENDING = TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.PENDING
_RELEASING, _STUCK_IN_RELEASING, _RUNNING = (
    TaskStatus.RELEASING,
    TaskStatus.STUCK_IN_RELEASING,
    TaskStatus.RUNNING,
)


def is_gated(state: PodState) -> bool:
    """A pending pod with scheduling gates: alive, but not for the scheduler until they are removed."""
    return bool(state.pod.spec.scheduling_gates) and state.node_name is None


def job_key_of(pod: Pod) -> str:
    """The job (PodGroup) a pod belongs to: the one it names, else the one the pod grouper would make."""
    return job_key_in(pod.metadata)


def job_key_in(metadata: ObjectMeta) -> str:
    """`job_key_of` the pod with this `metadata`, read once (for a caller that holds it: every read of a
    model's attribute goes through the hook pydantic's `__getattr__` puts on its class)."""
    named = metadata.annotations.get(c.POD_GROUP_ANNOTATION)
    return f"{namespace_of(metadata)}/{named or implicit_group_name(metadata.name)}"


# Entries of `PodDerivations`' memo by container objects: a loaded cluster has a few distinct ones.
_MAX_BY_CONTAINERS = 4096


class PodDerivations:
    """What a pod needs (request, placement, host ports) never changes while the pod object exists, so it
    is derived once per pod object; pods with equal constraints share one `Placement`, which lets a
    session evaluate static predicates once per distinct placement, and pods with equal resources share
    one `PodRequest` (replicas and gang members: computed once, with exact quantities)."""

    def __init__(self) -> None:
        self._derived: dict[int, tuple[Pod, PodRequest, Placement, tuple[HostPort, ...]]] = {}
        self._placements: dict[str, Placement] = {}
        self._requests: dict[tuple[object, ...], PodRequest] = {}
        self._by_containers: dict[tuple[object, ...], tuple[PodRequest, tuple[Container, ...]]] = {}
        # Pods found in `_by_containers` since it was last emptied; False once it filled up with fewer
        # than half its pods found: this cluster's pods have containers of their own (a backlog validated
        # pod by pod), and looking them up only cost a key and an entry each.
        self._container_hits = 0
        self._by_container_objects = True
        self._by_plain_spec: dict[
            tuple[object, ...], tuple[Placement, tuple[HostPort, ...], tuple[Container, ...]]
        ] = {}
        # The placements of pods whose node selector alone constrains them (`_selector_only`), by its items.
        self._by_selector: dict[tuple[tuple[str, str], ...], Placement] = {}
        # The request and placement of the plainest pods, by everything they are made of (`_lean_key`);
        # its hits and whether it is still asked, as `_by_containers`' (given up on pods whose quantities
        # are objects of their own: numbers rather than text in their manifests).
        self._by_lean_key: dict[tuple[object, ...], tuple[PodRequest, Placement, tuple[object, ...]]] = {}
        self._lean_hits = 0
        self._by_lean_keys = True

    def of(self, pod: Pod) -> tuple[PodRequest, Placement, tuple[HostPort, ...]]:
        cached = self._derived.get(id(pod))
        if cached is None or cached[0] is not pod:
            # Most pods (a backlog's, whose containers are their own objects: 20,000 in a first cycle at
            # 5,000 nodes) are found here by one look-up rather than the placement's and the request's,
            # which hands out the very objects those would.
            key = _lean_key(pod) if self._by_lean_keys else None
            known = self._by_lean_key.get(key) if key is not None else None
            if known is not None:
                self._lean_hits += 1
                cached = (pod, known[0], known[1], ())
            else:
                cached = self._derive(pod, key)
            self._derived[id(pod)] = cached
        return cached[1], cached[2], cached[3]

    def _derive(
        self, pod: Pod, lean_key: tuple[object, ...] | None
    ) -> tuple[Pod, PodRequest, Placement, tuple[HostPort, ...]]:
        """What `of` hands out for a pod it has not found; kept by `lean_key` when the pod has one."""
        if lean_key is None:
            placement, host_ports = self._placement(pod)
            return pod, self._request(pod), placement, host_ports
        request, placement = self._request(pod), self._placement(pod)[0]
        if len(self._by_lean_key) >= _MAX_BY_CONTAINERS:
            self._by_lean_key.clear()
            self._by_lean_keys = self._lean_hits * 2 >= _MAX_BY_CONTAINERS
            self._lean_hits = 0
        if self._by_lean_keys:
            self._by_lean_key[lean_key] = (request, placement, _held_quantities(pod))
        return pod, request, placement, ()

    def _placement(self, pod: Pod) -> tuple[Placement, tuple[HostPort, ...]]:
        spec = pod.spec
        if _selector_only(pod):
            # Most pods (a loaded backlog's, whose containers are their own objects): found by their
            # selector, without the placement key's JSON.
            selector = tuple(spec.node_selector.items())
            known_placement = self._by_selector.get(selector)
            if known_placement is None:
                made = pod_placement(pod, ())
                known_placement = self._placements.setdefault(made.key, made)
                if len(self._by_selector) >= _MAX_BY_CONTAINERS:
                    self._by_selector.clear()  # as `_by_containers`
                self._by_selector[selector] = known_placement
            return known_placement, ()
        # A pod whose spec has no constraint, volume or ephemeral container of its own (most pods) places
        # as its containers and network say: looked up by which (shared, `_request`) container objects it
        # has. Kept only when it needs no ConfigMap, whose names would be its namespace's.
        plain = not (
            spec.node_selector
            or spec.affinity
            or spec.tolerations
            or spec.volumes
            or spec.ephemeral_containers
        )
        key = None
        if plain:
            key = (spec.host_network, *map(id, spec.init_containers), None, *map(id, spec.containers))
            known = self._by_plain_spec.get(key)
            if known is not None:
                return known[0], known[1]
        host_ports = pod_host_ports(pod)
        placement = pod_placement(pod, host_ports)
        placement = self._placements.setdefault(placement.key, placement)
        if key is not None and not placement.config_maps:
            if len(self._by_plain_spec) >= _MAX_BY_CONTAINERS:
                self._by_plain_spec.clear()  # as `_by_containers`
            self._by_plain_spec[key] = (placement, host_ports, (*spec.init_containers, *spec.containers))
        return placement, host_ports

    def _request(self, pod: Pod) -> PodRequest:
        spec = pod.spec
        if spec.overhead or not self._by_container_objects:
            return self._request_of_shape(pod)
        # First by which container objects the pod has: the loader gives pods with equal containers the
        # same (frozen) ones (`api.shared_parts`), so most pods' resource shape, whose quantities are slow
        # to hash, is not made again (290,000 pods: 2.9 -> 2.0 s of CPU). The entry keeps its containers,
        # so that their ids stay theirs.
        annotations = pod.metadata.annotations
        key = (
            *map(id, spec.init_containers),
            None,
            *map(id, spec.containers),
            annotations.get(c.GPU_FRACTION_ANNOTATION),
            annotations.get(c.GPU_MEMORY_ANNOTATION),
            annotations.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION),
        )
        known = self._by_containers.get(key)
        if known is not None:
            self._container_hits += 1
            return known[0]
        request = self._request_of_shape(pod)
        if len(self._by_containers) >= _MAX_BY_CONTAINERS:
            self._by_containers.clear()  # pods that share no containers (live mode's): no memory kept
            self._by_container_objects = self._container_hits * 2 >= _MAX_BY_CONTAINERS
            self._container_hits = 0
        if self._by_container_objects:
            self._by_containers[key] = (request, (*spec.init_containers, *spec.containers))
        return request

    def _request_of_shape(self, pod: Pod) -> PodRequest:
        shape = _resource_shape(pod)
        request = self._requests.get(shape)
        if request is None:
            request = self._requests[shape] = pod_request(pod)
        return request

    def forget(self, pod: Pod) -> None:
        """Drop the entry of a pod object that is gone for good."""
        cached = self._derived.get(id(pod))
        if cached is not None and cached[0] is pod:
            del self._derived[id(pod)]


def _lean_key(pod: Pod) -> tuple[object, ...] | None:
    """Everything `pod_request` and `pod_placement` read of a pod placed by its node selector alone
    (`_selector_only`, which then takes no host port) that has no init container and no overhead: its
    selector, its GPU-share annotations and each container's resources (and restart policy, which
    `_resource_shape` keys by), the quantities by which objects they are (`_held_quantities`). None for
    any other pod."""
    spec = pod.spec
    if (
        spec.init_containers
        or spec.overhead
        or spec.affinity
        or spec.tolerations
        or spec.volumes
        or spec.ephemeral_containers
    ):
        return None
    annotations = pod.metadata.annotations
    key: tuple[object, ...] = (
        (
            tuple(spec.node_selector.items()),
            annotations.get(c.GPU_FRACTION_ANNOTATION),
            annotations.get(c.GPU_MEMORY_ANNOTATION),
            annotations.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION),
        )
        if annotations
        else (tuple(spec.node_selector.items()), None, None, None)  # most pods have none
    )
    for container in spec.containers:
        if container.ports or container.env or container.env_from:
            return None
        resources = container.resources
        requests, limits = resources.requests, resources.limits
        key += (
            container.restart_policy,
            tuple(requests),
            tuple(map(id, requests.values())),
            tuple(limits),
            tuple(map(id, limits.values())),
        )
    return key


def _held_quantities(pod: Pod) -> tuple[object, ...]:
    """The quantity objects whose ids `_lean_key` keys by: its entry holds them, so that no other object
    takes one of their ids while it lives. (Parsing shares equal quantities' objects: `api.quantity`.)"""
    held: list[object] = []
    for container in pod.spec.containers:
        held += (*container.resources.requests.values(), *container.resources.limits.values())
    return tuple(held)


def _selector_only(pod: Pod) -> bool:
    """Whether nothing but its node selector sets the pod's placement: no affinity, tolerations, volumes or
    ephemeral containers, and no container with ports (host ports) or environment (ConfigMaps). Its
    placement is then that of its selector, and it takes no host port."""
    spec = pod.spec
    if spec.affinity or spec.tolerations or spec.volumes or spec.ephemeral_containers:
        return False
    # Loops, not a generator over both lists: asked of every pod a cache makes a task of.
    for container in spec.containers:
        if container.ports or container.env or container.env_from:
            return False
    for container in spec.init_containers:
        if container.ports or container.env or container.env_from:
            return False
    return True


def _resource_shape(pod: Pod) -> tuple[object, ...]:
    """Everything `pod_request` reads, as a hashable value: equal shapes, equal requests. (Flat, in one
    pass: it is made for every pod whose containers are its own.)"""
    spec = pod.spec
    annotations = pod.metadata.annotations
    shape: list[object] = [
        annotations.get(c.GPU_FRACTION_ANNOTATION),
        annotations.get(c.GPU_MEMORY_ANNOTATION),
        annotations.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION),
        tuple(spec.overhead.items()),
        len(spec.init_containers),  # where the init containers end and the main ones begin
    ]
    for container in (*spec.init_containers, *spec.containers):
        resources = container.resources
        shape += (
            container.restart_policy,
            tuple(resources.requests.items()),
            tuple(resources.limits.items()),
        )
    return tuple(shape)


def queue_problem(queue: str, queues: QueueTree) -> str | None:
    """Why a job in `queue` cannot be scheduled because of its queue, if it cannot."""
    if queue in queues.orphans:
        return WaitReason(
            f"QueueDoesNotExist: the parent {queues.orphans[queue]} of queue {queue} does not exist",
            QUEUE_DOES_NOT_EXIST,
        )
    if queue not in queues:
        return WaitReason(f"QueueDoesNotExist: queue {queue} does not exist", QUEUE_DOES_NOT_EXIST)
    if not queues[queue].is_leaf:
        return f"queue {queue} is not a leaf queue; jobs must be submitted to leaf queues"
    return None


@dataclass(frozen=True, slots=True)
class JobTraits:
    """What decides where a job stands: its queue, priority and preemptibility."""

    queue: str
    priority: int
    preemptible: bool


def pod_group_traits(pg: PodGroup, first_pod: Pod | None, priorities: Priorities) -> JobTraits:
    """A PodGroup's queue, priority and preemptibility: its spec, then its labels, then (where both are
    silent) its first pod's."""
    spec = pg.spec
    labels = pg.metadata.labels
    class_name = (
        spec.priority_class_name
        or labels.get("priorityClassName")
        or (first_pod.spec.priority_class_name if first_pod else None)
    )
    priority = priorities.resolve(
        class_name, first_pod.spec.priority if first_pod and not class_name else None
    )
    queue = (
        spec.queue
        or labels.get(c.QUEUE_LABEL)
        or (first_pod.metadata.labels.get(c.QUEUE_LABEL) if first_pod else None)
        or c.DEFAULT_QUEUE
    )
    preemptibility = (
        spec.preemptibility
        or labels.get(c.PREEMPTIBILITY_LABEL)
        or (first_pod.metadata.labels.get(c.PREEMPTIBILITY_LABEL) if first_pod else None)
        or ""
    )
    return JobTraits(queue, priority, is_preemptible(preemptibility, priority))


def staleness_grace(pg: PodGroup) -> float | None:
    """The PodGroup's own staleness grace period in seconds (the model checked it is a Go duration)."""
    text = pg.spec.staleness_grace_period
    return None if text is None else parse_go_duration(text)


def job_from_pod_group(pg_state: PodGroupState, first_pod: Pod | None, priorities: Priorities) -> JobInfo:
    """A job from an explicit PodGroup; where the PodGroup is silent, its first pod speaks for it."""
    pg: PodGroup = pg_state.pod_group
    spec = pg.spec
    traits = pod_group_traits(pg, first_pod, priorities)
    job = JobInfo(
        namespace=pg.namespace,
        name=pg.metadata.name,
        queue=traits.queue,
        priority=traits.priority,
        preemptible=traits.preemptible,
        # With sub-groups KAI reads no minMember of the PodGroup itself (unset: 0 here); without, unset is 1.
        min_member=spec.min_member if spec.min_member is not None else 0 if spec.sub_groups else 1,
        min_sub_group=spec.min_sub_group,
        rank=pg_state.rank,
        topology=_constraint(spec.topology_constraint),
        staleness_grace=staleness_grace(pg),
        preemption_delay=spec_preemption_delay(spec.preemption_delay),
        created=pg_state.created,
    )
    # Leaf sub-groups are pod sets (gang units); the others only group them, under their constraints.
    parents = {g.parent for g in spec.sub_groups if g.parent}
    for group in spec.sub_groups:
        own = _constraint(group.topology_constraint)
        if group.name in parents:
            job.subgroups.setdefault(
                group.name, SubGroupSet(group.name, own, min_sub_group=group.min_sub_group)
            )
        else:
            job.podsets[group.name] = PodSet(group.name, group.min_member or 0, topology=own)
    for group in spec.sub_groups:
        parent = job.subgroups.get(group.parent) if group.parent else None
        child = job.subgroups.get(group.name) or job.podsets.get(group.name)
        if parent is None or child is None or child.parent is not None:
            continue  # top-level, under an unknown parent or a repeated name (the last two: refused)
        ancestor: SubGroupSet | None = parent
        while ancestor is not None and ancestor is not child:
            ancestor = ancestor.parent
        if ancestor is None:  # never link a cycle (admission refuses those too)
            child.parent = parent
            parent.children.append(child)
    if not job.podsets:
        job.podsets[""] = PodSet("", spec.gang_min_member)
    return job


def spec_preemption_delay(text: str | None) -> float:
    """A PodGroup's `spec.preemptionDelay` in seconds (admitted as a Go duration); negative is none."""
    return max(parse_go_duration(text), 0.0) if text else 0.0


def annotation_preemption_delay(text: str | None) -> float:
    """A `kai.scheduler/preemption-delay` annotation as KAI's pod grouper reads it (`ParsePreemptionDelay`):
    a non-negative Go duration; anything else (a unit-less number, a negative one) is no delay."""
    if text is None:
        return 0.0
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        return 0.0
    return max(seconds, 0.0)


def implicit_job(pod_state: PodState, name: str, priorities: Priorities) -> JobInfo:
    """The job of a pod without a PodGroup object, as KAI's pod grouper would make it."""
    pod = pod_state.pod
    # Each part read once: every read of a model's attribute goes through the hook pydantic's `__getattr__`
    # puts on its class (a few hundred instructions), and this is made for most pods.
    metadata, spec = pod.metadata, pod.spec
    labels = metadata.labels
    class_name = spec.priority_class_name or labels.get("priorityClassName")
    priority = priorities.resolve(class_name, spec.priority)
    annotations = metadata.annotations
    # JobInfo's leading fields in their order, the rest set after: a keyword costs a search of its ~30
    # parameters, and this is made for most jobs of a large cluster (290,000 at 20,000 nodes).
    job = JobInfo(
        namespace_of(metadata),
        name,
        labels.get(c.QUEUE_LABEL, c.DEFAULT_QUEUE),  # queue
        priority,
        is_preemptible(labels.get(c.PREEMPTIBILITY_LABEL, ""), priority),
        1,  # min_member
        pod_state.rank,
    )
    job.created = pod_state.created
    if annotations:  # (most pods have none: no preemption delay, the default, and no topology)
        # The pod grouper copies the pod's preemption delay into its PodGroup.
        job.preemption_delay = annotation_preemption_delay(annotations.get(c.PREEMPTION_DELAY_ANNOTATION))
        if c.TOPOLOGY_ANNOTATION in annotations:
            # The pod grouper copies a bare pod's topology annotations into its PodGroup.
            job.topology = _constraint(
                TopologyConstraintSpec(
                    topology=annotations.get(c.TOPOLOGY_ANNOTATION, ""),
                    required_topology_level=annotations.get(c.TOPOLOGY_REQUIRED_ANNOTATION, ""),
                    preferred_topology_level=annotations.get(c.TOPOLOGY_PREFERRED_ANNOTATION, ""),
                )
            )
    job.podsets[""] = PodSet("", 1)
    return job


def make_task(
    pod_state: PodState,
    job: JobInfo,
    derived: tuple[PodRequest, Placement, tuple[HostPort, ...]],
    node_index: Mapping[str, int],
    *,
    stuck: bool = False,
) -> TaskInfo | None:
    """The task of one of our pods in `job` (not yet added to it); None when it takes no part in
    scheduling (terminating and never bound, or bound to a node that is not in the cluster)."""
    status = task_status(pod_state, stuck=stuck)
    if status is None:
        return None
    node = node_index.get(pod_state.node_name, -1) if pod_state.node_name else -1
    if pod_state.node_name and node < 0:
        return None  # bound to a node that is not in the cluster: it holds nothing we schedule
    pod = pod_state.pod
    podset = podset_of(job, pod)
    if podset is None:
        if node < 0:
            # KAI leaves a pod naming a sub-group its PodGroup does not have out of the job, and says so.
            name = pod.metadata.labels.get(c.SUBGROUP_LABEL, _DEFAULT_POD_SET)
            job.stray[pod.key] = (
                f'Pod references subgroup "{name}", which does not exist in PodGroup {job.key}'
            )
            return None
        podset = next(iter(job.podsets.values()))  # bound: it holds its node whatever it names
    request, placement, host_ports = derived
    nominated = pod_state.nominated_node
    metadata = pod.metadata  # (read once: see `implicit_job`)
    labels = metadata.labels
    return TaskInfo(
        namespace=namespace_of(metadata),
        name=metadata.name,
        job=job,
        podset=podset,
        request=request,
        status=status,
        placement=placement,
        labels=labels,
        rank=pod_state.rank,
        task_priority=int(labels.get(c.TASK_PRIORITY_LABEL, "0")),
        node=node,
        gpu_groups=pod_state.gpu_groups,
        nominated_node=node_index.get(nominated, -1) if nominated else -1,
        nominated_groups=pod_state.nominated_gpu_groups,
        host_ports=host_ports,
    )


def podset_of(job: JobInfo, pod: Pod) -> PodSet | None:
    """The pod set the pod's `kai.scheduler/subgroup-name` names; without the label, the job's only pod
    set when the PodGroup has no sub-groups (KAI's "default", which the label may also name); None when
    there is no such pod set."""
    name = pod.metadata.labels.get(c.SUBGROUP_LABEL)
    if name is None or (name == _DEFAULT_POD_SET and "" in job.podsets):
        return job.podsets.get("")
    return job.podsets.get(name)


_DEFAULT_POD_SET = "default"


def waiting_reason(job: JobInfo, gated: int) -> str | None:
    """Why a job with fewer live pods than its minMember waits (None if it has enough)."""
    alive = len(job.tasks)
    for task in job.tasks:  # a loop, not a generator: most jobs are one pod's
        if task.status in _TERMINAL:
            alive -= 1
    if alive >= job.min_member:
        return None
    if gated:
        return (
            f"waiting for pods: {gated} wait for their schedulingGates to be removed, "
            f"{alive} of minMember {job.min_member} can be scheduled"
        )
    return f"waiting for pods: {alive} of minMember {job.min_member} exist"


_TERMINAL = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
