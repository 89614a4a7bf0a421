"""`Binder`: carries out the scheduler's BindRequests, as KAI's binder does.

For each BindRequest (scheduling.run.ai/v1alpha2) that is neither Succeeded nor Failed:

1. Check the pod: it must exist and be the incarnation the request was made for (its owner reference),
   not be terminating, and not be bound elsewhere. A pod already bound to the selected node means an
   earlier attempt did the bind (its answer, or the status update, was lost): that is a success, and the
   bind is not repeated.
2. Hand the pod its GPUs: the annotation `received-resource-type`; for shared GPUs (Fraction) the label
   `runai-gpu-group=<group>` (with several devices also `runai-gpu-group/<i>`), and the GPU's environment
   in ConfigMaps of the pod's namespace, owned by the pod and written before the bind (KAI's gpusharing
   PreBind): under the prefix the admission webhook put in the pod's annotation `runai/shared-gpu-configmap`,
   `<prefix>-<i>` with `NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` and `RUNAI_NUM_OF_GPUS` and
   `<prefix>-<i>-evar` with `GPU_PORTION` (`i`: the index of the container named by
   `gpu-fraction-container-name`, else 0; see `admission.shared_gpu_config_maps`), which the container's
   env refers to. Without the annotation (admission off) it is one ConfigMap `<pod>-gpu` with the three
   keys, which the pod must refer to itself. A ConfigMap of that name that belongs to another live pod
   (two pods with one prefix, as when a pod's manifest is copied) fails the attempt instead of being taken.
   Each GPU group gets a reservation pod, as in KAI (see
   "GPU reservation pods" below), and the GPU index/UUID it publishes goes into `NVIDIA_VISIBLE_DEVICES`
   (comma-separated, one per device); with reservation off, the GPU group id stands in for it.
   DRA claims (`resourceClaimAllocations`): each claim is reserved for the pod and gets its allocation
   unless it has one (`claim_binding.py`, KAI's dynamicresources PreBind).
3. POST the pod's `binding` subresource, exactly once: a 409 because the pod is already bound to that very
   node counts as success.
4. Record the outcome in the BindRequest's status (`phase`, `reason`, `failedAttempts`). A failed attempt
   removes the GPU labels again (KAI's rollback) and is retried after `1 << failedAttempts` seconds
   (times `backoff_base`, which tests scale down) while `failedAttempts < backoffLimit`; then the request
   is Failed (unless the pod turns out bound after all) and the scheduler will place the pod anew. When
   the API server cannot be reached, the outcome is unknown and nothing can be recorded: that is retried
   with backoff without counting as an attempt.

Requests are processed by `concurrency` workers from a queue fed by the BindRequest informer (a request is
never processed by two workers at once) and by a periodic resync. On stop, requests in progress finish
(up to `drain_timeout` seconds) before the workers go.

GPU reservation pods (`reservation`, a `GpuReservation`; KAI's `resourcereservation`): for each selected
GPU group the binder makes sure a pod `gpu-reservation-<node>-<5 random chars>` exists in the reservation
namespace (found by its label `runai-gpu-group=<group>`; the namespace is created if missing), labelled
`app=kai-resource-reservation`, pinned to the node (`nodeName`), runtime class `nvidia`, requesting and
limited to `nvidia.com/gpu: 1`, annotated `karpenter.sh/do-not-disrupt: "true"`, running
`kai-scheduler reserve` (reservation_app.py) as the reservation service account. That app learns its GPU's
UUID through NVML and publishes it in the pod's annotation `run.ai/reserve_for_gpu_index`; the binder polls
for it up to `timeout` seconds (40 s, KAI's default) and fails the attempt (counted towards `backoffLimit`)
if it does not come; `timeout=0` does not wait and falls back to the group id when the annotation is not
there yet. Reservation pods are left out of the `ClusterState` (state.py): the scheduling model already
accounts each shared GPU. The resync sweeps away the reservation pod of a group that no pod holds any more
(no non-terminal pod outside the reservation namespace labelled with it, and no BindRequest, unless
Failed, of an existing pod selecting it).

`reservation=None` turns reservation pods off: the GPU group id stands in for the GPU's UUID. That is only
right where no real device is handed out (fake GPU nodes, tests without a device plugin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import string
import time
from dataclasses import dataclass, field

from kai_scheduler import __version__
from kai_scheduler.api import constants as c
from kai_scheduler.api.labels import gpu_group_labels, pod_gpu_groups
from kai_scheduler.api.manifests import InvalidField
from kai_scheduler.k8s.binder.claim_binding import bind_claims
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    CONFIG_MAPS,
    PODS,
    ApiStatusError,
    JsonObject,
    KubeClient,
    ResourceKind,
)
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.kai_objects import (
    RESERVATION_APP,
    bind_request_is_for,
    fraction_container_index,
    shared_gpu_config_maps,
)
from kai_scheduler.k8s.runtime.objects import object_key

log = logging.getLogger(__name__)

DEFAULT_BACKOFF_LIMIT = 3
GPU_CONFIGMAP_SUFFIX = "-gpu"
VISIBLE_DEVICES = c.NVIDIA_VISIBLE_DEVICES_ENV
CDI_GPU_KIND = "k8s.device-plugin.nvidia.com/gpu"  # the NVIDIA device plugin's CDI device kind
GPU_PORTION = c.GPU_PORTION_ENV
NUM_OF_GPUS = c.NUM_OF_GPUS_ENV
SUCCEEDED = "Succeeded"
FAILED = "Failed"
PENDING = "Pending"
NAMESPACES = ResourceKind("", "v1", "Namespace", "namespaces", False)
DEFAULT_RESERVATION_NAMESPACE = "kai-resource-reservation"
DEFAULT_RESERVATION_TIMEOUT = 40.0
DEFAULT_RESERVATION_SERVICE_ACCOUNT = "kai-resource-reservation"
# The project's own image (deploy/Dockerfile) runs the reservation app; the chart passes its image.
DEFAULT_RESERVATION_IMAGE = f"kai-scheduler:{__version__}"
RESERVATION_APP_LABEL = "app"
RESERVED_GPU_ANNOTATION = c.RESERVED_GPU_ANNOTATION
DO_NOT_DISRUPT_ANNOTATION = c.DO_NOT_DISRUPT_ANNOTATION
GPU_RESOURCE = "nvidia.com/gpu"
RESERVATION_RUNTIME_CLASS = "nvidia"
RESERVATION_POLL_INTERVAL = 0.1
_NAME_CHARS = string.ascii_lowercase + string.digits


@dataclass(frozen=True, slots=True)
class GpuReservation:
    """How the binder reserves shared GPUs (see the module doc)."""

    namespace: str = DEFAULT_RESERVATION_NAMESPACE
    service_account: str = DEFAULT_RESERVATION_SERVICE_ACCOUNT
    image: str = DEFAULT_RESERVATION_IMAGE
    timeout: float = DEFAULT_RESERVATION_TIMEOUT


class BindFailure(Exception):
    """An attempt that failed; `final` ones are not retried (the pod is gone, replaced, bound elsewhere)."""

    def __init__(self, reason: str, *, final: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final = final


@dataclass(slots=True)
class BinderStats:
    binds: int = 0  # binding calls that succeeded
    already_bound: int = 0  # requests found done (bound to the node already)
    failures: int = 0  # failed attempts
    failed: int = 0  # requests given up
    outcomes: dict[str, str] = field(default_factory=dict)  # request key -> last phase written


def _field_env(name: str, path: str) -> JsonObject:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


class Binder:
    """See the module doc. `informers` must include pods and bind requests (started by the caller)."""

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        *,
        backoff_base: float = 1.0,
        concurrency: int = 10,
        resync_period: float = 30.0,
        drain_timeout: float = 5.0,
        reservation: GpuReservation | None = GpuReservation(),
        cdi: bool = False,
    ) -> None:
        self.client = client
        self.informers = informers
        self.backoff_base = backoff_base
        self.concurrency = concurrency
        self.resync_period = resync_period
        self.drain_timeout = drain_timeout
        self.reservation = reservation
        # KAI's --cdi-enabled: name the GPU as a CDI device (the device plugin's CDI spec) rather than by
        # its bare UUID in NVIDIA_VISIBLE_DEVICES.
        self.cdi = cdi
        self._namespace_ready = False
        self._reserving: dict[str, int] = {}  # GPU group -> reconciles reserving it now (not swept)
        self._reservation_locks: dict[str, asyncio.Lock] = {}
        self._stopping = False
        self.stats = BinderStats()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._not_before: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._outages: dict[str, int] = {}
        # Requests (key -> uid) whose final outcome this binder wrote: the cache may still show them
        # Pending for a moment, and acting on that would undo a Failed or bind again.
        self._done: dict[str, str] = {}
        self._timers: set[asyncio.TimerHandle] = set()
        self._handlers_added = False

    # --- the queue -------------------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def _later(self, key: str, delay: float) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            if handle is not None:
                self._timers.discard(handle)
            self.enqueue(key)

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    def _watch_requests(self) -> None:
        if self._handlers_added:
            return
        self._handlers_added = True

        def changed(obj: JsonObject, new: JsonObject | None = None) -> None:
            current = new if new is not None else obj
            if (current.get("status") or {}).get("phase") not in (SUCCEEDED, FAILED):
                self.enqueue(object_key(current))

        def gone(obj: JsonObject) -> None:
            key = object_key(obj)
            self._not_before.pop(key, None)
            self._attempts.pop(key, None)
            self._outages.pop(key, None)
            self._done.pop(key, None)

        self.informers.bind_requests.add_handler(changed, lambda old, new: changed(old, new), gone)

    def resync(self) -> None:
        for key, obj in self.informers.bind_requests.cache.items():
            if (obj.get("status") or {}).get("phase") not in (SUCCEEDED, FAILED):
                self.enqueue(key)

    async def _worker(self) -> None:
        while not self._stopping:
            key = await self._queue.get()
            if self._stopping:
                break
            self._queued.discard(key)
            self._active.add(key)
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("binder: reconciling %s failed", key)
                self._later(key, self.backoff_base)
            finally:
                self._active.discard(key)
                if key in self._dirty:
                    self._dirty.discard(key)
                    self.enqueue(key)

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until `stop` is set."""
        self._watch_requests()
        await self.informers.wait_synced()
        self.resync()
        workers = [asyncio.create_task(self._worker(), name=f"binder-{i}") for i in range(self.concurrency)]
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.resync_period)
                if not stop.is_set():
                    self.resync()
                    if self.reservation is not None:
                        await self._sweep_reservations(self.reservation)
        finally:
            # Graceful: no new work, the requests in progress finish (bounded), then the workers go.
            self._stopping = True
            for handle in self._timers:
                handle.cancel()
            self._timers.clear()
            deadline = time.monotonic() + self.drain_timeout
            while self._active and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self._stopping = False

    # --- one request -----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        request = self.informers.bind_requests.cache.get(key)
        if request is None:
            return
        status = request.get("status") or {}
        if status.get("phase") in (SUCCEEDED, FAILED):
            return
        if self._done.get(key) == _uid(request):
            return
        wait = self._not_before.get(key, 0.0) - time.monotonic()
        if wait > 0:
            self._later(key, wait)
            return
        spec = request.get("spec") or {}
        meta = request["metadata"]
        namespace = meta.get("namespace") or "default"
        pod_name = str(spec.get("podName") or meta["name"])
        node = str(spec.get("selectedNode") or "")
        raw_limit = spec.get("backoffLimit")
        limit = int(raw_limit) if isinstance(raw_limit, int) else DEFAULT_BACKOFF_LIMIT
        attempts = max(int(status.get("failedAttempts") or 0), self._attempts.get(key, 0))
        try:
            if not node:
                raise BindFailure("the BindRequest names no selectedNode", final=True)
            outcome = await self._bind(request, namespace, pod_name, node)
        except BindFailure as failure:
            await self._failed(key, request, namespace, pod_name, attempts, limit, failure)
            return
        except ApiStatusError as error:
            await self._failed(key, request, namespace, pod_name, attempts, limit, BindFailure(str(error)))
            return
        except (ConnectionError, OSError) as error:
            self._unreachable(key, error)
            return
        self._attempts.pop(key, None)
        self._not_before.pop(key, None)
        self._outages.pop(key, None)
        await self._set_status(request, SUCCEEDED, outcome, attempts)

    def _unreachable(self, key: str, error: BaseException) -> None:
        """The API server could not be reached: not an attempt that counts towards `backoffLimit` (its
        outcome is unknown, and no status could be written anyway); retried with backoff (at most 32 x
        `backoff_base`), and the next attempt finds out what happened."""
        outages = self._outages.get(key, 0) + 1
        self._outages[key] = outages
        delay = self.backoff_base * (1 << min(outages, 5))
        self._not_before[key] = time.monotonic() + delay
        log.info("binder: %s: API server unreachable (%s); retrying in %.2fs", key, error, delay)
        self._later(key, delay)

    async def _pod(self, namespace: str, name: str) -> JsonObject | None:
        try:
            return await self.client.get(PODS, name, namespace)
        except ApiStatusError as error:
            if error.code == 404:
                return None
            raise

    async def _bind(self, request: JsonObject, namespace: str, pod_name: str, node: str) -> str:
        """Bind the pod (once); returns the reason to record."""
        pod = self.informers.pods.cache.get(f"{namespace}/{pod_name}")
        if pod is None or not bind_request_is_for(request, pod) or (pod.get("spec") or {}).get("nodeName"):
            pod = await self._pod(namespace, pod_name)  # the cache may lag: ask the API server
        if pod is None:
            raise BindFailure(f"pod {namespace}/{pod_name} does not exist", final=True)
        if not bind_request_is_for(request, pod):
            raise BindFailure(f"pod {namespace}/{pod_name} was replaced by a new pod", final=True)
        spec = request.get("spec") or {}
        groups = [str(g) for g in spec.get("selectedGPUGroups") or []]
        resource_type = str(spec.get("receivedResourceType") or "Regular")
        received = spec.get("receivedGPU") or {}
        bound_to = (pod.get("spec") or {}).get("nodeName")
        if bound_to == node:
            # An earlier attempt bound it (a lost answer, a lost status update, a restart): make sure the
            # pod has its GPUs (a rollback may have run since) and its claims, and do not bind again.
            await self._hand_gpus(pod, namespace, pod_name, node, resource_type, groups, received)
            await self._bind_claims(request, pod)
            self.stats.already_bound += 1
            return f"pod was bound to {node} already"
        if bound_to:
            raise BindFailure(f"pod is bound to another node ({bound_to})", final=True)
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            raise BindFailure("pod is being deleted", final=True)
        await self._bind_claims(request, pod)
        annotations: dict[str, str] | None = None
        if _shares_gpus(resource_type, groups):
            await self._hand_gpus(pod, namespace, pod_name, node, resource_type, groups, received)
        else:
            # A whole-GPU (or CPU-only) pod's only hand-over is its received-resource-type annotation: it
            # rides on the Binding, which the API server copies onto the pod with spec.nodeName (one
            # write instead of two, and nobody sees the pod bound without it).
            annotations = {c.RECEIVED_RESOURCE_TYPE_ANNOTATION: resource_type}
        try:
            await self.client.bind(namespace, pod_name, node, annotations=annotations)
        except ApiStatusError as error:
            if error.code != 409:
                raise
            current = await self._pod(namespace, pod_name)
            if current is not None and (current.get("spec") or {}).get("nodeName") == node:
                self.stats.already_bound += 1
                return f"pod was bound to {node} already"
            raise BindFailure(f"binding conflict: {error.message}") from error
        self.stats.binds += 1
        return ""

    async def _bind_claims(self, request: JsonObject, pod: JsonObject) -> None:
        """DRA: the claims' allocations are written before the pod is bound (KAI's PreBind)."""
        if (request.get("spec") or {}).get("resourceClaimAllocations"):
            failure = await bind_claims(self.client, request, pod)
            if failure is not None:
                raise BindFailure(failure)

    async def _hand_gpus(
        self,
        pod: JsonObject,
        namespace: str,
        pod_name: str,
        node: str,
        resource_type: str,
        groups: list[str],
        received: JsonObject,
    ) -> None:
        patch: JsonObject = {
            "metadata": {"annotations": {c.RECEIVED_RESOURCE_TYPE_ANNOTATION: resource_type}}
        }
        shared = _shares_gpus(resource_type, groups)
        if shared:
            patch["metadata"]["labels"] = gpu_group_labels(groups)
        meta = pod.get("metadata") or {}
        has = {
            "annotations": meta.get("annotations") or {},
            "labels": meta.get("labels") or {},
        }
        if any(
            has[part].get(k) != v for part, values in patch["metadata"].items() for k, v in values.items()
        ):
            await self.client.patch(PODS, pod_name, patch, namespace)  # no write when the pod has it all
        if not shared:
            return
        devices = groups
        if self.reservation is not None:
            reservation = self.reservation
            for group in groups:
                self._reserving[group] = self._reserving.get(group, 0) + 1
            try:
                devices = [await self._reserve(reservation, node, group) for group in groups]
            finally:
                for group in groups:
                    left = self._reserving.get(group, 1) - 1
                    if left > 0:
                        self._reserving[group] = left
                    else:
                        self._reserving.pop(group, None)
                        self._reservation_locks.pop(group, None)
        await self._write_gpu_config_map(pod, namespace, pod_name, devices, received)

    # --- GPU reservation pods --------------------------------------------------------------------

    async def _ensure_namespace(self, settings: GpuReservation) -> None:
        if self._namespace_ready:
            return
        body: JsonObject = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": settings.namespace}}
        try:
            await self.client.create(NAMESPACES, body)
        except ApiStatusError as error:
            # 409: it exists. 403: the binder may not create namespaces (the chart's RBAC), because the
            # chart makes this one; if it is missing after all, creating the pod names the problem.
            if error.code not in (403, 409):
                raise
        self._namespace_ready = True

    async def _find_reservation(self, settings: GpuReservation, group: str) -> JsonObject | None:
        pods, _ = await self.client.list_objects(
            PODS, settings.namespace, label_selector=f"{c.GPU_GROUP_LABEL}={group}"
        )
        live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
        return live[0] if live else None

    @staticmethod
    def reservation_pod(settings: GpuReservation, node: str, group: str) -> JsonObject:
        suffix = "".join(secrets.choice(_NAME_CHARS) for _ in range(5))
        gpu = {GPU_RESOURCE: "1"}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"gpu-reservation-{node}-{suffix}",
                "namespace": settings.namespace,
                "labels": {RESERVATION_APP_LABEL: RESERVATION_APP, c.GPU_GROUP_LABEL: group},
                "annotations": {DO_NOT_DISRUPT_ANNOTATION: "true"},
            },
            "spec": {
                "nodeName": node,
                "runtimeClassName": RESERVATION_RUNTIME_CLASS,
                "serviceAccountName": settings.service_account,
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {
                        "name": "resource-reservation",
                        "image": settings.image,
                        "command": ["kai-scheduler", "reserve"],
                        # The app annotates its own pod: it learns which one from the downward API.
                        "env": [
                            _field_env("POD_NAME", "metadata.name"),
                            _field_env("POD_NAMESPACE", "metadata.namespace"),
                        ],
                        "resources": {"requests": dict(gpu), "limits": dict(gpu)},
                    }
                ],
            },
        }

    async def _reserve(self, settings: GpuReservation, node: str, group: str) -> str:
        """Make sure `group` has a reservation pod and return the GPU UUID it publishes (or the group id
        with `timeout=0` when it has not published yet)."""
        await self._ensure_namespace(settings)
        # Pods sharing a GPU are bound concurrently: one at a time finds or creates its reservation pod,
        # so that a GPU never gets two.
        async with self._reservation_locks.setdefault(group, asyncio.Lock()):
            reservation = await self._find_reservation(settings, group)
            if reservation is None:
                body = self.reservation_pod(settings, node, group)
                try:
                    reservation = await self.client.create(PODS, body)
                except ApiStatusError as error:
                    if error.code != 409:
                        raise
                    reservation = body
        name = str(reservation["metadata"]["name"])
        where = f"{settings.namespace}/{name}"
        deadline = time.monotonic() + settings.timeout
        while True:
            annotations = (reservation.get("metadata") or {}).get("annotations") or {}
            published = annotations.get(RESERVED_GPU_ANNOTATION)
            if published:
                return str(published)
            if settings.timeout <= 0:
                return group
            if time.monotonic() >= deadline:
                raise BindFailure(
                    f"reservation pod {where} for GPU group {group} did not publish "
                    f"{RESERVED_GPU_ANNOTATION} within {settings.timeout:g}s"
                )
            await asyncio.sleep(min(RESERVATION_POLL_INTERVAL, max(deadline - time.monotonic(), 0.0)))
            try:
                reservation = await self.client.get(PODS, name, settings.namespace)
            except ApiStatusError as error:
                if error.code != 404:
                    raise
                raise BindFailure(f"reservation pod {where} vanished") from error

    def _groups_in_use(self, settings: GpuReservation) -> set[str]:
        """GPU groups held by a non-terminal pod (outside the reservation namespace), selected by a
        BindRequest (not Failed) of a pod that still exists (its labels may lag in the cache), or being
        reserved right now."""
        used = set(self._reserving)
        pods = self.informers.pods.cache
        for obj in pods.values():
            meta = obj.get("metadata") or {}
            if meta.get("namespace") == settings.namespace:
                continue
            if (obj.get("status") or {}).get("phase") in (SUCCEEDED, FAILED):
                continue
            used.update(pod_gpu_groups(meta.get("labels") or {}))
        for request in self.informers.bind_requests.cache.values():
            if (request.get("status") or {}).get("phase") == FAILED:
                continue
            spec = request.get("spec") or {}
            meta = request.get("metadata") or {}
            pod = pods.get(f"{meta.get('namespace') or 'default'}/{spec.get('podName') or meta.get('name')}")
            if pod is not None and bind_request_is_for(request, pod):
                used.update(str(g) for g in spec.get("selectedGPUGroups") or [])
        return used

    async def _sweep_reservations(self, settings: GpuReservation) -> None:
        """Delete the reservation pods of GPU groups no pod holds any more."""
        try:
            pods, _ = await self.client.list_objects(
                PODS,
                settings.namespace,
                label_selector=f"{RESERVATION_APP_LABEL}={RESERVATION_APP}",
            )
            used = self._groups_in_use(settings)
            for obj in pods:
                meta = obj.get("metadata") or {}
                group = (meta.get("labels") or {}).get(c.GPU_GROUP_LABEL)
                if group in used or meta.get("deletionTimestamp"):
                    continue
                log.info("binder: GPU group %s is free: deleting reservation pod %s", group, meta.get("name"))
                try:
                    await self.client.delete(PODS, str(meta["name"]), settings.namespace)
                except ApiStatusError as error:
                    if error.code != 404:
                        raise
        except (ApiStatusError, ConnectionError, OSError) as error:
            log.warning("binder: sweeping reservation pods: %s", error)

    async def _write_gpu_config_map(
        self, pod: JsonObject, namespace: str, pod_name: str, groups: list[str], received: JsonObject
    ) -> None:
        portion = str(received.get("portion") or "0.00")
        try:
            count = int(received.get("count") or len(groups))
            total = f"{count * float(portion):.2f}"
        except ValueError:
            total = portion
        devices = [f"{CDI_GPU_KIND}={device}" for device in groups] if self.cdi else groups
        data = {VISIBLE_DEVICES: ",".join(devices), GPU_PORTION: portion, NUM_OF_GPUS: total}
        meta = pod.get("metadata") or {}
        prefix = (meta.get("annotations") or {}).get(c.SHARED_GPU_CONFIGMAP_ANNOTATION)
        if not prefix:
            # Admission off: the name the pod's manifest must refer to itself.
            await self._upsert_config_map(pod, namespace, pod_name, f"{pod_name}{GPU_CONFIGMAP_SUFFIX}", data)
            return
        try:
            index = fraction_container_index(pod)
        except InvalidField as problem:  # the webhook refuses such a pod; the annotation changed since
            raise BindFailure(f"{problem.field}: {problem.message}") from problem
        capabilities, direct = shared_gpu_config_maps(str(prefix), index)
        await self._upsert_config_map(pod, namespace, pod_name, capabilities, data)
        await self._upsert_config_map(pod, namespace, pod_name, direct, {GPU_PORTION: portion})

    async def _upsert_config_map(
        self, pod: JsonObject, namespace: str, pod_name: str, name: str, data: dict[str, str]
    ) -> None:
        """Create the ConfigMap `name`, owned by the pod, with `data`; one that exists (an earlier attempt,
        an earlier pod of this name) is taken over, unless it belongs to another pod that has not finished."""
        uid = (pod.get("metadata") or {}).get("uid", "")
        owners = [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid}]
        body: JsonObject = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners},
            "data": data,
        }
        try:
            await self.client.create(CONFIG_MAPS, body)
            return
        except ApiStatusError as error:
            if error.code != 409:
                raise
        try:
            existing = await self.client.get(CONFIG_MAPS, name, namespace)
        except ApiStatusError as error:
            if error.code != 404:
                raise
            await self.client.create(CONFIG_MAPS, body)  # gone meanwhile
            return
        for ref in (existing.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("kind") != "Pod" or ref.get("uid") == uid or not ref.get("name"):
                continue
            other = await self._pod(namespace, str(ref["name"]))
            other_meta = (other or {}).get("metadata") or {}
            if (
                other is not None
                and other_meta.get("uid") == ref.get("uid")
                and (other.get("status") or {}).get("phase") not in (SUCCEEDED, FAILED)
            ):
                raise BindFailure(
                    f"ConfigMap {namespace}/{name} holds the GPU environment of pod "
                    f"{namespace}/{ref['name']}, which has not finished: the two pods carry one "
                    f"{c.SHARED_GPU_CONFIGMAP_ANNOTATION} (a copied manifest?); create this pod without "
                    "that annotation and the env entries that refer to those ConfigMaps"
                )
        await self.client.patch(
            CONFIG_MAPS, name, {"metadata": {"ownerReferences": owners}, "data": data}, namespace
        )

    async def _rollback(self, namespace: str, pod_name: str, request: JsonObject, node: str) -> None:
        """Take the GPU labels back from a pod that did not get bound (KAI's rollback)."""
        groups = [str(g) for g in (request.get("spec") or {}).get("selectedGPUGroups") or []]
        if not groups:
            return
        removal: dict[str, None] = dict.fromkeys(gpu_group_labels(groups))
        try:
            pod = await self._pod(namespace, pod_name)
            if pod is None or (pod.get("spec") or {}).get("nodeName") == node:
                return  # gone, or bound after all (the answer was lost): the labels stay
            await self.client.patch(PODS, pod_name, {"metadata": {"labels": removal}}, namespace)
        except (ApiStatusError, ConnectionError, OSError) as error:
            log.debug("binder: rollback of %s/%s: %s", namespace, pod_name, error)

    async def _failed(
        self,
        key: str,
        request: JsonObject,
        namespace: str,
        pod_name: str,
        attempts: int,
        limit: int,
        failure: BindFailure,
    ) -> None:
        attempts += 1
        self.stats.failures += 1
        self._attempts[key] = attempts
        if not failure.final:
            await self._rollback(
                namespace, pod_name, request, str((request.get("spec") or {}).get("selectedNode"))
            )
        give_up = failure.final or attempts >= limit
        if give_up and not failure.final:
            # Before giving up: an attempt whose answer was lost may have bound the pod after all.
            try:
                pod = await self._pod(namespace, pod_name)
            except (ApiStatusError, ConnectionError, OSError) as error:
                self._unreachable(key, error)
                return
            node = str((request.get("spec") or {}).get("selectedNode"))
            if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
                self.enqueue(key)  # bound: the next attempt records the success
                return
        log.info(
            "binder: %s attempt %d/%d failed: %s%s",
            key,
            attempts,
            limit,
            failure.reason,
            " (giving up)" if give_up else "",
        )
        if give_up:
            self.stats.failed += 1
            await self._set_status(request, FAILED, failure.reason, attempts)
            return
        delay = self.backoff_base * (1 << attempts)
        self._not_before[key] = time.monotonic() + delay
        await self._set_status(request, PENDING, failure.reason, attempts)
        self._later(key, delay)

    async def _set_status(self, request: JsonObject, phase: str, reason: str, attempts: int) -> None:
        meta = request["metadata"]
        status = {"phase": phase, "reason": reason, "failedAttempts": attempts}
        self.stats.outcomes[object_key(request)] = phase
        if phase != PENDING:
            self._done[object_key(request)] = _uid(request)
        try:
            await self.client.patch(
                BIND_REQUESTS, meta["name"], {"status": status}, meta.get("namespace"), subresource="status"
            )
        except (ApiStatusError, ConnectionError, OSError) as error:
            # The outcome stays in memory; the next reconcile finds the pod bound (a success) or retries.
            log.warning("binder: could not record %s on %s: %s", phase, object_key(request), error)
            if phase != PENDING:
                self._done.pop(object_key(request), None)
                self._later(object_key(request), self.backoff_base)


def _shares_gpus(resource_type: str, groups: list[str]) -> bool:
    """A fractional pod with GPU groups: it gets group labels (and reservation pods) before its binding."""
    return resource_type == "Fraction" and bool(groups)


def _uid(obj: JsonObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


__all__ = [
    "DEFAULT_BACKOFF_LIMIT",
    "DEFAULT_RESERVATION_IMAGE",
    "DEFAULT_RESERVATION_NAMESPACE",
    "DEFAULT_RESERVATION_TIMEOUT",
    "GPU_CONFIGMAP_SUFFIX",
    "GPU_PORTION",
    "NUM_OF_GPUS",
    "RESERVED_GPU_ANNOTATION",
    "VISIBLE_DEVICES",
    "BindFailure",
    "Binder",
    "BinderStats",
    "gpu_group_labels",
]
