"""The mutation of a GPU-sharing pod (`gpu-fraction` or `gpu-memory`), KAI's admission `gpusharing`
plugin, and the GPU runtime class of GPU pods (`review_pod_mutation` in `review.py` applies them).

The container named by `gpu-fraction-container-name` (default: the first of `spec.containers`; init
containers are never targets) gets its GPU's environment from two ConfigMaps that the binder writes before
it binds the pod (see `runtime.kai_objects.shared_gpu_config_maps`). Their name prefix is chosen here,
where a pod created from `generateName` has no name yet, and kept in the annotation
`runai/shared-gpu-configmap`. The kubelet waits for a referenced ConfigMap, so the container starts with
`NVIDIA_VISIBLE_DEVICES`, `RUNAI_NUM_OF_GPUS` and `GPU_PORTION` set."""

from __future__ import annotations

import re
import secrets
import string
from collections.abc import Mapping
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.gpu_request import asks_for_shared_gpu
from kai_scheduler.api.manifests import (
    InvalidField,
    short_repr,
)
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.k8s.runtime.kai_objects import fraction_container_index, shared_gpu_config_maps

# A ConfigMap name (DNS-1123 subdomain) and its length limit.
_CONFIG_MAP_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


_MAX_OBJECT_NAME = 253


# KAI's generated prefix: `<pod name or generateName>-<7 random chars>`, the base cut (to 50) so that
# `<prefix>-<container index>` stays within a DNS label (63), as KAI keeps it usable as a volume name.
_PREFIX_RANDOM_CHARS = 7


_PREFIX_MAX_BASE = 63 - _PREFIX_RANDOM_CHARS - 6


_PREFIX_CHARS = string.ascii_lowercase + string.digits


def uses_gpu_sharing(obj: Mapping[str, Any]) -> bool:
    """Whether a pod asks for a shared GPU (`gpu-fraction` or `gpu-memory`)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and asks_for_shared_gpu(annotations)


def gpu_sharing_patch(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch that gives a GPU-sharing pod's target container its shared-GPU environment (none for
    other pods, or when it has it already)."""
    containers = spec.get("containers")
    if not uses_gpu_sharing(obj) or not isinstance(containers, list) or not containers:
        return []  # a pod without containers: the API server refuses it
    index = fraction_container_index(obj)
    container = containers[index]
    if not isinstance(container, dict):
        return []  # not a container: the API server refuses the pod
    metadata = obj["metadata"]
    annotations = metadata["annotations"]
    patch: list[dict[str, Any]] = []
    prefix = annotations.get(c.SHARED_GPU_CONFIGMAP_ANNOTATION)
    if prefix is None or prefix == "":
        prefix = _new_config_map_prefix(metadata)
        key = c.SHARED_GPU_CONFIGMAP_ANNOTATION.replace("~", "~0").replace("/", "~1")
        patch.append({"op": "add", "path": f"/metadata/annotations/{key}", "value": prefix})
    capabilities, direct = shared_gpu_config_maps(_checked_prefix(prefix, index), index)

    def from_key(name: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"configMapKeyRef": {"name": capabilities, "key": name}}}

    env = container.get("env")
    env = env if isinstance(env, list) else []
    wanted_env = _with_env(env, [from_key(c.NVIDIA_VISIBLE_DEVICES_ENV), from_key(c.NUM_OF_GPUS_ENV)])
    if wanted_env != env:
        # `add` on a member that exists replaces it: the whole list, as the pod was sent.
        patch.append({"op": "add", "path": f"/spec/containers/{index}/env", "value": wanted_env})
    env_from = container.get("envFrom")
    env_from = env_from if isinstance(env_from, list) else []
    if not any(
        isinstance(source, dict)
        and isinstance(source.get("configMapRef"), dict)
        and source["configMapRef"].get("name") == direct
        for source in env_from
    ):
        patch.append(
            {
                "op": "add",
                "path": f"/spec/containers/{index}/envFrom",
                "value": [*env_from, {"configMapRef": {"name": direct}}],
            }
        )
    return patch


def _with_env(env: list[Any], wanted: list[dict[str, Any]]) -> list[Any]:
    """`env` with each wanted entry in place of the entries of its name (kept where the first one was), or
    appended."""
    result = list(env)
    for entry in wanted:
        positions = [
            i for i, item in enumerate(result) if isinstance(item, dict) and item.get("name") == entry["name"]
        ]
        if not positions:
            result.append(entry)
            continue
        result[positions[0]] = entry
        for i in reversed(positions[1:]):
            del result[i]
    return result


def _new_config_map_prefix(metadata: Mapping[str, Any]) -> str:
    """`<base>-<7 random chars>`, the base being the pod's name, or its `generateName` (a pod created from
    one has no name yet at admission), made a DNS label and cut to keep the names short (KAI's scheme)."""
    base = ""
    for key in ("name", "generateName"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            base = value
            break
    base = re.sub(r"[^a-z0-9-]+", "-", base.lower())[:_PREFIX_MAX_BASE].strip("-") or "pod"
    suffix = "".join(secrets.choice(_PREFIX_CHARS) for _ in range(_PREFIX_RANDOM_CHARS))
    return f"{base}-{suffix}"


def _checked_prefix(prefix: Any, index: int) -> str:
    """A given `runai/shared-gpu-configmap` (a re-admitted pod, or the user's own) must make ConfigMap
    names: refusing it here beats a binder that can never write the ConfigMaps."""
    longest = f"-{index}{c.SHARED_GPU_ENV_CONFIGMAP_SUFFIX}"
    if (
        isinstance(prefix, str)
        and _CONFIG_MAP_NAME.fullmatch(prefix)
        and len(prefix) + len(longest) <= _MAX_OBJECT_NAME
    ):
        return prefix
    raise InvalidField(
        f"metadata.annotations.{c.SHARED_GPU_CONFIGMAP_ANNOTATION}",
        f"{short_repr(prefix)} cannot prefix a ConfigMap name: lowercase letters, digits, '-' and '.', "
        f"starting and ending with a letter or digit, at most {_MAX_OBJECT_NAME - len(longest)} characters; "
        "leave the annotation out and the webhook picks one",
    )


def uses_gpus(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """Whole GPUs, MIG instances (requests or limits of any container), or a shared GPU (annotations)."""
    if uses_gpu_sharing(obj):
        return True
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        for container in containers:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for section in ("limits", "requests"):
                amounts = resources.get(section)
                if isinstance(amounts, dict) and any(
                    _is_gpu_resource(name) and _positive(amount) for name, amount in amounts.items()
                ):
                    return True
    return False


def _is_gpu_resource(name: Any) -> bool:
    return isinstance(name, str) and (name == c.GPU_RESOURCE or name.startswith(c.MIG_RESOURCE_PREFIX))


def _positive(amount: Any) -> bool:
    try:
        return parse_quantity(amount) > 0
    except ValueError:
        return False  # not a quantity: the API server's validation refuses the pod


__all__ = ["gpu_sharing_patch", "uses_gpu_sharing", "uses_gpus"]
