"""Resources as the plugin reads and shows them: a pod's GPUs (whole, and its part of each shared GPU),
queue amounts in one unit per resource (GPUs, CPU cores, memory bytes), and their short forms."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.api.objects import Pod, is_unlimited
from kai_scheduler.api.quantity import parse_quantity
from kai_scheduler.model.builder import pod_request
from kai_scheduler.model.resources import gpu_memory_gpus

RESOURCES = ("gpu", "cpu", "memory")
RESOURCE_KEYS = {"gpu": c.GPU_RESOURCE, "cpu": c.CPU_RESOURCE, "memory": c.MEMORY_RESOURCE}
# The Queue spec's units: GPUs, CPU millicores, memory in MB (10^6 bytes), -1 unlimited.
SPEC_SCALE = {"gpu": 1.0, "cpu": 1 / 1000, "memory": float(c.QUEUE_MEMORY_UNIT_BYTES)}
_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


@dataclass(frozen=True, slots=True)
class PodGpus:
    """What a pod holds or asks for: whole GPUs, and a part of each of `devices` shared GPUs (`portion`,
    or `memory_mib` of GPU memory; `groups` the shared GPUs it was given)."""

    whole: int = 0
    portion: float = 0.0
    memory_mib: int = 0
    devices: int = 0
    groups: tuple[str, ...] = ()
    cpu: float = 0.0  # cores
    memory: float = 0.0  # bytes

    def gpus(self, node_gpu_memory_mib: float | None, cluster_gpu_memory_mib: float = 0.0) -> float:
        """In GPUs, as the scheduler counts them: whole GPUs plus the shared parts, a `gpu-memory` part by
        `model.resources.gpu_memory_gpus` (bound to a node of `node_gpu_memory_mib` per GPU, or None: not
        bound, weighed with the cluster's smallest GPU memory)."""
        if self.memory_mib:
            return self.whole + gpu_memory_gpus(
                self.memory_mib, self.devices, node_gpu_memory_mib, cluster_gpu_memory_mib
            )
        return self.whole + self.portion * self.devices


def pod_gpus(raw: Mapping[str, Any]) -> PodGpus | None:
    """None when the pod cannot be read (a malformed annotation: `why` shows the scheduler's words)."""
    try:
        pod = Pod.model_validate(raw)
        request = pod_request(pod)
    except (ValidationError, ValueError, TypeError):
        return None
    return PodGpus(
        whole=request.whole_gpus,
        portion=request.gpu_portion,
        memory_mib=request.gpu_memory_mib,
        devices=request.gpu_devices,
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
