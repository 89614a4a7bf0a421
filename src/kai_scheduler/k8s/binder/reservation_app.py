"""`kai-scheduler reserve`: the app inside a GPU reservation pod (KAI's `resourcereservation`).

For every shared GPU the binder creates a reservation pod that asks for `nvidia.com/gpu: 1`, so the device
plugin hands it one physical GPU and no other pod can get that GPU. This app learns which GPU that is, its
UUID through NVML, and publishes it in its own pod's annotation `run.ai/reserve_for_gpu_index`. The binder
waits for that annotation and gives the UUID to the pods that share the GPU (`NVIDIA_VISIBLE_DEVICES`).
Then the app idles until it is stopped: the pod holds the GPU for as long as it runs.

NVML needs the driver's library, which the `nvidia` runtime class mounts into the container. Without it
(no library at all), the GPU the device plugin gave the container is read from `NVIDIA_VISIBLE_DEVICES`
when that names exactly one GPU by UUID; anything else is an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from types import ModuleType

from kai_scheduler.api import constants as c
from kai_scheduler.k8s.runtime.access import Access, access
from kai_scheduler.k8s.runtime.backoff import Backoff
from kai_scheduler.k8s.runtime.client import PODS, ApiStatusError, KubeClient

log = logging.getLogger(__name__)


def reservation_app_access(namespace: str) -> tuple[Access, ...]:
    """What `kai-scheduler reserve` calls, as the reservation pods' ServiceAccount: it annotates its own pod
    (whose generated name a role cannot name) in the reservation namespace."""
    return (access(PODS, "patch", namespace=namespace),)


VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
# How the device plugin names a whole GPU or a MIG instance in NVIDIA_VISIBLE_DEVICES.
_UUID_PREFIXES = ("GPU-", "MIG-")
# API errors that retrying cannot fix: the pod is gone, or this service account may not patch it.
_FATAL_CODES = frozenset({401, 403, 404})


class GpuDiscoveryError(Exception):
    """The reservation pod cannot tell which GPU it was given."""


def discover_gpu_uuid(environment: Mapping[str, str], nvml: ModuleType | None = None) -> str:
    """The UUID of the one GPU this container was given: through NVML, or, when the NVML library is not
    there at all, from `NVIDIA_VISIBLE_DEVICES`."""
    if nvml is None:
        import pynvml

        nvml = pynvml
    try:
        return _uuid_through_nvml(nvml)
    except nvml.NVMLError as error:
        if error.value != nvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise GpuDiscoveryError(f"NVML: {error}") from None
        from_environment = _uuid_from_environment(environment)
        if from_environment is None:
            raise GpuDiscoveryError(
                f"NVML: {error}, and {VISIBLE_DEVICES_ENV}={environment.get(VISIBLE_DEVICES_ENV, '')!r} "
                "does not name exactly one GPU by UUID (is the pod's runtime class nvidia?)"
            ) from None
        return from_environment


def _uuid_through_nvml(nvml: ModuleType) -> str:
    nvml.nvmlInit()
    try:
        count = int(nvml.nvmlDeviceGetCount())
        if count != 1:
            raise GpuDiscoveryError(f"NVML sees {count} GPUs; a reservation pod must be given exactly one")
        uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        nvml.nvmlShutdown()
    return uuid.decode() if isinstance(uuid, bytes) else str(uuid)


def _uuid_from_environment(environment: Mapping[str, str]) -> str | None:
    devices = [d.strip() for d in environment.get(VISIBLE_DEVICES_ENV, "").split(",") if d.strip()]
    if len(devices) == 1 and devices[0].startswith(_UUID_PREFIXES):
        return devices[0]
    return None


async def publish_gpu(
    client: KubeClient,
    namespace: str,
    pod: str,
    uuid: str,
    stop: asyncio.Event,
    *,
    backoff: Backoff | None = None,
) -> bool:
    """Annotate the reservation pod with its GPU's UUID; retry with backoff while the API server cannot
    be reached or answers with a passing error. False when `stop` came first; raises ApiStatusError when
    retrying cannot help (the pod is gone, or this service account may not patch it)."""
    backoff = backoff or Backoff()
    patch = {"metadata": {"annotations": {c.RESERVED_GPU_ANNOTATION: uuid}}}
    attempt = 0
    while not stop.is_set():
        try:
            await client.patch(PODS, pod, patch, namespace)
            return True
        except ApiStatusError as error:
            if error.code in _FATAL_CODES:
                raise
            problem = str(error)
        except (ConnectionError, OSError) as error:
            problem = str(error) or type(error).__name__
        delay = backoff.delay(attempt)
        attempt += 1
        log.warning(
            "publishing GPU %s on pod %s/%s failed (%s); retrying in %.1fs",
            uuid,
            namespace,
            pod,
            problem,
            delay,
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
    return False


async def run_reservation(
    client: KubeClient,
    namespace: str,
    pod: str,
    uuid: str,
    stop: asyncio.Event,
    *,
    backoff: Backoff | None = None,
) -> None:
    """Publish the GPU, then hold it (idle) until `stop` is set."""
    if await publish_gpu(client, namespace, pod, uuid, stop, backoff=backoff):
        log.info("pod %s/%s holds GPU %s", namespace, pod, uuid)
    await stop.wait()
