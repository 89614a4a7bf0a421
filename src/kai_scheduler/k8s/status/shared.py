"""What KAI's podgroupcontroller and queuecontroller share here: the usage amounts their statuses show,
and the reconciler that keeps statuses current (`StatusReconciler`, a `runtime.reconciler.Reconciler`;
`podgroups.py` and `queues.py` are the two controllers).

Resource lists always carry `cpu`, `memory` and `nvidia.com/gpu`, as Kubernetes quantity strings in
canonical form: CPU in cores or millicores (`2`, `1500m`), memory in bytes (`1073741824`), GPUs in GPU
units as the scheduler counts them (`PodRequest.queue_gpus`: `gpu-fraction` x devices, `gpu-memory` by
`SharedGpuRequest.queue_gpus`: a share of the bound node's GPUs or, for a pod not bound yet, devices x
memory / the smallest GPU memory the nodes report, nothing when none does; MIG instances by their size),
e.g. `1500m` for one GPU and a half. A `requested` list with `gpu-memory` pods also carries, as KAI's
podgroupcontroller writes it, `run.ai/gpu.memory`: the MiB they ask for (devices x memory).

Writes are merge patches on the `status` subresource, and only of values that changed: each object's
computed status is compared with the cached one (quantities compared by value) and with what this
controller wrote last while the cache has not caught up yet, so that neither a burst of events nor a
resync rewrites an unchanged status. Events mark the affected keys (a PodGroup; the queue controller's
one key, the whole tree); a key is reconciled `debounce` seconds after its first mark (a burst, once:
the work queue holds a key once) and every `resync_period` seconds (a PodGroup whose inputs, itself, its
pods, the nodes and the PriorityClasses, are at the versions they had when its status was last found up
to date is not computed again). Failed writes are retried with the reconciler's backoff. Under leader
election `run` runs during each term (`runtime.leader.lead`).

    pod_groups = PodGroupStatusController(client, informers)
    queues = QueueStatusController(client, informers, metrics=QueueMetrics(registry))
    await asyncio.gather(pod_groups.run(stop), queues.run(stop))
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai_scheduler.api import constants as c
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.backoff import Backoff
from kai_scheduler.k8s.runtime.client import (
    ApiStatusError,
    JsonObject,
    KubeClient,
    ResourceKind,
)
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.objects import gpu_memory_mib_of, metadata_of, resource_version
from kai_scheduler.k8s.runtime.reconciler import Reconciler, ReconcileStats, TemporaryError
from kai_scheduler.model.builder import reported_gpu_memory_range
from kai_scheduler.model.resources import Resources

RESOURCE_KEYS = (c.CPU_RESOURCE, c.MEMORY_RESOURCE, c.GPU_RESOURCE)
# What KAI's podgroupcontroller names the GPU memory `gpu-memory` pods ask for (MiB) in `requested`.
GPU_MEMORY_RESOURCE = "run.ai/gpu.memory"
RESOURCE_LISTS = ("allocated", "allocatedNonPreemptible", "requested")
POD_COUNTERS = ("running", "succeeded", "failed", "pending")
PRIORITY_CLASS_LABEL = "priorityClassName"
FINISHED = ("Succeeded", "Failed")


# --- amounts and quantities ------------------------------------------------------------------------


def format_milli(value: float) -> str:
    """A canonical decimal quantity to the milli-unit: `2`, `1500m`, `0`."""
    millis = round(value * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


@dataclass(frozen=True, slots=True)
class Usage:
    """CPU in cores, memory in bytes, GPUs in GPU units; `gpu_memory`: the MiB `gpu-memory` pods ask for
    (only a `requested` list has any, listed only then, as KAI lists it)."""

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0
    gpu_memory: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.cpu + other.cpu,
            self.memory + other.memory,
            self.gpu + other.gpu,
            self.gpu_memory + other.gpu_memory,
        )

    def resource_list(self) -> dict[str, str]:
        listed = {
            c.CPU_RESOURCE: format_milli(self.cpu),
            c.MEMORY_RESOURCE: str(max(0, round(self.memory))),
            c.GPU_RESOURCE: format_milli(self.gpu),
        }
        if round(self.gpu_memory) > 0:
            listed[GPU_MEMORY_RESOURCE] = str(round(self.gpu_memory))
        return listed

    @classmethod
    def of_resource_list(cls, resources: Any) -> Usage:
        """From a status resource list (missing or unreadable amounts count as zero)."""
        if not isinstance(resources, Mapping):
            return cls()
        values = []
        for key in (*RESOURCE_KEYS, GPU_MEMORY_RESOURCE):
            try:
                values.append(float(parse_quantity(resources.get(key, 0))))
            except ValueError:
                values.append(0.0)
        return cls(*values)

    @classmethod
    def of(cls, resources: Resources, gpu_memory_mib: float = 0.0) -> Usage:
        """From the model's units (CPU in millicores)."""
        return cls(resources.cpu / 1000, resources.memory, resources.gpu, gpu_memory_mib)

    def resources(self) -> Resources:
        return Resources(gpu=self.gpu, cpu=self.cpu * 1000, memory=self.memory)

    def per_metric(self) -> dict[str, float]:
        """For `QueueMetrics.observe_queues`: cores, bytes and GPUs."""
        return {c.CPU_RESOURCE: self.cpu, c.MEMORY_RESOURCE: self.memory, c.GPU_RESOURCE: self.gpu}


ZERO = Usage()


def normalized_resource_list(resources: Any) -> dict[str, str] | None:
    """A cached resource list in the form this module writes, to compare by value; None when absent."""
    if not isinstance(resources, Mapping):
        return None
    out: dict[str, str] = {}
    for key, value in resources.items():
        if key in RESOURCE_KEYS:
            try:
                amount = float(parse_quantity(value))
            except ValueError:
                out[str(key)] = f"invalid:{value!r}"
                continue
            out[str(key)] = str(max(0, round(amount))) if key == c.MEMORY_RESOURCE else format_milli(amount)
        else:
            out[str(key)] = str(value)
    return out


def merge_resource_list(current: Any, desired: Mapping[str, str]) -> dict[str, str | None]:
    """A merge patch that makes `current` equal `desired` (other keys are removed)."""
    patch: dict[str, str | None] = dict(desired)
    if isinstance(current, Mapping):
        for key in current:
            if key not in desired:
                patch[str(key)] = None
    return patch


class NodeGpuMemory:
    """GPU memory per node, read from the nodes informer; the smallest a node reports is found on first use
    and kept (one object serves while no node changes)."""

    def __init__(self, informer: Informer | None) -> None:
        self.informer = informer
        self._smallest: float | None = None

    def of(self, node: str | None) -> float:
        if self.informer is None:
            return 0.0
        if node:
            obj = self.informer.get(node)
            return gpu_memory_mib_of(obj) if obj is not None else 0.0
        if self._smallest is None:
            sizes = np.array([gpu_memory_mib_of(obj) for obj in self.informer.objects()], dtype=np.float64)
            self._smallest = reported_gpu_memory_range(sizes)[0]
        return self._smallest


def creation_order(obj: JsonObject) -> tuple[str, str]:
    meta = metadata_of(obj)
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


# --- the reconciler both build on ------------------------------------------------------------------


@dataclass(slots=True)
class StatusStats:
    """What a status controller did, for tests and diagnostics: `computed` statuses, `writes`, and
    statuses found `unchanged`; `passes` (reconciles run: of one PodGroup, or of every queue at once),
    `failures` (reconciles to be retried: a write the API server refused or did not answer) and `errors`
    come from the reconciler's stats (`loop`)."""

    loop: ReconcileStats = field(repr=False)
    computed: int = 0
    writes: int = 0
    unchanged: int = 0

    @property
    def passes(self) -> int:
        return self.loop.reconciled + self.loop.retried + self.loop.failed

    @property
    def failures(self) -> int:
        return self.loop.retried + self.loop.failed

    @property
    def errors(self) -> list[str]:
        return self.loop.errors


@dataclass(frozen=True, slots=True)
class _Written:
    value: Any
    version_before: str


class StatusReconciler(Reconciler):
    """A `runtime.reconciler.Reconciler` for a status: marks coalesced per key (`debounce`), the informers
    waited for and their handlers added at `start`, and writes of changed statuses only (a failed one is
    a `TemporaryError`, retried with `backoff`); subclasses compute. `concurrency` bounds the writes in
    flight; `min_interval`: a key is reconciled at most once in that many seconds."""

    kind: ResourceKind

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        workers: int,
        resync_period: float,
        debounce: float,
        concurrency: int,
        backoff: Backoff,
        min_interval: float = 0.0,
    ) -> None:
        super().__init__(
            workers=workers, resync_period=resync_period, backoff=backoff, min_interval=min_interval
        )
        self.client = client
        self.informers = informers
        self.debounce = debounce
        self.stats = StatusStats(self.reconcile_stats)
        self._semaphore = asyncio.Semaphore(max(1, concurrency))
        self._written: dict[str, _Written] = {}
        self._handlers_added = False

    def mark(self, *keys: str) -> None:
        """Reconcile these keys `debounce` seconds after the first mark: a burst of events, once."""
        for key in keys:
            if key:
                self.queue.add_after(key, self.debounce)

    # --- subclass parts ---

    def _informers_needed(self) -> list[Informer]:
        raise NotImplementedError

    def _add_handlers(self) -> None:
        raise NotImplementedError

    def _current(self, obj: JsonObject) -> Any:
        raise NotImplementedError

    def _patch(self, obj: JsonObject, desired: Any) -> JsonObject:
        raise NotImplementedError

    async def start(self, stop: asyncio.Event) -> bool:
        """Waits for the informers to sync, then follows their changes."""
        if not await self.informers_synced(self._informers_needed(), stop):
            return False
        if not self._handlers_added:
            self._handlers_added = True
            self._add_handlers()
        return True

    # --- writing ---

    def _up_to_date(self, key: str, obj: JsonObject, desired: Any) -> bool:
        if self._current(obj) == desired:
            return True
        last = self._written.get(key)
        # Written already, and the cache still shows the object as it was before that write.
        return last is not None and last.value == desired and last.version_before == resource_version(obj)

    async def _write(self, key: str, obj: JsonObject, desired: Any) -> str:
        """Patch the status to `desired` (an object gone meanwhile has nothing to write); `TemporaryError`
        when the API server refused it or did not answer. Returns the resourceVersion the write gave the
        object ("" when not known)."""
        meta = metadata_of(obj)
        name = str(meta.get("name") or "")
        namespace = meta.get("namespace") if self.kind.namespaced else None
        async with self._semaphore:
            try:
                written = await self.client.patch(
                    self.kind, name, self._patch(obj, desired), namespace, subresource="status"
                )
            except ApiStatusError as error:
                if error.code == 404:
                    self._written.pop(key, None)
                    return ""
                raise TemporaryError(f"{key} not written: {error}") from error
            except (ConnectionError, OSError, TimeoutError) as error:
                raise TemporaryError(f"{key} not written: {type(error).__name__}: {error}") from error
        self._written[key] = _Written(desired, resource_version(obj))
        self.stats.writes += 1
        return resource_version(written) if isinstance(written, Mapping) else ""


__all__ = [
    "GPU_MEMORY_RESOURCE",
    "RESOURCE_KEYS",
    "StatusReconciler",
    "StatusStats",
    "Usage",
    "format_milli",
    "normalized_resource_list",
]
