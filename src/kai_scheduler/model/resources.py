"""Resource amounts: what a pod asks for, and the three-resource vectors that queues are accounted in.

Units inside the scheduler: CPU in millicores, memory in bytes, GPUs in GPU units (fractions allowed,
MIG instances converted). Edges convert to the contract's units (cores) when they report.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Final

from kai_scheduler.api.gpu_request import SharedGpuRequest

RESOURCE_NAMES: Final = ("gpu", "cpu", "memory")
EPSILON: Final = 1e-9
_MIG_PROFILE = re.compile(r"^nvidia\.com/mig-(?P<slices>\d+)g\.(?P<memory>\d+)gb$")


def mig_gpu_units(resource_name: str) -> int:
    """GPU units one MIG instance counts for in queue accounting.

    KAI counts an instance of profile `<g>g.<m>gb` as g GPUs (its compute-slice count); we do the same so
    that quotas written for KAI mean the same here."""
    match = _MIG_PROFILE.match(resource_name)
    return int(match["slices"]) if match else 1


class Resources:
    """A mutable (gpu, cpu millicores, memory bytes) vector; small and hot, hence hand-written slots."""

    __slots__ = ("cpu", "gpu", "memory")

    def __init__(self, gpu: float = 0.0, cpu: float = 0.0, memory: float = 0.0) -> None:
        self.gpu = gpu
        self.cpu = cpu
        self.memory = memory

    def copy(self) -> Resources:
        return Resources(self.gpu, self.cpu, self.memory)

    def add(self, other: Resources) -> None:
        self.gpu += other.gpu
        self.cpu += other.cpu
        self.memory += other.memory

    def sub(self, other: Resources) -> None:
        self.gpu -= other.gpu
        self.cpu -= other.cpu
        self.memory -= other.memory

    def plus(self, other: Resources) -> Resources:
        return Resources(self.gpu + other.gpu, self.cpu + other.cpu, self.memory + other.memory)

    def get(self, name: str) -> float:
        value: float = getattr(self, name)
        return value

    def set(self, name: str, value: float) -> None:
        setattr(self, name, value)

    def values(self) -> tuple[float, float, float]:
        return (self.gpu, self.cpu, self.memory)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resources):
            return NotImplemented
        return all(
            math.isclose(a, b, abs_tol=EPSILON) for a, b in zip(self.values(), other.values(), strict=True)
        )

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        return f"Resources(gpu={self.gpu:g}, cpu={self.cpu:g}m, memory={self.memory:g})"


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What one pod needs from a node, split the way placement needs it.

    `whole_gpus` are whole GPUs taken from the node's GPUs: `nvidia.com/gpu` devices, plus `dra_gpus`, the
    GPUs the pod's DRA claims ask for (KAI counts those as whole GPUs, on nodes whose GPUs come from
    ResourceSlices); `gpu_portion` / `gpu_memory_mib` describe a shared-GPU request on `gpu_devices`
    devices (KAI's gpu-fraction / gpu-memory / gpu-fraction-num-devices); `scalars` are every other
    countable resource (MIG instances, hugepages, vendor devices).
    """

    cpu: float = 0.0
    memory: float = 0.0
    whole_gpus: int = 0
    gpu_portion: float = 0.0
    gpu_memory_mib: int = 0
    gpu_devices: int = 0
    scalars: tuple[tuple[str, float], ...] = ()
    dra_gpus: int = 0
    # The shared-GPU request as its one type (None: none), made once from the three fields above; its
    # methods are every conversion of it into a share of a GPU (see `api.gpu_request`).
    shared_gpu: SharedGpuRequest | None = field(init=False, repr=False, compare=False, default=None)
    # Requests key the node table's fit masks, looked up several times per pod: hash the fields once.
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(self.shape()))
        if self.gpu_devices > 0:
            shared = SharedGpuRequest(self.gpu_portion, self.gpu_memory_mib, self.gpu_devices)
            object.__setattr__(self, "shared_gpu", shared)

    def __hash__(self) -> int:
        return self._hash

    @property
    def is_shared_gpu(self) -> bool:
        return self.gpu_devices > 0

    @property
    def device_plugin_gpus(self) -> bool:
        """Whether the pod asks for GPUs of the device plugin (`nvidia.com/gpu` or a shared GPU)."""
        return self.whole_gpus > self.dra_gpus or self.is_shared_gpu

    @property
    def device_gpus(self) -> float:
        """Whole GPUs (DRA's among them) plus `SharedGpuRequest.fraction_gpus`: KAI's `GPUs()`."""
        return self.whole_gpus + (self.shared_gpu.fraction_gpus if self.shared_gpu is not None else 0.0)

    @property
    def mig_instances(self) -> tuple[tuple[str, float], ...]:
        return tuple((name, n) for name, n in self.scalars if name.startswith("nvidia.com/mig-"))

    @property
    def uses_gpu(self) -> bool:
        return self.whole_gpus > 0 or self.is_shared_gpu or bool(self.mig_instances)

    def queue_gpus(self, node_gpu_memory_mib: float | None, cluster_gpu_memory_mib: float = 0.0) -> float:
        """GPU units the pod counts for in its queue: whole GPUs, MIG instances by size and the shared-GPU
        request by `SharedGpuRequest.queue_gpus` (the pod on a node of `node_gpu_memory_mib` per GPU, or
        None: not on a node, weighed with `cluster_gpu_memory_mib`)."""
        units = float(self.whole_gpus)
        if self.shared_gpu is not None:
            units += self.shared_gpu.queue_gpus(node_gpu_memory_mib, cluster_gpu_memory_mib)
        if self.scalars:  # most pods have none: no need to look for MIG instances
            for name, count in self.mig_instances:
                units += mig_gpu_units(name) * count
        return units

    def queue_resources(
        self, node_gpu_memory_mib: float | None, cluster_gpu_memory_mib: float = 0.0
    ) -> Resources:
        """The pod's (gpu, cpu, memory) in its queue (`queue_gpus`)."""
        return Resources(self.queue_gpus(node_gpu_memory_mib, cluster_gpu_memory_mib), self.cpu, self.memory)

    def shape(self) -> tuple[object, ...]:
        """Hashable identity of the request, for caches and scheduling signatures."""
        return (
            self.cpu,
            self.memory,
            self.whole_gpus,
            self.gpu_portion,
            self.gpu_memory_mib,
            self.gpu_devices,
            self.scalars,
            self.dra_gpus,
        )

    def describe(self) -> str:
        parts = []
        if self.whole_gpus > self.dra_gpus:
            parts.append(f"{self.whole_gpus - self.dra_gpus} GPU")
        if self.dra_gpus:
            parts.append(f"{self.dra_gpus} GPU as DRA claims")
        if self.gpu_portion:
            parts.append(f"{self.gpu_portion:g} of {self.gpu_devices} GPU")
        if self.gpu_memory_mib:
            parts.append(f"{self.gpu_memory_mib}MiB GPU memory on {self.gpu_devices} GPU")
        parts.extend(f"{count:g} {name}" for name, count in self.scalars)
        if self.cpu:
            parts.append(f"{self.cpu / 1000:g} CPU")
        if self.memory:
            parts.append(f"{self.memory / 2**30:.3g}Gi memory")
        return ", ".join(parts) or "nothing"
