"""What a pod charges each accounted resource (KAI's AccountedResource design, phase 1), on each node.

An `AccountedResource` names one logical resource and the sources it is counted from; a queue limits it
in `spec.accountedResources`. A pod charges every resource one of whose sources it matches, the sum of
the matching sources, and the charge may depend on the node: a source with `match.nodeLabels` counts only
on nodes with those labels (`gpu-h200`: `nvidia.com/gpu` on H200 nodes), and GPUs count as KAI's accepted
allocation does, so a fraction or a gpu-memory request charges the part of a GPU it holds there. So the
charge is worked out per node (`Charges.on_nodes`), and the limit check runs per candidate node
(`plugins.accounted_limits`).

The design's built-in GPU accounting: a `resourceName: nvidia.com/gpu` source charges the GPUs the pod
holds (whole, fractional, gpu-memory converted with the node's GPU memory, MIG instances by size, DRA
GPUs), and the resource named `gpu-memory` charges the GPU memory the pod holds on the node (bytes: whole
and fractional GPUs by the node's `nvidia.com/gpu.memory`, a gpu-memory request by what it asks); its
`podAnnotation: gpu-memory` source is that same memory, not counted twice. A `dra` source charges the
devices of its class the pod's claims hold or may take on the node (`model.accounted_dra`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from kai_scheduler.api import constants as c
from kai_scheduler.api.accounted_resources import unit_factor
from kai_scheduler.api.objects import AccountedResource, AccountedResourceSource, is_unlimited
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.model.accounted_dra import DraCharges, DraRule, dra_rule
from kai_scheduler.model.admission import PodAsk
from kai_scheduler.model.dra import DraSnapshot, is_gpu_class
from kai_scheduler.model.jobs import ALLOCATED, TaskInfo
from kai_scheduler.model.nodes import FloatArray, NodeTable
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.model.snapshot import ClusterSnapshot, PodState

GPU_MEMORY: str = "gpu-memory"
"""The resource name the design reserves for KAI's own GPU memory accounting."""

_MIB = float(2**20)
UNLIMITED = -1.0

# A charge on every node alike (a float), or per node (an array over the node table).
Charge = float | FloatArray


@dataclass(frozen=True, slots=True)
class Source:
    """One source of a resource, as the scheduler reads it: a pod request (`resource_name`), a pod
    annotation (`annotation`, times `unit`) or the devices of the pod's DRA claims (`dra`), counted on
    the nodes with `node_labels` (all of them)."""

    resource_name: str | None
    annotation: str | None
    unit: float
    node_labels: tuple[tuple[str, str], ...]
    dra: DraRule | None = None


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    default_limit: float  # a queue's limit when it names none (-1: unlimited)
    sources: tuple[Source, ...]

    @property
    def annotations(self) -> tuple[str, ...]:
        return tuple(s.annotation for s in self.sources if s.annotation is not None)

    @property
    def counts_dra(self) -> bool:
        return any(s.dra is not None for s in self.sources)

    @property
    def counts_dra_gpus(self) -> bool:
        return any(s.dra is not None and is_gpu_class(s.dra.device_class) for s in self.sources)


def definitions_of(resources: Iterable[AccountedResource]) -> dict[str, Definition]:
    """The scheduler's reading of the AccountedResource objects, by name."""
    return {resource.metadata.name: _definition(resource) for resource in resources}


def _definition(resource: AccountedResource) -> Definition:
    defaults = resource.spec.defaults
    limit = defaults.limit if defaults is not None and defaults.limit is not None else None
    return Definition(
        name=resource.metadata.name,
        default_limit=UNLIMITED if limit is None else limit_value(limit),
        sources=tuple(_source(source) for source in resource.spec.sources),
    )


def limit_value(limit: Fraction) -> float:
    """A limit as the scheduler compares it: every negative amount is unlimited (-1)."""
    return UNLIMITED if is_unlimited(float(limit)) else float(limit)


def _source(source: AccountedResourceSource) -> Source:
    labels = tuple(sorted(source.match.node_labels.items())) if source.match is not None else ()
    annotation = source.pod_annotation
    unit = annotation.unit if annotation is not None else ""
    if source.quantity is not None and source.quantity.pod_annotation is not None:
        unit = source.quantity.pod_annotation.unit or unit
    field = source.quantity.dra.opaque_config_field if source.quantity and source.quantity.dra else None
    return Source(
        resource_name=source.resource_name,
        annotation=annotation.key if annotation is not None else None,
        unit=unit_factor(unit) or 1.0,
        node_labels=labels,
        dra=dra_rule(source, unit_factor(field.unit) or 1.0 if field is not None else 1.0),
    )


@dataclass(frozen=True, slots=True)
class AccountedInputs:
    """What a snapshot carries for accounted resources: the definitions, and the pods by key (the
    cache's own, only read) for the annotations some sources count. None on a snapshot when the cluster
    has no AccountedResource and no queue names one: then nothing is checked."""

    definitions: Mapping[str, Definition]
    pods: Mapping[str, PodState]


class Charges:
    """Per session: what pods charge each resource on each node. A charge is kept per distinct request
    and counted annotations (pods alike charge alike), and each source's nodes once; a pod with DRA
    claims, when a source counts DRA devices, is charged as itself (its claims are its own)."""

    def __init__(self, inputs: AccountedInputs, nodes: NodeTable, dra: DraSnapshot | None = None) -> None:
        self.inputs = inputs
        self._nodes = nodes
        self._where: dict[tuple[tuple[str, str], ...], FloatArray] = {}
        self._kept: dict[tuple[object, ...], dict[str, Charge]] = {}
        self._annotations = sorted({a for d in inputs.definitions.values() for a in d.annotations})
        counts_dra = any(d.counts_dra for d in inputs.definitions.values())
        self._dra = DraCharges(dra) if dra is not None and dra.pod_claims and counts_dra else None

    @property
    def counts_annotations(self) -> bool:
        return bool(self._annotations)

    def annotations_of(self, task: PodAsk) -> tuple[str | None, ...]:
        """The values of the annotations some source counts, for this pod."""
        if not self._annotations:
            return ()
        state = self.inputs.pods.get(task.key)
        found = state.pod.metadata.annotations if state is not None else {}
        return tuple(found.get(key) for key in self._annotations)

    def on_nodes(self, task: PodAsk) -> dict[str, Charge]:
        """What the pod would charge each resource it charges at all, on each node."""
        values = self.annotations_of(task)
        claims = self._dra is not None and task.key in self._dra.pods
        key = (task.request, values, task.key if claims else None)
        kept = self._kept.get(key)
        if kept is None:
            annotations = dict(zip(self._annotations, values, strict=True))
            kept = self._kept[key] = self._work_out(task, annotations)
        return kept

    def on_node(self, task: TaskInfo, node: int) -> dict[str, float]:
        """What the pod charges on one node (where it runs)."""
        return {
            name: charge if isinstance(charge, float) else float(charge[node])
            for name, charge in self.on_nodes(task).items()
        }

    def _work_out(self, task: PodAsk, annotations: Mapping[str, str | None]) -> dict[str, Charge]:
        request = task.request
        charges: dict[str, Charge] = {}
        for definition in self.inputs.definitions.values():
            total: Charge = 0.0
            for source in definition.sources:
                if source.dra is not None:
                    amount = self._dra.charge(source.dra, task.key, task.name) if self._dra else 0.0
                else:
                    amount = self._amount(definition, source, request, annotations)
                if isinstance(amount, float) and amount == 0.0:
                    continue
                if source.node_labels:
                    amount = amount * self._matching(source.node_labels)
                total = total + amount
            if definition.name == GPU_MEMORY:
                total = total + self._gpu_memory(request, without_dra=definition.counts_dra_gpus)
            if not (isinstance(total, float) and total == 0.0):
                charges[definition.name] = total
        return charges

    def _amount(
        self,
        definition: Definition,
        source: Source,
        request: PodRequest,
        annotations: Mapping[str, str | None],
    ) -> Charge:
        if source.resource_name is not None:
            return self._requested(source.resource_name, request)
        if source.annotation is not None:
            if definition.name == GPU_MEMORY and source.annotation == c.GPU_MEMORY_ANNOTATION:
                return 0.0  # KAI's own GPU memory accounting counts it (`_gpu_memory`)
            return _annotated(annotations.get(source.annotation)) * source.unit
        return 0.0

    def _requested(self, name: str, request: PodRequest) -> Charge:
        if name == c.GPU_RESOURCE:
            # The GPUs the pod holds as its queue counts them (its DRA GPUs are among its whole GPUs): a
            # gpu-memory request is a part of the node's GPUs.
            if request.shared_gpu is not None and request.shared_gpu.by_memory:
                memory = self._nodes.gpu_memory_mib
                return np.array([request.queue_gpus(float(m)) for m in memory.tolist()], dtype=np.float64)
            return request.queue_gpus(0.0)
        if name == c.CPU_RESOURCE:
            return request.cpu / 1000.0
        if name == c.MEMORY_RESOURCE:
            return request.memory
        if name == c.PODS_RESOURCE:
            return 1.0
        return float(dict(request.scalars).get(name, 0.0))

    def _gpu_memory(self, request: PodRequest, *, without_dra: bool) -> Charge:
        """The GPU memory (bytes) the pod holds on each node: what a gpu-memory request asks for (at most
        the node's GPUs' memory), else its GPUs times the node's GPU memory; `without_dra`: not its DRA
        GPUs, whose memory a `dra` source of the resource counts from the devices themselves."""
        memory = self._nodes.gpu_memory_mib * _MIB
        shared = request.shared_gpu
        if shared is not None and shared.by_memory:
            asked = shared.memory_mib * _MIB
            per_gpu = np.where(memory > 0, np.minimum(memory, asked), asked)
            return np.asarray(per_gpu * shared.devices, dtype=np.float64)
        whole = request.whole_gpus - (request.dra_gpus if without_dra else 0)
        gpus = float(whole) + (shared.fraction_gpus if shared is not None else 0.0)
        if gpus == 0.0:
            return 0.0
        return np.asarray(memory * gpus, dtype=np.float64)

    def _matching(self, labels: tuple[tuple[str, str], ...]) -> FloatArray:
        """1.0 on the nodes with all of `labels`, else 0.0."""
        where = self._where.get(labels)
        if where is None:
            specs = self._nodes.specs
            where = np.array(
                [all(spec.labels.get(k) == v for k, v in labels) for spec in specs], dtype=np.float64
            )
            self._where[labels] = where
        return where


def _annotated(value: str | None) -> float:
    """A counted annotation's number (a quantity); a pod without it, or with one that is no number,
    charges nothing by it."""
    if value is None:
        return 0.0
    try:
        return float(parse_quantity(value))
    except ValueError:
        return 0.0


def queue_usage(snapshot: ClusterSnapshot, charges: Charges) -> dict[str, dict[str, float]]:
    """What each queue (with its subtree) holds of each accounted resource: the charges of its pods that
    hold their node (allocated or running), summed up the tree, as the queue's `allocated` is."""
    queues = snapshot.queues
    usage: dict[str, dict[str, float]] = {queue.name: {} for queue in queues}
    chains: dict[str, list[str]] = {}
    for job in snapshot.jobs.values():
        if job.queue not in queues:
            continue
        chain = chains.get(job.queue)
        if chain is None:
            chain = chains[job.queue] = [q.name for q in queues.ancestry(job.queue)]
        for task in job.tasks:
            if task.status not in ALLOCATED or task.node < 0:
                continue
            for name, amount in charges.on_node(task, task.node).items():
                for queue in chain:
                    held = usage[queue]
                    held[name] = held.get(name, 0.0) + amount
    return usage


def shown(value: float) -> str:
    """An amount for people: bytes (GPU memory) in whole Gi or Mi, else the number."""
    for unit, size in (("Gi", 2**30), ("Mi", 2**20)):
        if abs(value) >= size and value % size == 0:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def queue_report(snapshot: ClusterSnapshot) -> dict[str, dict[str, tuple[float, float]]]:
    """Per queue of the tree: each AccountedResource's (usage, the queue's limit: its own entry, else the
    resource's default; -1 unlimited). Empty when the snapshot has no accounted resources."""
    inputs = snapshot.accounted
    if inputs is None:
        return {}
    usage = queue_usage(snapshot, Charges(inputs, snapshot.nodes, snapshot.dra))
    return {
        queue.name: {
            name: (
                usage[queue.name].get(name, 0.0),
                queue.accounted_limits.get(name, definition.default_limit),
            )
            for name, definition in sorted(inputs.definitions.items())
        }
        for queue in snapshot.queues
    }
