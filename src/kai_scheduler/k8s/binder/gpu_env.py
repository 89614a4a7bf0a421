"""The GPU environment of a shared-GPU pod (KAI's gpusharing PreBind; binder.py's module doc): the
ConfigMaps its container refers to, with `NVIDIA_VISIBLE_DEVICES`, `GPU_PORTION` and `RUNAI_NUM_OF_GPUS`,
owned by the pod and written before it is bound."""

from __future__ import annotations

from kai_scheduler.api import constants as c
from kai_scheduler.api.manifests import InvalidField
from kai_scheduler.k8s.binder.errors import BindFailure
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import CONFIG_MAPS, PODS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.kai_objects import fraction_container_index, shared_gpu_config_maps
from kai_scheduler.k8s.runtime.objects import metadata_of

# A pod read afresh (the cache may lag; the owner of a ConfigMap taken over), and the ConfigMaps of its
# GPU environment: created, read back after a 409, taken over.
ACCESS = (access(PODS, "get"), access(CONFIG_MAPS, "create", "get", "patch"))

GPU_CONFIGMAP_SUFFIX = "-gpu"
VISIBLE_DEVICES = c.NVIDIA_VISIBLE_DEVICES_ENV
CDI_GPU_KIND = "k8s.device-plugin.nvidia.com/gpu"  # the NVIDIA device plugin's CDI device kind
GPU_PORTION = c.GPU_PORTION_ENV
NUM_OF_GPUS = c.NUM_OF_GPUS_ENV
SUCCEEDED = "Succeeded"
FAILED = "Failed"


async def get_pod(client: KubeClient, namespace: str, name: str) -> JsonObject | None:
    """The pod, or None when it does not exist."""
    try:
        return await client.get(PODS, name, namespace)
    except ApiStatusError as error:
        if error.code == 404:
            return None
        raise


async def write_gpu_config_maps(
    client: KubeClient,
    pod: JsonObject,
    namespace: str,
    pod_name: str,
    groups: list[str],
    received: JsonObject,
    *,
    cdi: bool,
) -> None:
    """The GPU environment of a shared-GPU pod (its devices `groups`, what it `received`), in the
    ConfigMaps its container refers to (`cdi`: devices named as CDI devices)."""
    portion = str(received.get("portion") or "0.00")
    try:
        count = int(received.get("count") or len(groups))
        total = f"{count * float(portion):.2f}"
    except ValueError:
        total = portion
    devices = [f"{CDI_GPU_KIND}={device}" for device in groups] if cdi else groups
    data = {VISIBLE_DEVICES: ",".join(devices), GPU_PORTION: portion, NUM_OF_GPUS: total}
    meta = metadata_of(pod)
    prefix = (meta.get("annotations") or {}).get(c.SHARED_GPU_CONFIGMAP_ANNOTATION)
    if not prefix:
        # Admission off: the name the pod's manifest must refer to itself.
        await _upsert_config_map(client, pod, namespace, pod_name, f"{pod_name}{GPU_CONFIGMAP_SUFFIX}", data)
        return
    try:
        index = fraction_container_index(pod)
    except InvalidField as problem:  # the webhook refuses such a pod; the annotation changed since
        raise BindFailure(f"{problem.field}: {problem.message}") from problem
    capabilities, direct = shared_gpu_config_maps(str(prefix), index)
    await _upsert_config_map(client, pod, namespace, pod_name, capabilities, data)
    await _upsert_config_map(client, pod, namespace, pod_name, direct, {GPU_PORTION: portion})


async def _upsert_config_map(
    client: KubeClient, pod: JsonObject, namespace: str, pod_name: str, name: str, data: dict[str, str]
) -> None:
    """Create the ConfigMap `name`, owned by the pod, with `data`; one that exists (an earlier attempt,
    an earlier pod of this name) is taken over, unless it belongs to another pod that has not finished."""
    uid = metadata_of(pod).get("uid", "")
    owners = [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid}]
    body: JsonObject = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners},
        "data": data,
    }
    try:
        await client.create(CONFIG_MAPS, body)
        return
    except ApiStatusError as error:
        if error.code != 409:
            raise
    try:
        existing = await client.get(CONFIG_MAPS, name, namespace)
    except ApiStatusError as error:
        if error.code != 404:
            raise
        await client.create(CONFIG_MAPS, body)  # gone meanwhile
        return
    for ref in metadata_of(existing).get("ownerReferences") or []:
        if ref.get("kind") != "Pod" or ref.get("uid") == uid or not ref.get("name"):
            continue
        other = await get_pod(client, namespace, str(ref["name"]))
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
    await client.patch(CONFIG_MAPS, name, {"metadata": {"ownerReferences": owners}, "data": data}, namespace)


__all__ = [
    "CDI_GPU_KIND",
    "GPU_CONFIGMAP_SUFFIX",
    "GPU_PORTION",
    "NUM_OF_GPUS",
    "VISIBLE_DEVICES",
    "get_pod",
    "write_gpu_config_maps",
]
