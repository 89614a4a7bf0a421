"""GPU reservation pods (KAI's `resourcereservation`; binder.py's module doc): one pod per shared GPU
group, pinned to its node, whose app publishes the GPU's UUID; swept once no pod holds the group. The
reservation namespace and the binder's Role in it are the chart's (the binder does not create namespaces):
without them, creating the pod fails the bind, saying so."""

from __future__ import annotations

import asyncio
import logging
import secrets
import string
import time
from dataclasses import dataclass

from kai_scheduler import __version__
from kai_scheduler.api import constants as c
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.k8s.binder.errors import BindFailure
from kai_scheduler.k8s.runtime.access import Access, access
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.kai_objects import RESERVATION_APP, bind_request_is_for, bind_request_succeeded
from kai_scheduler.k8s.runtime.objects import annotations_of, metadata_of

log = logging.getLogger(__name__)

SUCCEEDED = "Succeeded"
FAILED = "Failed"
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


def reservation_access(settings: GpuReservation) -> tuple[Access, ...]:
    """The reservation pods, in their namespace only: found by label, created, polled, swept."""
    return (access(PODS, "list", "create", "get", "delete", namespace=settings.namespace),)


def _field_env(name: str, path: str) -> JsonObject:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


class Reservations:
    """The reservation pods of the shared GPUs the binder hands out, as `settings` says."""

    def __init__(self, client: KubeClient, informers: InformerSet, settings: GpuReservation) -> None:
        self.client = client
        self.informers = informers
        self.settings = settings
        self._reserving: dict[str, int] = {}  # GPU group -> reconciles reserving it now (not swept)
        self._reservation_locks: dict[str, asyncio.Lock] = {}

    async def reserve_all(self, node: str, groups: list[str]) -> list[str]:
        """Each group's GPU UUID, from its reservation pod (made if missing); the groups are not swept
        meanwhile."""
        for group in groups:
            self._reserving[group] = self._reserving.get(group, 0) + 1
        try:
            return [await self._reserve(node, group) for group in groups]
        finally:
            for group in groups:
                left = self._reserving.get(group, 1) - 1
                if left > 0:
                    self._reserving[group] = left
                else:
                    self._reserving.pop(group, None)
                    self._reservation_locks.pop(group, None)

    async def _find(self, group: str) -> JsonObject | None:
        pods, _ = await self.client.list_objects(
            PODS, self.settings.namespace, label_selector=f"{c.GPU_GROUP_LABEL}={group}"
        )
        live = [p for p in pods if not metadata_of(p).get("deletionTimestamp")]
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

    async def _reserve(self, node: str, group: str) -> str:
        """Make sure `group` has a reservation pod and return the GPU UUID it publishes (or the group id
        with `timeout=0` when it has not published yet)."""
        # Pods sharing a GPU are bound concurrently: one at a time finds or creates its reservation pod,
        # so that a GPU never gets two.
        async with self._reservation_locks.setdefault(group, asyncio.Lock()):
            reservation = await self._find(group)
            if reservation is None:
                body = self.reservation_pod(self.settings, node, group)
                try:
                    reservation = await self.client.create(PODS, body)
                except ApiStatusError as error:
                    # 404: no namespace; 403: no Role there (deleting the namespace deletes it too).
                    # The chart makes both, with the reservation flags: say so rather than retry.
                    if error.code in (403, 404):
                        raise BindFailure(
                            f"cannot create the reservation pod for GPU group {group} in namespace "
                            f"{self.settings.namespace} (the chart makes the namespace and the binder's Role "
                            f"there, see resourceReservation.namespace): {error}"
                        ) from error
                    if error.code != 409:
                        raise
                    reservation = body
        name = str(reservation["metadata"]["name"])
        where = f"{self.settings.namespace}/{name}"
        deadline = time.monotonic() + self.settings.timeout
        while True:
            annotations = annotations_of(reservation)
            published = annotations.get(RESERVED_GPU_ANNOTATION)
            if published:
                return str(published)
            if self.settings.timeout <= 0:
                return group
            if time.monotonic() >= deadline:
                raise BindFailure(
                    f"reservation pod {where} for GPU group {group} did not publish "
                    f"{RESERVED_GPU_ANNOTATION} within {self.settings.timeout:g}s"
                )
            await asyncio.sleep(min(RESERVATION_POLL_INTERVAL, max(deadline - time.monotonic(), 0.0)))
            try:
                reservation = await self.client.get(PODS, name, self.settings.namespace)
            except ApiStatusError as error:
                if error.code != 404:
                    raise
                raise BindFailure(f"reservation pod {where} vanished") from error

    def groups_in_use(self) -> set[str]:
        """GPU groups held by a non-terminal pod (outside the reservation namespace), selected by a
        BindRequest neither Failed nor done (KAI's `hasActiveBindRequestsForGpuGroup`) of a pod that still
        exists (its labels may lag in the cache), or being reserved right now."""
        used = set(self._reserving)
        pods = self.informers.pods.cache
        for obj in pods.values():
            meta = metadata_of(obj)
            if meta.get("namespace") == self.settings.namespace:
                continue
            if (obj.get("status") or {}).get("phase") in (SUCCEEDED, FAILED):
                continue
            used.update(pod_gpu_groups(meta.get("labels") or {}))
        for request in self.informers.bind_requests.cache.values():
            if (request.get("status") or {}).get("phase") == FAILED:
                continue
            spec = request.get("spec") or {}
            meta = metadata_of(request)
            pod = pods.get(f"{meta.get('namespace') or 'default'}/{spec.get('podName') or meta.get('name')}")
            # A done request's pod holds its groups by its labels (written before the bind), while it runs.
            if pod is None or not bind_request_is_for(request, pod) or bind_request_succeeded(request, pod):
                continue
            used.update(str(g) for g in spec.get("selectedGPUGroups") or [])
        return used

    async def sweep(self) -> None:
        """Delete the reservation pods of GPU groups no pod holds any more."""
        try:
            pods, _ = await self.client.list_objects(
                PODS,
                self.settings.namespace,
                label_selector=f"{RESERVATION_APP_LABEL}={RESERVATION_APP}",
            )
            used = self.groups_in_use()
            for obj in pods:
                meta = metadata_of(obj)
                group = (meta.get("labels") or {}).get(c.GPU_GROUP_LABEL)
                if group in used or meta.get("deletionTimestamp"):
                    continue
                log.info("binder: GPU group %s is free: deleting reservation pod %s", group, meta.get("name"))
                try:
                    await self.client.delete(PODS, str(meta["name"]), self.settings.namespace)
                except ApiStatusError as error:
                    if error.code != 404:
                        raise
        except (ApiStatusError, ConnectionError, OSError) as error:
            log.warning("binder: sweeping reservation pods: %s", error)


__all__ = [
    "DEFAULT_RESERVATION_IMAGE",
    "DEFAULT_RESERVATION_NAMESPACE",
    "DEFAULT_RESERVATION_SERVICE_ACCOUNT",
    "DEFAULT_RESERVATION_TIMEOUT",
    "RESERVED_GPU_ANNOTATION",
    "GpuReservation",
    "Reservations",
    "reservation_access",
]
