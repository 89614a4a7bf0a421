"""Resources as the plugin reads and shows them: a pod's GPUs (whole, and its part of each shared GPU),
queue amounts in one unit per resource (GPUs, CPU cores, memory bytes), and their short forms."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.gpu_request import SharedGpuRequest
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.api.objects import Pod, is_unlimited
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.model.builder import pod_request

RESOURCES = ("gpu", "cpu", "memory")
RESOURCE_KEYS = {"gpu": c.GPU_RESOURCE, "cpu": c.CPU_RESOURCE, "memory": c.MEMORY_RESOURCE}
# The Queue spec's units: GPUs, CPU millicores, memory in MB (10^6 bytes), -1 unlimited.
SPEC_SCALE = {"gpu": 1.0, "cpu": 1 / 1000, "memory": float(c.QUEUE_MEMORY_UNIT_BYTES)}
_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


@dataclass(frozen=True, slots=True)
class PodGpus:
    """What a pod holds or asks for: whole GPUs, and a part of each of some shared GPUs (`shared`, the
    request as `api.gpu_request` reads it; `groups` the shared GPUs it was given)."""

    whole: int = 0
    shared: SharedGpuRequest | None = None
    groups: tuple[str, ...] = ()
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes

    def gpus(self, node_gpu_memory_mib: float | None, cluster_gpu_memory_mib: float = 0.0) -> float:
        """In GPUs, as the scheduler counts them: whole GPUs plus `SharedGpuRequest.queue_gpus` (bound to a
        node of `node_gpu_memory_mib` per GPU, or None: not bound, weighed with `cluster_gpu_memory_mib`)."""
        if self.shared is None:
            return float(self.whole)
        return self.whole + self.shared.queue_gpus(node_gpu_memory_mib, cluster_gpu_memory_mib)


def pod_gpus(raw: Mapping[str, Any]) -> PodGpus | None:
    """None when the pod cannot be read (a malformed annotation: `why` shows the scheduler's words)."""
    try:
        pod = Pod.model_validate(raw)
        request = pod_request(pod)
    except (ValidationError, ValueError, TypeError):
        return None
    return PodGpus(
        whole=request.whole_gpus,
        shared=request.shared_gpu,
        groups=pod_gpu_groups(pod.metadata.labels),
        cpu=request.cpu / 1000,
        memory=request.memory,
    )


def resource_list(resources: Any) -> dict[str, float]:
    """A status resource list (`allocated`, `fairShare`, ...) in GPUs, cores and bytes; unreadable or
    missing amounts are left out."""
    out: dict[str, float] = {}
    if not isinstance(resources, Mapping):
        return out
    for resource, key in RESOURCE_KEYS.items():
        if key in resources:
            try:
                out[resource] = float(parse_quantity(resources[key]))
            except ValueError:
                continue
    return out


def spec_amount(queue: Mapping[str, Any], resource: str, field: str) -> float | None:
    """A Queue spec's quota or limit in GPUs, cores or bytes; None when unlimited (-1) or not readable.
    A field left out is 0, as KAI reads it."""
    value = (((queue.get("spec") or {}).get("resources") or {}).get(resource) or {}).get(field, 0)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if is_unlimited(number) else number * SPEC_SCALE[resource]


def show(resource: str, amount: float | None) -> str:
    """The short form of an amount: GPUs to two decimals, cores to millicores, memory in binary units."""
    if amount is None:
        return "unlimited"
    if resource == "memory":
        for suffix, size in _BINARY:
            if abs(amount) >= size:
                return f"{amount / size:.1f}".removesuffix(".0") + suffix
        return str(round(amount))
    if resource == "cpu" and not math.isclose(amount, round(amount)) and abs(amount) < 10:
        return f"{round(amount * 1000)}m"
    return f"{amount:.2f}".rstrip("0").rstrip(".") or "0"


__all__ = ["RESOURCES", "PodGpus", "pod_gpus", "resource_list", "show", "spec_amount"]
