"""The node scale adjuster as a controller (KAI's `nodescaleadjuster`): keeps the scaling pods that
`plan.plan_scaling_pods` asks for, creating, replacing and deleting them (docs/scale-adjuster.md).

It is a `runtime.reconciler.Reconciler` of one key, the cluster's scaling pods, planned as a whole: every
`period`, and sooner when a relevant pod changes, but never sooner than `min_interval` after the last plan
began (a burst of pod events gives one plan); a plan that cannot reach the API server is tried again after
`period`.

    adjuster = ScaleAdjuster(client, informers)   # informers: pods, nodes (+ podgroups, bindrequests)
    await adjuster.run(stop)                      # until `stop` (an asyncio.Event) is set
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.gpu_request import asks_for_shared_gpu
from kai_scheduler.k8s.runtime.access import Access, access, watching
from kai_scheduler.k8s.runtime.backoff import Backoff
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    NODES,
    POD_GROUPS,
    PODS,
    PRIORITY_CLASSES,
    ApiStatusError,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import POD_INDEX, InformerSet
from kai_scheduler.k8s.runtime.kai_objects import bind_request_is_for
from kai_scheduler.k8s.runtime.objects import annotations_of, labels_of, metadata_of, object_key
from kai_scheduler.k8s.runtime.reconciler import Reconciler, Result, TemporaryError
from kai_scheduler.k8s.scaleadjuster.plan import (
    DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO,
    DEFAULT_GRACE,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    DEFAULT_PRIORITY_CLASS,
    SCALING_PRIORITY_VALUE,
    SHAPE_LABEL,
    ScalingPlan,
    fraction_ratio,
    is_pending,
    is_scaling_pod,
    plan_scaling_pods,
)
from kai_scheduler.k8s.scaleadjuster.shapes import GpuFacts, pod_shape, shape_gpu_facts

log = logging.getLogger(__name__)

_UNRESOLVED: Final = object()
_WRITE_MEMORY = 30.0  # seconds (real time) a write is remembered while the informer does not show it
_PLAN: Final = "scaling-pods"  # the one key: the plan covers every scaling pod at once


DEFAULT_PERIOD: Final = 5.0


DEFAULT_COOLDOWN: Final = 30.0


SCALE_ADJUSTER_KINDS: Final = (PODS, NODES, POD_GROUPS, BIND_REQUESTS)
"""The informers the adjuster reads (PodGroups and BindRequests are optional)."""


def scale_adjuster_access(
    namespace: str = DEFAULT_NAMESPACE, priority_class: str | None = DEFAULT_PRIORITY_CLASS
) -> tuple[Access, ...]:
    """What the adjuster calls: its informers; scaling pods created and deleted in `namespace` (which it
    does not create: the chart does); its PriorityClass created, or read when it exists."""
    calls = (*watching(SCALE_ADJUSTER_KINDS), access(PODS, "create", "delete", namespace=namespace))
    if not priority_class:
        return calls
    return (
        *calls,
        access(PRIORITY_CLASSES, "create"),
        access(PRIORITY_CLASSES, "get", names=[priority_class]),
    )


@dataclass(slots=True)
class AdjusterStats:
    """What the adjuster did, for tests and diagnostics; `errors`: the latest failures, of single pods and
    of whole plans."""

    cycles: int = 0
    created: int = 0
    deleted: int = 0
    released: int = 0
    errors: list[str] = field(default_factory=list)


class ScaleAdjuster(Reconciler):
    """See the module doc. `informers` must include pods; nodes, PodGroups and BindRequests are used when
    present; the caller starts them.

    `namespace`: where scaling pods live; `ratio`: `gpu-memory-to-fraction-ratio`; `period`: seconds
    between plans (pod events bring the next one forward, but never closer than `min_interval` to the
    last); `grace`: seconds a fractional pod must have been pending to count (when no condition says it
    is unschedulable); `cooldown`: seconds a shape whose scaling pod got bound gets no new one;
    `max_gpus_per_pod`: see `plan_scaling_pods`; `priority_class`: the scaling pods' class (created when
    missing; None: no class)."""

    name = "scale-adjuster"
    controller = "pod"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        ratio: float = DEFAULT_GPU_MEMORY_TO_FRACTION_RATIO,
        period: float = DEFAULT_PERIOD,
        grace: float = DEFAULT_GRACE,
        cooldown: float = DEFAULT_COOLDOWN,
        min_interval: float = 0.5,
        scheduler_name: str = c.SCHEDULER_NAME,
        image: str = DEFAULT_IMAGE,
        priority_class: str | None = DEFAULT_PRIORITY_CLASS,
        max_gpus_per_pod: int | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        fraction_ratio(ratio)  # fail early on a bad flag
        # A plan that failed is tried again with the next one, `period` later.
        steady = Backoff(initial=period, maximum=period, factor=1.0, jitter=0.0)
        super().__init__(resync_period=None, backoff=steady, min_interval=min_interval)
        self.client = client
        self.informers = informers
        self.namespace = namespace
        self.ratio = ratio
        self.period = period
        self.grace = grace
        self.cooldown = cooldown
        self.scheduler_name = scheduler_name
        self.image = image
        self.priority_class = priority_class
        self.max_gpus_per_pod = max_gpus_per_pod
        self.wall = wall
        self.monotonic = monotonic
        self.stats = AdjusterStats(errors=self.reconcile_stats.errors)  # one list of what failed
        self.holds: dict[str, float] = {}  # shape key -> monotonic time the hold ends
        self._resolved_class: object = _UNRESOLVED
        self._created: dict[str, tuple[str, float]] = {}  # name -> (uid, time.monotonic()) not yet seen
        self._deleted: dict[str, tuple[str, float]] = {}  # name -> (uid, time.monotonic()) still seen
        self._handlers_added = False

    # --- planning ----------------------------------------------------------------------------------

    @property
    def pods(self) -> Informer:
        return self.informers.pods

    def _relevant(self, pod: Mapping[str, Any]) -> bool:
        if is_scaling_pod(pod, self.namespace):
            return True
        spec = pod.get("spec") or {}
        return str(spec.get("schedulerName") or "") == self.scheduler_name and asks_for_shared_gpu(
            annotations_of(pod)
        )

    def _being_bound(self, candidates: Iterable[JsonObject]) -> set[str]:
        requests = self.informers.optional(BIND_REQUESTS)
        if requests is None:
            return set()
        bound: set[str] = set()
        for pod in candidates:
            key = object_key(pod)
            if any(bind_request_is_for(r, pod) for r in requests.by_index(POD_INDEX, key)):
                bound.add(key)
        return bound

    def _shape_facts(self, candidates: Iterable[JsonObject]) -> dict[str, GpuFacts]:
        nodes = self.informers.optional(NODES)
        if nodes is None:
            return {}
        node_objects = nodes.objects()
        shapes = {shape.key: shape for shape in map(pod_shape, candidates)}
        facts: dict[str, GpuFacts] = {}
        for key, shape in shapes.items():
            found = shape_gpu_facts(shape, node_objects)
            if found is not None:
                facts[key] = found
        return facts

    def _held(self) -> set[str]:
        now = self.monotonic()
        for key in [k for k, until in self.holds.items() if until <= now]:
            del self.holds[key]
        return set(self.holds)

    def _class_for_plan(self) -> str | None:
        resolved = self._resolved_class
        if resolved is _UNRESOLVED:
            return self.priority_class
        return resolved if isinstance(resolved, str) else None

    def plan(self) -> ScalingPlan:
        """The plan for the informers' current view (pure, apart from reading the caches)."""
        candidates: list[JsonObject] = []
        existing: list[JsonObject] = []
        for pod in self.pods.objects():
            if is_scaling_pod(pod, self.namespace):
                existing.append(pod)
            elif self._relevant(pod) and is_pending(pod):
                candidates.append(pod)
        groups = self.informers.optional(POD_GROUPS)
        return plan_scaling_pods(
            candidates,
            existing,
            namespace=self.namespace,
            gpu_memory_to_fraction_ratio=self.ratio,
            scheduler_name=self.scheduler_name,
            now=self.wall(),
            grace=self.grace,
            pod_groups=groups.cache if groups is not None else None,
            being_bound=self._being_bound(candidates),
            shape_facts=self._shape_facts(candidates),
            max_gpus_per_pod=self.max_gpus_per_pod,
            held_shapes=self._held(),
            image=self.image,
            priority_class=self._class_for_plan(),
        )

    # --- acting ------------------------------------------------------------------------------------

    async def reconcile_once(self) -> ScalingPlan:
        """Plan, then delete and create scaling pods; returns the plan as carried out. API failures of
        single pods are logged and counted (the next cycle tries again); a failure to reach the API at
        all is raised.

        Writes of earlier cycles that the pods informer does not show yet (a pod created here and not yet
        seen, one deleted here and still shown) are not acted on again: that would undo them."""
        self.stats.cycles += 1
        self._forget_seen_writes()
        plan = self.plan()
        if plan.create and not self._prepared:
            await self._prepare()
            plan = self.plan()  # with the priority class as resolved
        plan.delete = [name for name in plan.delete if name not in self._created and not self._stale(name)]
        plan.create = [m for m in plan.create if m["metadata"]["name"] not in self._created]
        released = sorted({shape for name in plan.delete if (shape := self._released_shape(name))})
        plan.released_shapes = released
        now = self.monotonic()
        for key in released:
            self.holds[key] = now + self.cooldown
        if released:
            self.stats.released += len(released)
            log.info("scaling pods got nodes (shapes %s); deleting them", ", ".join(released))
        await asyncio.gather(*(self._delete(name) for name in plan.delete))
        await asyncio.gather(*(self._create(manifest) for manifest in plan.create))
        return plan

    def _cached(self, name: str) -> JsonObject | None:
        return self.pods.get(name, self.namespace)

    def _released_shape(self, name: str) -> str | None:
        """The shape of a scaling pod that got a node (or finished)."""
        pod = self._cached(name)
        if pod is None:
            return None
        phase = str((pod.get("status") or {}).get("phase") or "Pending")
        if not (pod.get("spec") or {}).get("nodeName") and phase not in ("Succeeded", "Failed"):
            return None
        shape = labels_of(pod).get(SHAPE_LABEL)
        return str(shape) if shape else None

    def _uid(self, name: str) -> str | None:
        pod = self._cached(name)
        return str(metadata_of(pod).get("uid") or "") if pod is not None else None

    def _stale(self, name: str) -> bool:
        """Deleted here, and the cache still shows that very pod."""
        deleted = self._deleted.get(name)
        return deleted is not None and deleted[0] == self._uid(name)

    def _forget_seen_writes(self) -> None:
        expired = time.monotonic() - _WRITE_MEMORY
        for name, (uid, at) in list(self._created.items()):
            if self._uid(name) == uid or at < expired:
                del self._created[name]
        for name, (uid, at) in list(self._deleted.items()):
            if self._uid(name) != uid or at < expired:
                del self._deleted[name]

    @property
    def _prepared(self) -> bool:
        return self._resolved_class is not _UNRESOLVED

    async def _prepare(self) -> None:
        """The priority class, before the first scaling pod."""
        if self._resolved_class is _UNRESOLVED:
            self._resolved_class = await self._ensure_priority_class()

    async def _ensure_priority_class(self) -> str | None:
        name = self.priority_class
        if not name:
            return None
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": SCALING_PRIORITY_VALUE,
            "preemptionPolicy": "Never",
            "globalDefault": False,
            "description": "KAI scale adjuster scaling pods: never preempt, always preemptible.",
        }
        try:
            await self.client.create(PRIORITY_CLASSES, body)
            log.info("created PriorityClass %s", name)
            return name
        except ApiStatusError as error:
            if error.code == 409:
                return name
            create_error = error
        try:
            await self.client.get(PRIORITY_CLASSES, name)
            return name
        except ApiStatusError as error:
            self._note(f"PriorityClass {name} cannot be created ({create_error}) nor read ({error})")
            log.warning("scaling pods go without a priority class: %s is not available", name)
            return None

    async def _delete(self, name: str) -> None:
        uid = self._uid(name)
        try:
            await self.client.delete(PODS, name, self.namespace)
        except ApiStatusError as error:
            if error.code != 404:
                self._note(f"delete {self.namespace}/{name}: {error}")
            return
        self.stats.deleted += 1
        if uid:
            self._deleted[name] = (uid, time.monotonic())
        log.info("deleted scaling pod %s/%s", self.namespace, name)

    async def _create(self, manifest: JsonObject) -> None:
        name = manifest["metadata"]["name"]
        try:
            created = await self.client.create(PODS, manifest)
        except ApiStatusError as error:
            if error.code == 409:
                return
            if error.code == 404:  # the namespace: the chart makes it
                self._note(
                    f"create {self.namespace}/{name}: {error} (the namespace {self.namespace} must exist)"
                )
                return
            if error.code == 403 and "PriorityClass" in error.message:
                self._resolved_class = _UNRESOLVED  # the class is gone: look again next time
            self._note(f"create {self.namespace}/{name}: {error}")
            return
        self.stats.created += 1
        uid = str(metadata_of(created).get("uid") or "")
        if uid:
            self._created[name] = (uid, time.monotonic())
        gpus = manifest["spec"]["containers"][0]["resources"]["requests"][c.GPU_RESOURCE]
        log.info("created scaling pod %s/%s for %s GPUs", self.namespace, name, gpus)

    def _note(self, message: str) -> None:
        log.warning("%s: %s", self.name, message)
        self.reconcile_stats.note(message)

    # --- running -----------------------------------------------------------------------------------

    def _on_pod(self, pod: JsonObject) -> None:
        if self._relevant(pod):
            self.enqueue(_PLAN)

    def _on_pod_update(self, old: JsonObject, new: JsonObject) -> None:
        if self._relevant(old) or self._relevant(new):
            self.enqueue(_PLAN)

    def keys(self) -> Iterable[str]:
        return (_PLAN,)

    async def start(self, stop: asyncio.Event) -> bool:
        """The informers synced (up to `run`'s `sync_timeout`), then the pod handlers."""
        if not await self.informers_synced(self.informers, stop):
            return False
        if not self._handlers_added:
            self._handlers_added = True
            self.pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)
        return True

    async def reconcile(self, key: str) -> Result:
        del key  # the one plan
        try:
            await self.reconcile_once()
        except (ApiStatusError, ConnectionError, OSError, TimeoutError) as error:
            raise TemporaryError(f"cycle failed: {type(error).__name__}: {error}") from error
        return Result(requeue_after=self.period)


__all__ = [
    "DEFAULT_COOLDOWN",
    "DEFAULT_PERIOD",
    "SCALE_ADJUSTER_KINDS",
    "AdjusterStats",
    "ScaleAdjuster",
    "scale_adjuster_access",
]
