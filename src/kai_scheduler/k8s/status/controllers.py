"""KAI's podgroupcontroller and queuecontroller: the usage that PodGroup and Queue statuses show.

`PodGroupStatusController` writes each PodGroup's

    status:
      resourcesStatus: {allocated, allocatedNonPreemptible, requested}
      running / succeeded / failed / pending      (its pods, counted by phase; no phase counts as pending)

from the pods that name it (`pod-group-name`). A pod that is not finished asks for its resources
(`requested`); one that is also bound to a node (`spec.nodeName`) holds them (`allocated`);
`allocatedNonPreemptible` is `allocated` when the PodGroup is non-preemptible, else zero. Preemptibility
as the scheduler decides it (`model.builder`): the PodGroup's `spec.preemptibility`, then its
`kai.scheduler/preemptibility` label, then its first pod's label; else its priority (the priority class
named by the spec, the `priorityClassName` label or the first pod; the cluster's PriorityClasses, then
KAI's four built-in classes, then the pod's `spec.priority`, then the cluster's global default or 50)
below 100 means preemptible.

`QueueStatusController` writes each Queue's

    status: {allocated, allocatedNonPreemptible, requested, childQueues}

bottom-up through the queue tree: a queue's own PodGroups (`spec.queue`) summed from their
`status.resourcesStatus` (what the PodGroup controller wrote, as in KAI, where the two are separate
binaries), plus the totals of its child queues (`spec.parentQueue`); `childQueues` lists the children by
name. With `metrics` (a `QueueMetrics`), the queue gauges are set after every pass.

Resource lists always carry `cpu`, `memory` and `nvidia.com/gpu`, as Kubernetes quantity strings in
canonical form: CPU in cores or millicores (`2`, `1500m`), memory in bytes (`1073741824`), GPUs in GPU
units with KAI's accounting of shared GPUs (`PodRequest.gpu_units`: `gpu-fraction` x devices, `gpu-memory`
as a share of the bound node's GPU memory or, for a pod not bound yet, of the smallest GPU memory among the
nodes, MIG instances by their size), e.g. `1500m` for one GPU and a half.

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
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import Pod, PodGroup, PriorityClass, Queue
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.cluster.status import Numbers, PodFacts, pod_group_numbers, queue_numbers
from kai_scheduler.k8s.runtime.backoff import RETRY_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.client import (
    NODES,
    POD_GROUPS,
    PRIORITY_CLASSES,
    QUEUES,
    ApiStatusError,
    JsonObject,
    KubeClient,
    ResourceKind,
)
from kai_scheduler.k8s.runtime.informers import (
    POD_GROUP_INDEX,
    Informer,
    InformerSet,
    pod_group_of_pod,
    queue_of_pod_group,
)
from kai_scheduler.k8s.runtime.objects import object_key, resource_version
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.k8s.status.metrics import QueueMetrics
from kai_scheduler.model.builder import floor_gpu_memory_mib, pod_group_traits, pod_request
from kai_scheduler.model.priorities import Priorities, is_preemptible
from kai_scheduler.model.resources import PodRequest, Resources

log = logging.getLogger(__name__)

RESOURCE_KEYS = (c.CPU_RESOURCE, c.MEMORY_RESOURCE, c.GPU_RESOURCE)
RESOURCE_LISTS = ("allocated", "allocatedNonPreemptible", "requested")
POD_COUNTERS = ("running", "succeeded", "failed", "pending")
PRIORITY_CLASS_LABEL = "priorityClassName"
_FINISHED = ("Succeeded", "Failed")


# --- amounts and quantities ------------------------------------------------------------------------


def format_milli(value: float) -> str:
    """A canonical decimal quantity to the milli-unit: `2`, `1500m`, `0`."""
    millis = round(value * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


@dataclass(frozen=True, slots=True)
class Usage:
    """CPU in cores, memory in bytes, GPUs in GPU units."""

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)

    def resource_list(self) -> dict[str, str]:
        return {
            c.CPU_RESOURCE: format_milli(self.cpu),
            c.MEMORY_RESOURCE: str(max(0, round(self.memory))),
            c.GPU_RESOURCE: format_milli(self.gpu),
        }

    @classmethod
    def of_resource_list(cls, resources: Any) -> Usage:
        """From a status resource list (missing or unreadable amounts count as zero)."""
        if not isinstance(resources, Mapping):
            return cls()
        values = []
        for key in RESOURCE_KEYS:
            try:
                values.append(float(parse_quantity(resources.get(key, 0))))
            except ValueError:
                values.append(0.0)
        return cls(*values)

    @classmethod
    def of(cls, resources: Resources) -> Usage:
        """From the model's units (CPU in millicores)."""
        return cls(resources.cpu / 1000, resources.memory, resources.gpu)

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


def _merge_resource_list(current: Any, desired: Mapping[str, str]) -> dict[str, str | None]:
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
    raw = ((node.get("metadata") or {}).get("labels") or {}).get(c.GPU_MEMORY_LABEL)
    if not isinstance(raw, str) or not raw.isdigit():
        return 0.0
    return float(floor_gpu_memory_mib(int(raw)))


class _NodeGpuMemory:
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
            sizes = [m for obj in self.informer.objects() if (m := gpu_memory_mib_of(obj)) > 0]
            self._smallest = min(sizes) if sizes else 0.0
        return self._smallest


def _creation_order(obj: JsonObject) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
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


class _StatusLoop:
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
        meta = obj.get("metadata") or {}
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


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or object_key(obj))


def _counters(status: Mapping[str, Any]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in POD_COUNTERS:
        value = status.get(name)
        out[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return out


class PodGroupStatusController(_StatusLoop):
    """KAI's podgroupcontroller (see the module doc). `informers` must include pods and PodGroups; nodes
    (GPU memory of `gpu-memory` pods) and PriorityClasses are used when present."""

    kind = POD_GROUPS
    name = "podgroup status"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        resync_period: float = 30.0,
        debounce: float = 0.1,
        concurrency: int = 8,
        backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        super().__init__(
            client,
            informers,
            resync_period=resync_period,
            debounce=debounce,
            concurrency=concurrency,
            backoff=backoff,
        )
        self._requests: dict[str, PodRequest | None] = {}  # pod uid -> its request (None: unreadable)
        # What a status is computed from, when it was last found up to date (see `_inputs`): a resync
        # computes again only the PodGroups whose inputs changed since, not every PodGroup every time.
        self._settled: dict[str, tuple[str, frozenset[tuple[str, str]], int]] = {}
        self._cluster_epoch = 0  # counts changes of nodes and PriorityClasses (read by every status)

    # --- computing ---

    def _request(self, pod: JsonObject) -> PodRequest | None:
        uid = _uid(pod)
        if uid in self._requests:
            return self._requests[uid]
        request: PodRequest | None
        try:
            request = pod_request(Pod.model_validate(pod))
        except (ValidationError, ValueError, TypeError, KeyError) as error:
            log.warning("pod %s: its resources cannot be read (%s); counted as none", object_key(pod), error)
            request = None
        self._requests[uid] = request
        return request

    def _priorities(self) -> Priorities:
        informer = self.informers.optional(PRIORITY_CLASSES)
        classes: list[PriorityClass] = []
        for obj in informer.objects() if informer is not None else ():
            try:
                classes.append(PriorityClass.model_validate(obj))
            except (ValidationError, ValueError, TypeError):
                continue  # the scheduler skips it too
        return Priorities.of(classes)

    def is_preemptible(
        self, group: JsonObject, pods: list[JsonObject], priorities: Priorities | None = None
    ) -> bool:
        """As the scheduler decides it (`model.builder.pod_group_traits`, with the group's first pod)."""
        priorities = priorities or self._priorities()
        try:
            model = PodGroup.model_validate(group)
        except (ValidationError, ValueError, TypeError) as error:
            log.warning("PodGroup %s cannot be read (%s): preemptible by default", object_key(group), error)
            return is_preemptible("", priorities.default)
        first: Pod | None = None
        for pod in sorted(pods, key=_creation_order):
            try:
                first = Pod.model_validate(pod)
                break
            except (ValidationError, ValueError, TypeError):
                continue
        return pod_group_traits(model, first, priorities).preemptible

    def pod_group_status(
        self,
        group: JsonObject,
        *,
        memory: _NodeGpuMemory | None = None,
        priorities: Priorities | None = None,
    ) -> dict[str, Any]:
        """The status fields this controller owns, as they should be (`cluster.status`)."""
        memory = memory or _NodeGpuMemory(self.informers.optional(NODES))
        pods = self.informers.pods.by_index(POD_GROUP_INDEX, object_key(group))
        facts = []
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            facts.append(
                PodFacts(
                    str(phase) if phase else None,
                    bool(node),
                    memory.of(str(node)) if node else 0.0,
                    None if str(phase) in _FINISHED else self._request(pod),
                )
            )
        preemptible = self.is_preemptible(group, pods, priorities)
        numbers = pod_group_numbers(facts, preemptible=preemptible, min_gpu_memory_mib=memory.of(None))
        self.stats.computed += 1
        return {
            "resourcesStatus": {
                "allocated": Usage.of(numbers.allocated).resource_list(),
                "allocatedNonPreemptible": Usage.of(numbers.allocated_non_preemptible).resource_list(),
                "requested": Usage.of(numbers.requested).resource_list(),
            },
            "running": numbers.running,
            "succeeded": numbers.succeeded,
            "failed": numbers.failed,
            "pending": numbers.pending,
        }

    def _current(self, obj: JsonObject) -> Any:
        status = obj.get("status") or {}
        resources = status.get("resourcesStatus") or {}
        return {
            "resourcesStatus": {
                name: normalized_resource_list(resources.get(name)) for name in RESOURCE_LISTS
            },
            **_counters(status),
        }

    def _patch(self, obj: JsonObject, desired: Any) -> JsonObject:
        current = ((obj.get("status") or {}).get("resourcesStatus")) or {}
        lists = {
            name: _merge_resource_list(current.get(name), desired["resourcesStatus"][name])
            for name in RESOURCE_LISTS
        }
        counters = {name: desired[name] for name in POD_COUNTERS}
        return {"status": {"resourcesStatus": lists, **counters}}

    async def sync(self, keys: Iterable[str] | None = None) -> set[str]:
        informer = self.informers.pod_groups
        everything = keys is None
        targets = list(informer.cache) if keys is None else sorted(set(keys))
        memory = _NodeGpuMemory(self.informers.optional(NODES))
        priorities = self._priorities()
        writes: list[tuple[str, JsonObject, Any]] = []
        for key in targets:
            obj = informer.cache.get(key)
            if obj is None:
                self._written.pop(key, None)
                self._settled.pop(key, None)
                continue
            inputs = self._inputs(key, obj)
            if inputs is not None and self._settled.get(key) == inputs:
                self.stats.unchanged += 1
                continue
            desired = self.pod_group_status(obj, memory=memory, priorities=priorities)
            if self._up_to_date(key, obj, desired):
                self.stats.unchanged += 1
                if inputs is not None:
                    self._settled[key] = inputs
                continue
            self._settled.pop(key, None)
            writes.append((key, obj, desired))
        if everything:
            self._forget_gone(informer.cache)
            self._settled = {k: v for k, v in self._settled.items() if k in informer.cache}
            alive = {
                str((p.get("metadata") or {}).get("uid") or object_key(p))
                for p in self.informers.pods.cache.values()
            }
            for uid in [u for u in self._requests if u not in alive]:
                del self._requests[uid]
        return await self._write_all(writes)

    def _inputs(self, key: str, group: JsonObject) -> tuple[str, frozenset[tuple[str, str]], int] | None:
        """What the status of `group` is computed from, as versions: the PodGroup (its status included: what
        it is compared with), its pods, and the nodes and PriorityClasses as counted by the handlers (None
        before they are added: nothing is then known to be unchanged)."""
        if not self._handlers_added:
            return None
        pods = self.informers.pods.by_index(POD_GROUP_INDEX, key)
        versions = frozenset((_uid(pod), resource_version(pod)) for pod in pods)
        return (resource_version(group), versions, self._cluster_epoch)

    # --- events ---

    def _informers_needed(self) -> list[Informer]:
        return [self.informers.pods, self.informers.pod_groups]

    def _add_handlers(self) -> None:
        groups_of = pod_group_of_pod

        def pod_added(pod: JsonObject) -> None:
            self.mark(*groups_of(pod))

        def pod_updated(old: JsonObject, new: JsonObject) -> None:
            self.mark(*groups_of(old), *groups_of(new))

        def pod_deleted(pod: JsonObject) -> None:
            self._requests.pop(_uid(pod), None)
            self.mark(*groups_of(pod))

        def group_changed(*objs: JsonObject) -> None:
            self.mark(object_key(objs[-1]))

        def group_deleted(group: JsonObject) -> None:
            self._written.pop(object_key(group), None)

        def cluster_changed(*_: JsonObject) -> None:
            self._cluster_epoch += 1

        self.informers.pods.add_handler(pod_added, pod_updated, pod_deleted)
        self.informers.pod_groups.add_handler(group_changed, group_changed, group_deleted)
        for kind in (NODES, PRIORITY_CLASSES):
            informer = self.informers.optional(kind)
            if informer is not None:
                informer.add_handler(cluster_changed, cluster_changed, cluster_changed)


# --- Queues ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """A queue's (or a PodGroup's) three resource lists."""

    allocated: Usage = ZERO
    allocated_non_preemptible: Usage = ZERO
    requested: Usage = ZERO

    def numbers(self) -> Numbers:
        return Numbers(
            self.allocated.resources(), self.allocated_non_preemptible.resources(), self.requested.resources()
        )

    @classmethod
    def of(cls, numbers: Numbers) -> QueueUsage:
        return cls(
            Usage.of(numbers.allocated),
            Usage.of(numbers.allocated_non_preemptible),
            Usage.of(numbers.requested),
        )

    @classmethod
    def of_pod_group(cls, group: Mapping[str, Any]) -> QueueUsage:
        resources = (group.get("status") or {}).get("resourcesStatus") or {}
        return cls(
            Usage.of_resource_list(resources.get("allocated")),
            Usage.of_resource_list(resources.get("allocatedNonPreemptible")),
            Usage.of_resource_list(resources.get("requested")),
        )


class _OwnUsage:
    """Each queue's own PodGroups' usage (`QueueUsage.of_pod_group`), kept per changed PodGroup: a pass
    reads ten sums instead of walking every PodGroup. The sums are exact fractions of the amounts, so that
    taking a PodGroup's old amounts away when it changes leaves no rounding behind."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[list[str], QueueUsage]] = {}  # PodGroup key -> (its queue, usage)
        self._sums: dict[str, list[Fraction]] = {}  # queue -> the nine amounts of its PodGroups
        self._counts: dict[str, int] = {}  # queue -> how many PodGroups name it

    def clear(self) -> None:
        self._groups.clear()
        self._sums.clear()
        self._counts.clear()

    def update(self, key: str, group: JsonObject | None) -> None:
        """The PodGroup `key` is now `group` (None: gone)."""
        old = self._groups.pop(key, None)
        if old is not None:
            self._add(*old, sign=-1)
        if group is not None:
            entry = (queue_of_pod_group(group), QueueUsage.of_pod_group(group))
            self._groups[key] = entry
            self._add(*entry, sign=1)

    def _add(self, queues: list[str], usage: QueueUsage, *, sign: int) -> None:
        amounts = [
            Fraction(amount) * sign
            for part in (usage.allocated, usage.allocated_non_preemptible, usage.requested)
            for amount in (part.cpu, part.memory, part.gpu)
        ]
        for queue in queues:
            count = self._counts.get(queue, 0) + sign
            if count == 0:
                del self._counts[queue], self._sums[queue]
                continue
            self._counts[queue] = count
            sums = self._sums.setdefault(queue, [Fraction(0)] * len(amounts))
            for index, amount in enumerate(amounts):
                if amount:
                    sums[index] += amount

    def of(self, queue: str) -> Numbers | None:
        """The queue's own PodGroups' numbers; None when no PodGroup names it."""
        sums = self._sums.get(queue)
        if sums is None:
            return None
        cpu_a, mem_a, gpu_a, cpu_n, mem_n, gpu_n, cpu_r, mem_r, gpu_r = (float(x) for x in sums)
        usage = QueueUsage(Usage(cpu_a, mem_a, gpu_a), Usage(cpu_n, mem_n, gpu_n), Usage(cpu_r, mem_r, gpu_r))
        return usage.numbers()


def _parent_of(queue: Mapping[str, Any]) -> str:
    return str((queue.get("spec") or {}).get("parentQueue") or "")


def _usage_view(group: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a PodGroup the queue totals read."""
    return (
        (group.get("spec") or {}).get("queue"),
        ((group.get("metadata") or {}).get("labels") or {}).get(c.QUEUE_LABEL),
        repr((group.get("status") or {}).get("resourcesStatus")),
    )


class QueueStatusController(_StatusLoop):
    """KAI's queuecontroller (see the module doc). `informers` must include queues and PodGroups."""

    kind = QUEUES
    name = "queue status"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        metrics: QueueMetrics | None = None,
        resync_period: float = 30.0,
        # A pass sums every PodGroup of every queue: while pods stream in, one pass (and at most one
        # write per queue) a second rather than five (issue #8: 0.8 queue writes per pod at 0.2 s).
        debounce: float = 1.0,
        concurrency: int = 8,
        backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        super().__init__(
            client,
            informers,
            resync_period=resync_period,
            debounce=debounce,
            concurrency=concurrency,
            backoff=backoff,
        )
        self.metrics = metrics
        self._own = _OwnUsage()
        # PodGroups changed since the sums were last brought up to date; all of them until the first time.
        self._changed_groups: set[str] = set()
        self._own_complete = False
        self._models: dict[str, tuple[str, Queue | None]] = {}  # for the metrics

    # --- computing ---

    def _catch_up(self) -> None:
        """Bring the per-queue sums up to date with the PodGroups that changed (the first time: all)."""
        cache = self.informers.pod_groups.cache
        if not self._own_complete:
            self._own.clear()
            for key, group in cache.items():
                self._own.update(key, group)
            self._own_complete = True
        else:
            for key in self._changed_groups:
                self._own.update(key, cache.get(key))
        self._changed_groups.clear()

    def _group_changed(self, key: str) -> None:
        self._changed_groups.add(key)
        self.mark(key)  # wakes the loop; `sync` reads the changed PodGroups, not the marks

    def totals(self) -> dict[str, tuple[QueueUsage, list[str]]]:
        """Every queue's usage (its PodGroups and all its descendants: `cluster.status.queue_numbers`) and
        its children, by name. Before the handlers are added (`run`), the sums are those of the first call."""
        self._catch_up()
        queues = {str((q.get("metadata") or {}).get("name")): q for q in self.informers.queues.objects()}
        parents: dict[str, str | None] = {}
        children: dict[str, list[str]] = {name: [] for name in queues}
        for name, queue in queues.items():
            parent = _parent_of(queue)
            parents[name] = parent if parent in queues and parent != name else None
            if parents[name] is not None:
                children[parent].append(name)
        own = [(name, numbers) for name in queues if (numbers := self._own.of(name)) is not None]
        totals = queue_numbers(parents, own)
        return {name: (QueueUsage.of(totals[name]), sorted(children[name])) for name in queues}

    @staticmethod
    def queue_status(usage: QueueUsage, child_queues: list[str]) -> dict[str, Any]:
        return {
            "allocated": usage.allocated.resource_list(),
            "allocatedNonPreemptible": usage.allocated_non_preemptible.resource_list(),
            "requested": usage.requested.resource_list(),
            "childQueues": list(child_queues),
        }

    def _current(self, obj: JsonObject) -> Any:
        status = obj.get("status") or {}
        current: dict[str, Any] = {
            name: normalized_resource_list(status.get(name)) for name in RESOURCE_LISTS
        }
        children = status.get("childQueues")
        current["childQueues"] = [str(x) for x in children] if isinstance(children, list) else []
        return current

    def _patch(self, obj: JsonObject, desired: Any) -> JsonObject:
        status = obj.get("status") or {}
        patch: dict[str, Any] = {
            name: _merge_resource_list(status.get(name), desired[name]) for name in RESOURCE_LISTS
        }
        patch["childQueues"] = desired["childQueues"]
        return {"status": patch}

    def _model(self, obj: JsonObject) -> Queue | None:
        key, version = object_key(obj), resource_version(obj)
        cached = self._models.get(key)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        try:
            model: Queue | None = Queue.model_validate(obj)
        except (ValidationError, ValueError, TypeError) as error:
            log.warning("queue %s cannot be read for metrics: %s", key, error)
            model = None
        self._models[key] = (version, model)
        return model

    async def sync(self, keys: Iterable[str] | None = None) -> set[str]:
        """Queue totals depend on the whole tree: every pass recomputes every queue (writing the changed) from
        the per-queue sums, brought up to date with the PodGroups that changed."""
        del keys
        informer = self.informers.queues
        totals = self.totals()
        writes: list[tuple[str, JsonObject, Any]] = []
        for name, (usage, children) in totals.items():
            obj = informer.get(name)
            if obj is None:
                continue
            desired = self.queue_status(usage, children)
            self.stats.computed += 1
            if self._up_to_date(name, obj, desired):
                self.stats.unchanged += 1
                continue
            writes.append((name, obj, desired))
        self._forget_gone(totals)
        failed = await self._write_all(writes)
        if self.metrics is not None:
            self._observe(totals)
        return failed

    def _observe(self, totals: Mapping[str, tuple[QueueUsage, list[str]]]) -> None:
        assert self.metrics is not None
        models = []
        for name in totals:
            obj = self.informers.queues.get(name)
            model = self._model(obj) if obj is not None else None
            if model is not None:
                models.append(model)
        for key in [k for k in self._models if k not in totals]:
            del self._models[key]
        self.metrics.observe_queues(
            models, {name: usage.allocated.per_metric() for name, (usage, _) in totals.items()}
        )

    # --- events ---

    def _informers_needed(self) -> list[Informer]:
        return [self.informers.queues, self.informers.pod_groups]

    def _add_handlers(self) -> None:
        def queue_changed(*_: JsonObject) -> None:
            self.mark_all()

        def group_changed(group: JsonObject) -> None:
            self._group_changed(object_key(group))

        def group_updated(old: JsonObject, new: JsonObject) -> None:
            if _usage_view(old) != _usage_view(new):
                self._group_changed(object_key(new))

        self.informers.queues.add_handler(queue_changed, queue_changed, queue_changed)
        self.informers.pod_groups.add_handler(group_changed, group_updated, group_changed)


__all__ = [
    "RESOURCE_KEYS",
    "PodGroupStatusController",
    "QueueStatusController",
    "QueueUsage",
    "StatusStats",
    "Usage",
    "format_milli",
    "gpu_memory_mib_of",
    "normalized_resource_list",
]
