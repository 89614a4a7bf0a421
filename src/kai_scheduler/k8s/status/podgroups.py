"""The PodGroup status controller (KAI's `podgroupcontroller`): each PodGroup's `status` counters and
resources (running, pending, allocated, requested, preemptible or not), from its pods.

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

No event: KAI v0.17's podgroupcontroller records none, and that a PodGroup's pods all run is in the
counters this status write carries anyway (`running`, `pending`).

A new PodGroup's first status waits up to `settle` seconds (`SETTLE`) from when this controller first
sees it while any of its pods is still pending, as a controller-runtime reconcile that returns a
requeue-after would: a bare pod is usually placed and running by then, and one write of where it ended
says what two (pending, then running) would have. Past `settle` it waits on, up to `MAX_SETTLE` from first
sight, while its pods hold nothing yet (none is bound: a bound pod's resources are in the queue's sums) and
none is known to wait. A pod waits when the scheduler said it cannot place it (its `PodScheduled`
condition is False: unschedulable, gated, refused) and no standing BindRequest places it: a state of its
own, whose status is written when `settle` is over. A pod the scheduler has not answered yet (its queue
of pending pods, under load) or has placed (the binder's queue) is on its way to running, and a pending
status written meanwhile would be rewritten moments later.
BindRequests are seen where this process watches them (with the scheduler or the binder, as `run --all`
runs them); the status controllers on their own do not (their role reads no BindRequests, as KAI's
podgroupcontroller's does not): there a pod found unplaceable once and placed since counts as waiting.
Nothing reads the pending status meanwhile but people and the queue controller's `requested` sums, which
lag by as much. KAI has no such delay (its podgroupcontroller writes on every change) and so no flag for
it; `settle=0` writes at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from kai_scheduler.api.objects import Pod, PodGroup, PriorityClass
from kai_scheduler.controlplane.status import PodFacts, pod_group_numbers
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.backoff import RETRY_BACKOFF, Backoff
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    NODES,
    POD_GROUPS,
    PRIORITY_CLASSES,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import POD_GROUP_INDEX, POD_INDEX, InformerSet, pod_group_of_pod
from kai_scheduler.k8s.runtime.kai_objects import bind_request_stands
from kai_scheduler.k8s.runtime.objects import metadata_of, object_key, resource_version
from kai_scheduler.k8s.runtime.reconciler import Result
from kai_scheduler.k8s.status.shared import (
    FINISHED,
    POD_COUNTERS,
    RESOURCE_LISTS,
    NodeGpuMemory,
    StatusReconciler,
    Usage,
    creation_order,
    merge_resource_list,
    normalized_resource_list,
)
from kai_scheduler.model.builder import pod_group_traits, pod_request
from kai_scheduler.model.priorities import Priorities, is_preemptible
from kai_scheduler.model.resources import PodRequest

log = logging.getLogger(__name__)

ACCESS = (access(POD_GROUPS, "patch", subresource="status"),)

SETTLE = 5.0  # seconds a new PodGroup's first status may wait for its pods to leave pending
# ... and at most, while no pending pod is known to wait (module doc): a scheduler or binder that is down or
# far behind does not keep a status unwritten for longer.
MAX_SETTLE = 60.0


def _uid(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("uid") or object_key(obj))


def _has_status(group: JsonObject) -> bool:
    """Whether any of the fields this controller owns is on the PodGroup's status."""
    status = group.get("status") or {}
    return "resourcesStatus" in status or any(name in status for name in POD_COUNTERS)


def _bound(pod: JsonObject) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _found_unplaceable(pod: JsonObject) -> bool:
    """Whether the pod's `PodScheduled` condition is False (the scheduler's answer, or the API server's for
    a gated pod)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


def _pod_model(pod: JsonObject, read: dict[str, Pod]) -> Pod:
    """The pod read (`Pod.model_validate`, whose errors it raises), kept in `read` by uid."""
    uid = _uid(pod)
    model = read.get(uid)
    if model is None:
        model = read[uid] = Pod.model_validate(pod)
    return model


def _counters(status: Mapping[str, Any]) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in POD_COUNTERS:
        value = status.get(name)
        out[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return out


class PodGroupStatusController(StatusReconciler):
    """KAI's podgroupcontroller (see the module doc), keyed by PodGroup, `concurrency` of them at once.
    `informers` must include pods and PodGroups; nodes (GPU memory of `gpu-memory` pods) and
    PriorityClasses are used when present."""

    kind = POD_GROUPS
    name = "podgroup status"
    controller = "podgroup"

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        resync_period: float = 30.0,
        debounce: float = 0.1,
        settle: float = SETTLE,
        concurrency: int = 8,
        backoff: Backoff = RETRY_BACKOFF,
    ) -> None:
        super().__init__(
            client,
            informers,
            workers=concurrency,
            resync_period=resync_period,
            debounce=debounce,
            concurrency=concurrency,
            backoff=backoff,
        )
        self.settle = settle
        self._first_seen: dict[str, float] = {}  # new PodGroups whose first status waits: since when
        self._requests: dict[str, PodRequest | None] = {}  # pod uid -> its request (None: unreadable)
        # What a status is computed from, when it was last found up to date (see `_inputs`): a resync
        # computes again only the PodGroups whose inputs changed since, not every PodGroup every time.
        self._settled: dict[str, tuple[str, frozenset[tuple[str, str]], int]] = {}
        self._cluster_epoch = 0  # counts changes of nodes and PriorityClasses (read by every status)
        self._cluster: tuple[int, NodeGpuMemory, Priorities] | None = None  # read at this epoch

    # --- computing ---

    def _request(self, pod: JsonObject, read: dict[str, Pod]) -> PodRequest | None:
        uid = _uid(pod)
        if uid in self._requests:
            return self._requests[uid]
        request: PodRequest | None
        try:
            request = pod_request(_pod_model(pod, read))
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
        self,
        group: JsonObject,
        pods: list[JsonObject],
        priorities: Priorities | None = None,
        read: dict[str, Pod] | None = None,
    ) -> bool:
        """As the scheduler decides it (`model.builder.pod_group_traits`, with the group's first pod);
        `read`: the pods read so far (`_pod_model`)."""
        priorities = priorities or self._priorities()
        try:
            model = PodGroup.model_validate(group)
        except (ValidationError, ValueError, TypeError) as error:
            log.warning("PodGroup %s cannot be read (%s): preemptible by default", object_key(group), error)
            return is_preemptible("", priorities.default)
        first: Pod | None = None
        for pod in sorted(pods, key=creation_order):
            try:
                first = _pod_model(pod, {} if read is None else read)
                break
            except (ValidationError, ValueError, TypeError):
                continue
        return pod_group_traits(model, first, priorities).preemptible

    def pod_group_status(
        self,
        group: JsonObject,
        *,
        memory: NodeGpuMemory | None = None,
        priorities: Priorities | None = None,
    ) -> dict[str, Any]:
        """The status fields this controller owns, as they should be (`controlplane.status`)."""
        memory = memory or NodeGpuMemory(self.informers.optional(NODES))
        pods = self._pods_of(object_key(group))
        read: dict[str, Pod] = {}  # a pod's request and its group's traits read one reading of it
        facts = []
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            facts.append(
                PodFacts(
                    str(phase) if phase else None,
                    bool(node),
                    memory.of(str(node)) if node else 0.0,
                    None if str(phase) in FINISHED else self._request(pod, read),
                )
            )
        preemptible = self.is_preemptible(group, pods, priorities, read)
        numbers = pod_group_numbers(facts, preemptible=preemptible, min_gpu_memory_mib=memory.of(None))
        self.stats.computed += 1
        return {
            "resourcesStatus": {
                "allocated": Usage.of(numbers.allocated).resource_list(),
                "allocatedNonPreemptible": Usage.of(numbers.allocated_non_preemptible).resource_list(),
                "requested": Usage.of(numbers.requested, numbers.requested_gpu_memory_mib).resource_list(),
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
            name: merge_resource_list(current.get(name), desired["resourcesStatus"][name])
            for name in RESOURCE_LISTS
        }
        counters = {name: desired[name] for name in POD_COUNTERS}
        return {"status": {"resourcesStatus": lists, **counters}}

    def _cluster_view(self) -> tuple[NodeGpuMemory, Priorities]:
        """The nodes' GPU memory and the priorities, read again only after a node or PriorityClass
        changed (every time before the handlers count the changes)."""
        if self._cluster is None or self._cluster[0] != self._cluster_epoch or not self._handlers_added:
            memory = NodeGpuMemory(self.informers.optional(NODES))
            self._cluster = (self._cluster_epoch, memory, self._priorities())
        return self._cluster[1], self._cluster[2]

    def keys(self) -> Iterable[str]:
        return list(self.informers.pod_groups.cache)

    async def reconcile(self, key: str) -> Result | None:
        obj = self.informers.pod_groups.cache.get(key)
        if obj is None:
            self._drop(key)
            return None
        inputs = self._inputs(key, obj)
        if inputs is not None and self._settled.get(key) == inputs:
            self.stats.unchanged += 1
            return None
        # Before computing anything: a new PodGroup's pods change several times while it waits.
        wait = self._first_write_wait(key, obj)
        if wait > 0:
            return Result(requeue_after=wait)
        memory, priorities = self._cluster_view()
        desired = self.pod_group_status(obj, memory=memory, priorities=priorities)
        if self._up_to_date(key, obj, desired):
            self.stats.unchanged += 1
            if inputs is not None:
                self._settled[key] = inputs
            return None
        self._settled.pop(key, None)
        version = await self._write(key, obj, desired)
        self._first_seen.pop(key, None)  # only now: a failed write's retry does not wait again
        if inputs is not None and version:
            # The PodGroup at the version this write made holds what was computed from these pods: when
            # the informer brings that version, its status is up to date without computing it again.
            self._settled[key] = (version, inputs[1], inputs[2])
        return None

    def _first_write_wait(self, key: str, group: JsonObject) -> float:
        """How much longer the first status of a new PodGroup waits (module doc): 0 once it was written
        (by anyone), once it has pods and none is pending (`pod_group_numbers`' phases), `settle` after
        first sight, or while none of its pods is bound and none is known to wait, `MAX_SETTLE` after it
        (a BindRequest that fails changes no pod: the wait is checked again every `settle` seconds)."""
        if self.settle <= 0 or key in self._written or _has_status(group):
            return 0.0
        pods = self._pods_of(key)
        pending = [pod for pod in pods if ((pod.get("status") or {}).get("phase") or "Pending") == "Pending"]
        if pods and not pending:
            return 0.0
        now = asyncio.get_running_loop().time()
        first = self._first_seen.setdefault(key, now)
        if now < first + self.settle:
            return first + self.settle - now
        if now >= first + MAX_SETTLE or not pending or any(_bound(pod) for pod in pods):
            return 0.0
        if any(self._waits(pod) for pod in pending):
            return 0.0
        return min(self.settle, first + MAX_SETTLE - now)

    def _waits(self, pod: JsonObject) -> bool:
        """Whether an unbound pending pod is known to wait: the scheduler said it cannot place it, and no
        standing BindRequest places it (when they are watched)."""
        if not _found_unplaceable(pod):
            return False
        requests = self.informers.optional(BIND_REQUESTS)
        placed = requests.by_index(POD_INDEX, object_key(pod)) if requests is not None else []
        return not any(bind_request_stands(request, pod) for request in placed)

    def _pods_of(self, key: str) -> list[JsonObject]:
        return self.informers.pods.by_index(POD_GROUP_INDEX, key)

    async def on_resync(self) -> None:
        """Forget the requests of pods gone without a deletion seen."""
        alive = {_uid(pod) for pod in self.informers.pods.cache.values()}
        for uid in [u for u in self._requests if u not in alive]:
            del self._requests[uid]

    def _drop(self, key: str) -> None:
        """The PodGroup is gone."""
        self.forget(key)
        self._written.pop(key, None)
        self._settled.pop(key, None)
        self._first_seen.pop(key, None)

    def _inputs(self, key: str, group: JsonObject) -> tuple[str, frozenset[tuple[str, str]], int] | None:
        """What the status of `group` is computed from, as versions: the PodGroup (its status included: what
        it is compared with), its pods, and the nodes and PriorityClasses as counted by the handlers (None
        before they are added: nothing is then known to be unchanged)."""
        if not self._handlers_added:
            return None
        pods = self._pods_of(key)
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
            self._drop(object_key(group))

        def cluster_changed(*_: JsonObject) -> None:
            self._cluster_epoch += 1

        self.informers.pods.add_handler(pod_added, pod_updated, pod_deleted)
        self.informers.pod_groups.add_handler(group_changed, group_changed, group_deleted)
        for kind in (NODES, PRIORITY_CLASSES):
            informer = self.informers.optional(kind)
            if informer is not None:
                informer.add_handler(cluster_changed, cluster_changed, cluster_changed)


__all__ = ["PodGroupStatusController"]
