"""`Binder`: carries out the scheduler's BindRequests, as KAI's binder does.

For each BindRequest (scheduling.run.ai/v1alpha2) that is not done (`kai_objects.bind_request_succeeded`:
phase Succeeded, or its pod bound to its selected node) and not Failed:

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
   a failure in the BindRequest's status (`phase`, `reason`, `failedAttempts`). A success is not written
   (issue #23; KAI's binder writes phase Succeeded): the pod's `spec.nodeName` already says it, and every
   reader takes a request whose pod is bound to its selected node as succeeded; only a request whose
   status shows an earlier failed attempt gets `Succeeded` written, so that it does not keep showing the
   failure. A failed attempt
   removes the GPU labels and deletes the extended-resource claim again (KAI's rollback) and is retried
   after `1 << failedAttempts` seconds (times `backoff_base`, which tests scale down) while
   `failedAttempts < backoffLimit`; then the request
   is Failed (unless the pod turns out bound after all) and the scheduler will place the pod anew. When
   the API server cannot be reached, the outcome is unknown and nothing can be recorded: that is retried
   with backoff without counting as an attempt.

The binder is a `runtime.reconciler.Reconciler`: requests are processed by `concurrency` workers from its
work queue, fed by the BindRequest informer (a request is never processed by two workers at once) and by a
periodic resync; a failed attempt and an unreachable API server are its `TemporaryError`s, held back for
their delay even when the status the attempt wrote comes back as an event. On stop, requests in progress
finish (up to `drain_timeout` seconds) before the workers go.

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
import logging
from collections.abc import Iterator
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
from kai_scheduler.k8s.runtime.backoff import Backoff
from kai_scheduler.k8s.runtime.client import (
    BIND_REQUESTS,
    PODS,
    ApiStatusError,
    JsonObject,
    KubeClient,
)
from kai_scheduler.k8s.runtime.events import record_event
from kai_scheduler.k8s.runtime.informers import BINDER_KINDS, InformerSet
from kai_scheduler.k8s.runtime.kai_objects import bind_request_is_for, bind_request_succeeded
from kai_scheduler.k8s.runtime.objects import metadata_of, object_key
from kai_scheduler.k8s.runtime.reconciler import Reconciler, Result, TemporaryError

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
    # request key -> its last outcome: the phase written, or Succeeded (kept here only: not written)
    outcomes: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Request:
    """What the binder remembers of one BindRequest between its attempts."""

    uid: str  # the request it is about: a new request of the same name starts afresh
    attempts: int = 0  # failed attempts (the status's failedAttempts may not show the latest yet)
    outages: int = 0  # attempts in a row that could not reach the API server
    # The uid of the request whose final outcome this binder wrote: the cache may still show it Pending
    # for a moment, and acting on that would undo a Failed or bind again.
    done: str | None = None
    # The uid of the request whose pod's Scheduled event was recorded: an attempt that finds the pod
    # bound already records it only if the bind's own answer was lost.
    announced: str | None = None


class Binder(Reconciler):
    """See the module doc. `informers` must include pods and bind requests (started by the caller)."""

    name = "binder"
    controller = "bindrequest"

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
        # An attempt that fails unexpectedly (a bug) is retried after `backoff_base`, not a growing delay:
        # its failed attempts and outages have delays of their own (the module doc).
        steady = Backoff(initial=backoff_base, maximum=backoff_base, factor=1.0, jitter=0.0)
        super().__init__(
            workers=concurrency, resync_period=resync_period, backoff=steady, drain_timeout=drain_timeout
        )
        self.client = client
        self.informers = informers
        self.backoff_base = backoff_base
        self.reservation = reservation
        # KAI's --cdi-enabled: name the GPU as a CDI device (the device plugin's CDI spec) rather than by
        # its bare UUID in NVIDIA_VISIBLE_DEVICES.
        self.cdi = cdi
        self.reservations = Reservations(client, informers, reservation) if reservation is not None else None
        self.stats = BinderStats()
        self._requests: dict[str, _Request] = {}
        self._handlers_added = False

    # --- the queue -------------------------------------------------------------------------------

    def _request(self, request: JsonObject) -> _Request:
        """The memory of `request`, by name and uid: a request deleted and made again under its name (the
        scheduler's next try after a Failed one) may reach the cache as a replacement, with no deletion
        seen in between, and must not inherit the old one's failed attempts."""
        key, uid = object_key(request), _uid(request)
        record = self._requests.get(key)
        if record is None or record.uid != uid:
            record = self._requests[key] = _Request(uid)
        return record

    def forget(self, key: str) -> None:
        super().forget(key)
        self._requests.pop(key, None)

    def _watch_requests(self) -> None:
        if self._handlers_added:
            return
        self._handlers_added = True

        def changed(obj: JsonObject, new: JsonObject | None = None) -> None:
            current = new if new is not None else obj
            if self._outstanding(current):
                self.enqueue(object_key(current))

        def gone(obj: JsonObject) -> None:
            self.forget(object_key(obj))

        self.informers.bind_requests.add_handler(changed, lambda old, new: changed(old, new), gone)

    def keys(self) -> Iterator[str]:
        for key, obj in self.informers.bind_requests.cache.items():
            if self._outstanding(obj):
                yield key

    def _outstanding(self, request: JsonObject) -> bool:
        """Neither Failed nor done (as far as the caches show): worth an attempt."""
        if (request.get("status") or {}).get("phase") == FAILED:
            return False
        namespace, pod_name = pod_of(request)
        return not bind_request_succeeded(request, self.informers.pods.cache.get(f"{namespace}/{pod_name}"))

    async def start(self, stop: asyncio.Event) -> bool:
        del stop
        self._watch_requests()
        await self.informers.wait_synced()
        return True

    async def on_resync(self) -> None:
        if self.reservations is not None:
            await self.reservations.sweep()

    # --- one request -----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result | None:
        request = self.informers.bind_requests.cache.get(key)
        if request is None:
            return None
        status = request.get("status") or {}
        if status.get("phase") in (SUCCEEDED, FAILED):
            return None
        record = self._request(request)
        if record.done == _uid(request):
            return None
        spec = request.get("spec") or {}
        namespace, pod_name = pod_of(request)
        node = str(spec.get("selectedNode") or "")
        raw_limit = spec.get("backoffLimit")
        limit = int(raw_limit) if isinstance(raw_limit, int) else DEFAULT_BACKOFF_LIMIT
        attempts = max(int(status.get("failedAttempts") or 0), record.attempts)
        try:
            if not node:
                raise BindFailure("the BindRequest names no selectedNode", final=True)
            outcome = await self._bind(request, namespace, pod_name, node)
        except BindFailure as failure:
            return await self._failed(record, request, namespace, pod_name, attempts, limit, failure)
        except ApiStatusError as error:
            refused = BindFailure(str(error))
            return await self._failed(record, request, namespace, pod_name, attempts, limit, refused)
        except (ConnectionError, OSError) as error:
            raise self._unreachable(record, error) from error
        record.attempts = record.outages = 0
        if not status.get("phase"):
            # Nothing to correct: the bound pod says it succeeded (the module doc).
            self.stats.outcomes[key] = SUCCEEDED
            record.done = _uid(request)
            return None
        return await self._set_status(request, SUCCEEDED, outcome, attempts)

    def _unreachable(self, record: _Request, error: BaseException) -> TemporaryError:
        """The API server could not be reached: not an attempt that counts towards `backoffLimit` (its
        outcome is unknown, and no status could be written anyway); retried with backoff (at most 32 x
        `backoff_base`), and the next attempt finds out what happened."""
        record.outages += 1
        delay = self.backoff_base * (1 << min(record.outages, 5))
        return TemporaryError(f"API server unreachable ({error})", delay=delay)

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
        record, uid = self._request(request), _uid(request)
        if record.announced == uid:
            return
        record.announced = uid
        message = scheduled_message(pod, node, resource_type, groups, received)
        await self._event(pod, "Normal", SCHEDULED, message)

    async def _event(self, pod: JsonObject, kind: str, reason: str, message: str) -> None:
        """An event on the pod, reported as the pod's scheduler (the binder binds on its behalf)."""
        component = str((pod.get("spec") or {}).get("schedulerName") or c.SCHEDULER_NAME)
        await record_event(self.client, pod, type=kind, reason=reason, message=message, component=component)

    async def _failed(
        self,
        record: _Request,
        request: JsonObject,
        namespace: str,
        pod_name: str,
        attempts: int,
        limit: int,
        failure: BindFailure,
    ) -> Result | None:
        """Record a failed attempt: retried (a `TemporaryError` after `1 << attempts` x `backoff_base`)
        or, at `limit` or when it cannot succeed, given up."""
        key = object_key(request)
        attempts += 1
        self.stats.failures += 1
        record.attempts = attempts
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
                raise self._unreachable(record, error) from error
            node = str((request.get("spec") or {}).get("selectedNode"))
            if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
                self.enqueue(key)  # bound: the next attempt records the success
                return None
        if not give_up:
            delay = self.backoff_base * (1 << attempts)
            await self._set_status(request, PENDING, failure.reason, attempts)
            raise TemporaryError(f"attempt {attempts}/{limit} failed: {failure.reason}", delay=delay)
        log.info("binder: %s attempt %d/%d failed: %s (giving up)", key, attempts, limit, failure.reason)
        self.stats.failed += 1
        result = await self._set_status(request, FAILED, failure.reason, attempts)
        pod = self.informers.pods.cache.get(f"{namespace}/{pod_name}")
        if pod is not None and bind_request_is_for(request, pod):  # not for a pod gone or replaced
            node = str((request.get("spec") or {}).get("selectedNode") or "")
            message = f"Failed to bind {namespace}/{pod_name} to {node}: {failure.reason}"
            await self._event(pod, "Warning", FAILED_BINDING, message)
        return result

    async def _set_status(self, request: JsonObject, phase: str, reason: str, attempts: int) -> Result | None:
        """Write the outcome; when a final one could not be written, look again after `backoff_base`."""
        key, meta = object_key(request), request["metadata"]
        status = {"phase": phase, "reason": reason, "failedAttempts": attempts}
        self.stats.outcomes[key] = phase
        record = self._request(request)
        if phase != PENDING:
            record.done = _uid(request)
        try:
            await self.client.patch(
                BIND_REQUESTS, meta["name"], {"status": status}, meta.get("namespace"), subresource="status"
            )
        except (ApiStatusError, ConnectionError, OSError) as error:
            # The outcome stays in memory; the next reconcile finds the pod bound (a success) or retries.
            log.warning("binder: could not record %s on %s: %s", phase, key, error)
            if phase != PENDING:
                record.done = None
                return Result(requeue_after=self.backoff_base)
        return None


def _uid(obj: JsonObject) -> str:
    return str(metadata_of(obj).get("uid") or "")


__all__ = [
    "DEFAULT_BACKOFF_LIMIT",
    "FAILED_BINDING",
    "SCHEDULED",
    "Binder",
    "BinderStats",
]
