"""What KAI's podgroupcontroller and queuecontroller share here: the usage amounts their statuses show,
and the loop that keeps statuses current (`StatusLoop`; `podgroups.py` and `queues.py` are the two
controllers).

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
resync rewrites an unchanged status. Events mark the affected objects; a pass runs `debounce` seconds
after the first mark (batching bursts) and every `resync_period` seconds over everything (a PodGroup whose
inputs, itself, its pods, the nodes and the PriorityClasses, are at the versions they had when its status
was last found up to date is not computed again). Failed writes are retried with backoff. Under leader
election `run` runs during each term (`runtime.leader.lead`).

    pod_groups = PodGroupStatusController(client, informers)
    queues = QueueStatusController(client, informers, metrics=QueueMetrics(registry))
    await asyncio.gather(pod_groups.run(stop), queues.run(stop))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
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
from kai_scheduler.k8s.runtime.objects import labels_of, metadata_of, resource_version
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.model.builder import floor_gpu_memory_mib, reported_gpu_memory_range
from kai_scheduler.model.resources import Resources

log = logging.getLogger(__name__)

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


def gpu_memory_mib_of(node: Mapping[str, Any]) -> float:
    """The node's GPU memory (MiB) from the GPU Operator's label, floored to 100 MiB as KAI does; 0 when
    unknown."""
    raw = labels_of(node).get(c.GPU_MEMORY_LABEL)
    if not isinstance(raw, str) or not raw.isdigit():
        return 0.0
    return float(floor_gpu_memory_mib(int(raw)))


class NodeGpuMemory:
    """GPU memory per node, read from the nodes informer on first use in a pass."""

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


# --- the shared loop -------------------------------------------------------------------------------


@dataclass(slots=True)
class StatusStats:
    """What a status controller did, for tests and diagnostics."""

    passes: int = 0
    computed: int = 0
    writes: int = 0
    unchanged: int = 0
    failures: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Written:
    value: Any
    version_before: str


class StatusLoop:
    """Marks, debounced passes, periodic resync, retries, leadership; subclasses compute and write."""

    kind: ResourceKind
    name = "status"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        resync_period: float,
        debounce: float,
        concurrency: int,
        backoff: Backoff,
    ) -> None:
        self.client = client
        self.informers = informers
        self.resync_period = resync_period
        self.debounce = debounce
        self.backoff = backoff
        self.stats = StatusStats()
        self._semaphore = asyncio.Semaphore(max(1, concurrency))
        self._dirty: set[str] = set()
        self._everything = True
        self._wake = asyncio.Event()
        self._written: dict[str, _Written] = {}
        self._handlers_added = False

    # --- marks ---

    def mark(self, *keys: str) -> None:
        """Recompute these objects at the next pass."""
        added = False
        for key in keys:
            if key:
                self._dirty.add(key)
                added = True
        if added:
            self._wake.set()

    def mark_all(self) -> None:
        self._everything = True
        self._wake.set()

    # --- subclass parts ---

    def _informers_needed(self) -> list[Informer]:
        raise NotImplementedError

    def _add_handlers(self) -> None:
        raise NotImplementedError

    async def sync(self, keys: Iterable[str] | None = None) -> set[str]:
        """One pass over `keys` (None: everything); returns the keys whose write failed."""
        raise NotImplementedError

    # --- writing ---

    def _current(self, obj: JsonObject) -> Any:
        raise NotImplementedError

    def _patch(self, obj: JsonObject, desired: Any) -> JsonObject:
        raise NotImplementedError

    def _up_to_date(self, key: str, obj: JsonObject, desired: Any) -> bool:
        if self._current(obj) == desired:
            return True
        last = self._written.get(key)
        # Written already, and the cache still shows the object as it was before that write.
        return last is not None and last.value == desired and last.version_before == resource_version(obj)

    async def _write_all(self, writes: list[tuple[str, JsonObject, Any]]) -> set[str]:
        results = await asyncio.gather(*(self._write(key, obj, desired) for key, obj, desired in writes))
        return {key for (key, _, _), ok in zip(writes, results, strict=True) if not ok}

    async def _write(self, key: str, obj: JsonObject, desired: Any) -> bool:
        meta = metadata_of(obj)
        name = str(meta.get("name") or "")
        namespace = meta.get("namespace") if self.kind.namespaced else None
        async with self._semaphore:
            try:
                await self.client.patch(
                    self.kind, name, self._patch(obj, desired), namespace, subresource="status"
                )
            except ApiStatusError as error:
                if error.code == 404:
                    self._written.pop(key, None)
                    return True  # gone: nothing to write
                self._failed(key, error)
                return False
            except (ConnectionError, OSError, TimeoutError) as error:
                self._failed(key, error)
                return False
        self._written[key] = _Written(desired, resource_version(obj))
        self.stats.writes += 1
        return True

    def _failed(self, key: str, error: BaseException) -> None:
        self.stats.failures += 1
        self.stats.errors.append(f"{key}: {type(error).__name__}: {error}")
        del self.stats.errors[:-50]
        log.info("%s of %s not written: %s", self.name, key, error)

    def _forget_gone(self, alive: Iterable[str]) -> None:
        keep = set(alive)
        for key in [k for k in self._written if k not in keep]:
            del self._written[key]

    # --- running ---

    async def run_pass(self) -> set[str]:
        """Take the marks and run one pass; returns the keys whose write failed (marked again)."""
        self._wake.clear()
        keys, everything = self._dirty, self._everything
        self._dirty, self._everything = set(), False
        self.stats.passes += 1
        try:
            failed = await self.sync(None if everything else keys)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.exception("%s: a pass failed", self.name)
            self._failed("*", error)
            self.mark_all()
            return {"*"}
        if failed:
            self._dirty |= failed
        return failed

    async def run(self, stop: asyncio.Event, *, sync_timeout: float | None = None) -> None:
        """Keep statuses current until `stop` is set (waits for the informers to sync first)."""
        waits = [informer.wait_synced() for informer in self._informers_needed()]
        if not await wait_or_stop(asyncio.gather(*waits), stop, sync_timeout):
            if not stop.is_set():
                log.warning("%s: the informers did not sync in time", self.name)
            return
        if not self._handlers_added:
            self._handlers_added = True
            self._add_handlers()
        self.mark_all()
        next_resync = time.monotonic() + self.resync_period
        retry_at: float | None = None
        attempt = 0
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_resync:
                self.mark_all()
                next_resync = now + self.resync_period
            pending = bool(self._dirty or self._everything)
            if pending and (retry_at is None or now >= retry_at):
                if self.debounce > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.debounce)
                    if stop.is_set():
                        break
                if await self.run_pass():
                    retry_at = time.monotonic() + self.backoff.delay(attempt)
                    attempt += 1
                else:
                    retry_at, attempt = None, 0
                continue
            # Marks are kept in `_dirty`: the wake-up flag may be cleared without losing any.
            self._wake.clear()
            if pending:
                assert retry_at is not None
                await wait_or_stop(stop.wait(), stop, max(0.0, min(next_resync, retry_at) - now))
            else:
                await wait_or_stop(self._wake.wait(), stop, max(0.0, next_resync - now))


# --- PodGroups -------------------------------------------------------------------------------------


# --- Queues ----------------------------------------------------------------------------------------


__all__ = [
    "GPU_MEMORY_RESOURCE",
    "RESOURCE_KEYS",
    "StatusStats",
    "Usage",
    "format_milli",
    "gpu_memory_mib_of",
    "normalized_resource_list",
]
