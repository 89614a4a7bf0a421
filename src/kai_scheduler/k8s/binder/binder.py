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
   `gpu-fraction-container-name`, else 0; see `runtime.kai_objects.shared_gpu_config_maps`), which the
   container's env refers to. Without the annotation (admission off) it is one ConfigMap `<pod>-gpu` with
   the three keys, which the pod must refer to itself. A ConfigMap of that name that belongs to another
   live pod (two pods with one prefix, as when a pod's manifest is copied) fails the attempt instead of
   being taken. Each GPU group gets a reservation pod, as in KAI (see "GPU reservation pods" below), and
   the GPU index/UUID it publishes goes into `NVIDIA_VISIBLE_DEVICES` (comma-separated, one per device);
   with reservation off, the GPU group id stands in for it. DRA claims (`resourceClaimAllocations`): each
   claim is reserved for the pod and gets its allocation unless it has one (`claim_binding.py`, KAI's
   dynamicresources PreBind); DRA-backed extended resources (`extendedResourceClaimAllocation`) get a
   claim made for the pod, named in its status (`extended_claims.py`).
3. POST the pod's `binding` subresource, exactly once: a 409 because the pod is already bound to that very
   node counts as success.
4. Record the bind as kube-scheduler does, a Normal `Scheduled` event on the pod (`Successfully assigned
   <ns>/<pod> to <node>`, and for shared GPUs the GPU group(s) and portion), reported as the pod's
   scheduler; a request given up gets a Warning `FailedBinding` event with the last failure. Then record
   the outcome in the BindRequest's status (`phase`, `reason`, `failedAttempts`). A failed attempt
   removes the GPU labels and deletes the extended-resource claim again (KAI's rollback) and is retried
   after `1 << failedAttempts` seconds (times `backoff_base`, which tests scale down) while
   `failedAttempts < backoffLimit`; then the request
   is Failed (unless the pod turns out bound after all) and the scheduler will place the pod anew. When
   the API server cannot be reached, the outcome is unknown and nothing can be recorded: that is retried
   with backoff without counting as an attempt.

Requests are processed by `concurrency` workers from the work queue (`KeyQueue`) fed by the BindRequest
informer (a request is never processed by two workers at once) and by a periodic resync. On stop, requests
in progress finish (up to `drain_timeout` seconds) before the workers go.

GPU reservation pods (`reservation`, a `GpuReservation`; KAI's `resourcereservation`): for each selected
GPU group the binder makes sure a pod `gpu-reservation-<node>-<5 random chars>` exists in the reservation
namespace (found by its label `runai-gpu-group=<group>`; the namespace must exist: the chart makes it, and
without it the attempt fails saying so), labelled
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

What one attempt writes on the pod's side, and takes back, is `handover.py`; within it the GPU
environment is `gpu_env.py`, the reservation pods `reservations.py`, the DRA claims `claim_binding.py`.
`reservation=None` turns reservation pods off: the GPU group id stands in for the GPU's UUID. That is only
right where no real device is handed out (fake GPU nodes, tests without a device plugin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.binder import claim_binding, extended_claims, gpu_env, volume_binding
from kai_scheduler.k8s.binder.errors import BindFailure
from kai_scheduler.k8s.binder.gpu_env import get_pod
from kai_scheduler.k8s.binder.handover import (
    bind_annotations,
    hand_claims,
    hand_gpus,
    pod_of,
    received_type,
    scheduled_message,
    selected_groups,
    shares_gpus,
    take_back,
)
from kai_scheduler.k8s.binder.reservations import GpuReservation, Reservations
from kai_scheduler.k8s.binder.volume_binding import bind_volumes, mounts_claims
from kai_scheduler.k8s.runtime import events
from kai_scheduler.k8s.runtime.access import Access, access, watching
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    PODS,
    ApiStatusError,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.events import record_event
from kai_scheduler.k8s.runtime.informers import BINDER_KINDS, InformerSet
from kai_scheduler.k8s.runtime.kai_objects import (
    bind_request_is_for,
)
from kai_scheduler.k8s.runtime.objects import metadata_of, object_key
from kai_scheduler.k8s.runtime.workqueue import KeyQueue

log = logging.getLogger(__name__)

# What the binder calls (with reservation pods also `reservations.reservation_access`).
ACCESS: tuple[Access, ...] = (
    *watching(BINDER_KINDS),
    access(PODS, "patch"),  # the GPU labels and annotations, before the bind (and their rollback)
    access(PODS, "create", subresource="binding"),
    access(BIND_REQUESTS, "patch", subresource="status"),
    events.ACCESS,
    *gpu_env.ACCESS,
    *claim_binding.ACCESS,
    *extended_claims.ACCESS,
    *volume_binding.ACCESS,
)

DEFAULT_BACKOFF_LIMIT = 3
SCHEDULED = "Scheduled"  # the pod's event on a bind (kube-scheduler's reason)
FAILED_BINDING = "FailedBinding"  # the pod's event when its BindRequest is given up (KAI's reason)
SUCCEEDED = "Succeeded"
FAILED = "Failed"
PENDING = "Pending"


@dataclass(slots=True)
class BinderStats:
    binds: int = 0  # binding calls that succeeded
    already_bound: int = 0  # requests found done (bound to the node already)
    failures: int = 0  # failed attempts
    failed: int = 0  # requests given up
    outcomes: dict[str, str] = field(default_factory=dict)  # request key -> last phase written


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
        reservation: GpuReservation | None = GpuReservation(),  # noqa: B008 (frozen, so shared safely)
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
        self.reservations = Reservations(client, informers, reservation) if reservation is not None else None
        self._stopping = False
        self.stats = BinderStats()
        self.queue = KeyQueue()
        self._not_before: dict[str, float] = {}
        self._attempts: dict[str, int] = {}
        self._outages: dict[str, int] = {}
        # Requests (key -> uid) whose final outcome this binder wrote: the cache may still show them
        # Pending for a moment, and acting on that would undo a Failed or bind again.
        self._done: dict[str, str] = {}
        # Requests (key -> uid) whose pod's Scheduled event was recorded: an attempt that finds the pod
        # bound already records it only if the bind's own answer was lost.
        self._announced: dict[str, str] = {}
        self._handlers_added = False

    # --- the queue -------------------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def _later(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)

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
            self._announced.pop(key, None)

        self.informers.bind_requests.add_handler(changed, lambda old, new: changed(old, new), gone)

    def resync(self) -> None:
        for key, obj in self.informers.bind_requests.cache.items():
            if (obj.get("status") or {}).get("phase") not in (SUCCEEDED, FAILED):
                self.enqueue(key)

    async def _worker(self) -> None:
        while not self._stopping:
            key = await self.queue.get()
            if self._stopping:
                self.queue.done(key)
                self.queue.add(key)  # for the next term
                break
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("binder: reconciling %s failed", key)
                self._later(key, self.backoff_base)
            finally:
                self.queue.done(key)

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
                    if self.reservations is not None:
                        await self.reservations.sweep()
        finally:
            # Graceful: no new work, the requests in progress finish (bounded), then the workers go.
            self._stopping = True
            self.queue.close()
            deadline = time.monotonic() + self.drain_timeout
            while self.queue.processing and time.monotonic() < deadline:
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
        namespace, pod_name = pod_of(request)
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
        return await get_pod(self.client, namespace, name)

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
        groups = selected_groups(request)
        resource_type = received_type(request)
        received = spec.get("receivedGPU") or {}
        bound_to = (pod.get("spec") or {}).get("nodeName")
        if bound_to == node:
            # An earlier attempt bound it (a lost answer, a lost status update, a restart): make sure the
            # pod has its GPUs (a rollback may have run since) and its claims, and do not bind again.
            await hand_gpus(self.client, self.reservations, request, pod, node, cdi=self.cdi)
            await hand_claims(self.client, request, pod)
            self.stats.already_bound += 1
            await self._scheduled(request, pod, node, resource_type, groups, received)
            return f"pod was bound to {node} already"
        if bound_to:
            raise BindFailure(f"pod is bound to another node ({bound_to})", final=True)
        if metadata_of(pod).get("deletionTimestamp"):
            raise BindFailure("pod is being deleted", final=True)
        await hand_claims(self.client, request, pod)
        if mounts_claims(pod):
            failure = await bind_volumes(self.client, pod, node)
            if failure is not None:
                raise BindFailure(failure)
        annotations: dict[str, str] | None = None
        if shares_gpus(resource_type, groups):
            await hand_gpus(self.client, self.reservations, request, pod, node, cdi=self.cdi)
        else:
            # A whole-GPU (or CPU-only) pod's only hand-over is its annotations (received-resource-type, and
            # its predicted NUMA zones): they ride on the Binding, which the API server copies onto the pod
            # with spec.nodeName (one write instead of two, and nobody sees the pod bound without them).
            annotations = bind_annotations(request, resource_type)
        try:
            await self.client.bind(namespace, pod_name, node, annotations=annotations)
        except ApiStatusError as error:
            if error.code != 409:
                raise
            current = await self._pod(namespace, pod_name)
            if current is not None and (current.get("spec") or {}).get("nodeName") == node:
                self.stats.already_bound += 1
                await self._scheduled(request, current, node, resource_type, groups, received)
                return f"pod was bound to {node} already"
            raise BindFailure(f"binding conflict: {error.message}") from error
        self.stats.binds += 1
        await self._scheduled(request, pod, node, resource_type, groups, received)
        return ""

    async def _scheduled(
        self,
        request: JsonObject,
        pod: JsonObject,
        node: str,
        resource_type: str,
        groups: list[str],
        received: JsonObject,
    ) -> None:
        """The pod's Scheduled event, once per request (as far as this binder remembers)."""
        key, uid = object_key(request), _uid(request)
        if self._announced.get(key) == uid:
            return
        self._announced[key] = uid
        message = scheduled_message(pod, node, resource_type, groups, received)
        await self._event(pod, "Normal", SCHEDULED, message)

    async def _event(self, pod: JsonObject, kind: str, reason: str, message: str) -> None:
        """An event on the pod, reported as the pod's scheduler (the binder binds on its behalf)."""
        component = str((pod.get("spec") or {}).get("schedulerName") or c.SCHEDULER_NAME)
        await record_event(self.client, pod, type=kind, reason=reason, message=message, component=component)

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
            await take_back(
                self.client,
                namespace,
                pod_name,
                request,
                str((request.get("spec") or {}).get("selectedNode")),
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
            pod = self.informers.pods.cache.get(f"{namespace}/{pod_name}")
            if pod is not None and bind_request_is_for(request, pod):  # not for a pod gone or replaced
                node = str((request.get("spec") or {}).get("selectedNode") or "")
                message = f"Failed to bind {namespace}/{pod_name} to {node}: {failure.reason}"
                await self._event(pod, "Warning", FAILED_BINDING, message)
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


def _uid(obj: JsonObject) -> str:
    return str(metadata_of(obj).get("uid") or "")


__all__ = [
    "DEFAULT_BACKOFF_LIMIT",
    "FAILED_BINDING",
    "SCHEDULED",
    "Binder",
    "BinderStats",
]
