"""The scheduler's bind effect: a `BindRequest` per bind decision, never two for one pod, and the garbage
collection of BindRequests whose pod is gone (module doc of `loop.py` for the BindRequest's fields)."""

from __future__ import annotations

import asyncio
import time

from kai_scheduler.api import constants as c
from kai_scheduler.api.numa_placement import placement_json
from kai_scheduler.framework.decisions import ClaimAllocation, Decision, ExtendedClaimAllocation
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import BIND_REQUESTS, PODS, ApiStatusError, JsonObject
from kai_scheduler.k8s.runtime.informers import POD_INDEX, InformerSet
from kai_scheduler.k8s.runtime.kai_objects import bind_request_is_for
from kai_scheduler.k8s.runtime.objects import metadata_of, object_key
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.live_state import LiveState
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.snapshot import ClusterSnapshot
from kai_scheduler.model.state_export import dump as dump_model

# One BindRequest per placed pod, read back after a 409 and deleted when stale.
ACCESS = (access(BIND_REQUESTS, "get", "create", "delete"),)
# The scheduler of a node pool (a shard with a partition value) labels the pods it binds with the pool.
POOL_LABEL_ACCESS = (access(PODS, "patch"),)

SELECTED_NODE_LABEL = "selected-node"
DEFAULT_BACKOFF_LIMIT = 3


def claim_allocation_json(allocation: ClaimAllocation) -> JsonObject:
    """One `resourceClaimAllocations` entry of a BindRequest: the pod's claim name, the AllocationResult."""
    return {"name": allocation.name, "allocation": dump_model(allocation.allocation)}


def extended_claim_json(extended: ExtendedClaimAllocation) -> JsonObject:
    """A BindRequest's `extendedResourceClaimAllocation` (KEP-5004)."""
    return {
        "allocation": dump_model(extended.allocation),
        "deviceRequests": [dump_model(r) for r in extended.device_requests],
        "containerMappings": [dump_model(m) for m in extended.container_mappings],
    }


def received_gpu(task: TaskInfo | None, snapshot: ClusterSnapshot, node: str) -> tuple[str, int, str]:
    """(receivedResourceType, receivedGPU.count, receivedGPU.portion) for a pod placed on `node`:
    Fraction: the number of shared devices and the portion of each; MigInstance: the number of instances
    (portion 1.00); Regular: whole GPUs (portion 1.00, or 0 GPUs at 0.00)."""
    if task is None:
        return ("Regular", 0, "0.00")
    request = task.request
    shared = request.shared_gpu
    if shared is not None:
        # What it holds of each device there; a gpu-memory pod on a node the snapshot lacks, no known part.
        index = snapshot.nodes.index.get(node)
        if index is not None:
            portion = shared.held_portion(float(snapshot.nodes.gpu_memory_mib[index]))
        else:
            portion = shared.fraction
        return ("Fraction", shared.devices, f"{portion:.2f}")
    if request.mig_instances and not request.whole_gpus:
        return ("MigInstance", int(sum(n for _, n in request.mig_instances)), "1.00")
    # GPUs of DRA claims are not the device plugin's: the BindRequest counts only those (as KAI's).
    devices = request.whole_gpus - request.dra_gpus
    return ("Regular", devices, "1.00" if devices else "0.00")


class BindRequests:
    """Creates the BindRequests of a cycle's binds, each put into the BindRequest informer's cache at once
    (`Informer.assume`, as KAI's scheduler cache adds it to its informer's store): the next cycle sees the
    pod bound even before the watch brings the request, and sees it pending again once the request is
    deleted, whoever deletes it. Deletes the BindRequests left without their pod."""

    def __init__(
        self,
        effects: Effects,
        informers: InformerSet,
        *,
        backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
        node_pool: str = "default",
        partition: Partition | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.effects = effects
        self.informers = informers
        self.backoff_limit = backoff_limit
        self.node_pool = node_pool
        self.partition = partition
        self.metrics = metrics
        # BindRequests to look at for garbage (`collect_garbage`): every one at first, then what changed.
        self._garbage_everything = True
        self._garbage_candidates: set[str] = set()
        self._watch_for_garbage()

    def body(self, pod: JsonObject, snapshot: ClusterSnapshot, decision: Decision) -> JsonObject:
        meta = pod["metadata"]
        resource_type, count, portion = received_gpu(
            snapshot.tasks.get(decision.pod), snapshot, decision.node
        )
        labels = {SELECTED_NODE_LABEL: decision.node}
        partition = self.partition
        if partition is not None and partition.value is not None:
            labels[partition.label_key] = partition.value  # KAI: the shard's partition labels
        elif partition is None and self.node_pool != "default":
            labels[c.NODE_POOL_LABEL] = self.node_pool
        return {
            "apiVersion": BIND_REQUESTS.api_version,
            "kind": BIND_REQUESTS.kind,
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace") or "default",
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": meta["name"],
                        "uid": meta.get("uid", ""),
                        "controller": False,
                        "blockOwnerDeletion": False,
                    }
                ],
            },
            "spec": {
                "podName": meta["name"],
                "selectedNode": decision.node,
                "receivedResourceType": resource_type,
                "receivedGPU": {"count": count, "portion": portion},
                "selectedGPUGroups": list(decision.gpu_groups),
                "backoffLimit": self.backoff_limit,
                **(
                    {"resourceClaimAllocations": [claim_allocation_json(a) for a in decision.claims]}
                    if decision.claims
                    else {}
                ),
                **(
                    {"extendedResourceClaimAllocation": extended_claim_json(decision.extended_claim)}
                    if decision.extended_claim is not None
                    else {}
                ),
                **(
                    {"predictedNUMAZones": placement_json(decision.numa_zones)} if decision.numa_zones else {}
                ),
            },
        }

    async def bind(
        self, live: LiveState, snapshot: ClusterSnapshot, decision: Decision, report: CycleReport
    ) -> None:
        """`_request`, timed into `kai_task_bind_latency_milliseconds` whatever its outcome (as KAI
        times its cache's `Bind`, which creates the BindRequest)."""
        began = time.perf_counter()
        try:
            await self._request(live, snapshot, decision, report)
        finally:
            if self.metrics is not None:
                self.metrics.observe_task_bind(time.perf_counter() - began)

    async def _request(
        self, live: LiveState, snapshot: ClusterSnapshot, decision: Decision, report: CycleReport
    ) -> None:
        pod = live.pods.get(decision.pod)
        if pod is None:
            return
        meta = pod["metadata"]
        namespace, name = meta.get("namespace") or "default", meta["name"]
        existing = live.bind_requests.get(decision.pod)
        if existing is not None:
            if bind_request_is_for(existing, pod) and (existing.get("status") or {}).get("phase") != "Failed":
                return  # requested already (the state counts the pod as bound; defensive)
            await self._delete(namespace, name)
        body = self.body(pod, snapshot, decision)
        requests = self.informers.bind_requests
        for attempt in range(2):
            try:
                requests.assume(await self.effects.client.create(BIND_REQUESTS, body))
                break
            except ApiStatusError as error:
                if error.code != 409 or attempt:
                    raise
                current = await self._get(namespace, name)
                if current is None:
                    continue
                if (
                    bind_request_is_for(current, pod)
                    and (current.get("status") or {}).get("phase") != "Failed"
                ):
                    requests.assume(current)
                    return  # done before (a lost answer, another replica): never twice
                await self._delete(namespace, name)
        report.bind_requests.append(decision.pod)
        await self._label_pool(namespace, name, meta)

    async def _label_pool(self, namespace: str, name: str, meta: JsonObject) -> None:
        """KAI's `nodePoolLabelsChange`: a pod bound by the scheduler of a pool (a shard with a partition
        value) carries that pool's label, added when it lacks it (its PodGroup brought it to the shard)."""
        partition = self.partition
        if partition is None or partition.value is None:
            return
        if (meta.get("labels") or {}).get(partition.label_key) == partition.value:
            return
        try:
            await self.effects.client.patch(
                PODS, name, {"metadata": {"labels": {partition.label_key: partition.value}}}, namespace
            )
        except ApiStatusError as error:
            if error.code != 404:  # gone: nothing to label
                raise

    async def _get(self, namespace: str, name: str) -> JsonObject | None:
        try:
            return await self.effects.client.get(BIND_REQUESTS, name, namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return None
            raise

    async def _delete(self, namespace: str, name: str) -> None:
        try:
            await self.effects.client.delete(BIND_REQUESTS, name, namespace)
        except ApiStatusError as error:
            if error.code != 404:
                raise

    def _watch_for_garbage(self) -> None:
        """BindRequests to look at again: new or changed ones, and those of pods that came or went (a pod
        that changes keeps its incarnation)."""
        requests = self.informers.bind_requests

        def request_changed(*objs: JsonObject) -> None:
            self._garbage_candidates.add(object_key(objs[-1]))

        def pod_came_or_went(pod: JsonObject) -> None:
            key = object_key(pod)
            self._garbage_candidates.add(key)  # a BindRequest named as its pod, even without `podName`
            self._garbage_candidates.update(object_key(r) for r in requests.by_index(POD_INDEX, key))

        requests.add_handler(request_changed, request_changed)
        self.informers.pods.add_handler(on_add=pod_came_or_went, on_delete=pod_came_or_went)

    async def collect_garbage(self, live: LiveState, report: CycleReport, limit: int = 100) -> None:
        """Delete BindRequests whose pod is gone or was replaced by a new pod of the same name (the API
        server's garbage collector does this through the owner reference; a cluster without one, or a
        BindRequest without an owner, needs it done here). The first cycle looks at every BindRequest,
        later ones at those marked by `_watch_for_garbage` (and those left for later)."""
        cache = self.informers.bind_requests.cache
        if self._garbage_everything:
            self._garbage_everything = False
            self._garbage_candidates.update(cache)
        candidates = sorted(self._garbage_candidates)
        self._garbage_candidates = set()
        doomed: list[tuple[str, str]] = []
        for index, key in enumerate(candidates):
            if len(doomed) >= limit:
                self._garbage_candidates.update(candidates[index:])  # the next cycle's
                break
            obj = cache.get(key)
            if obj is None:
                continue
            meta = metadata_of(obj)
            namespace = meta.get("namespace") or "default"
            pod_name = (obj.get("spec") or {}).get("podName") or meta.get("name")
            pod = self.informers.pods.cache.get(f"{namespace}/{pod_name}")
            if pod is None or not bind_request_is_for(obj, pod):
                doomed.append((namespace, str(meta.get("name"))))
        calls = [
            self.effects.limited(self._delete(ns, name), report, f"delete BindRequest {ns}/{name}")
            for ns, name in doomed
        ]
        await asyncio.gather(*calls)


__all__ = [
    "DEFAULT_BACKOFF_LIMIT",
    "SELECTED_NODE_LABEL",
    "BindRequests",
    "claim_allocation_json",
    "received_gpu",
]
