"""A pod's shared-GPU request, read once: KAI's `gpu-fraction` / `gpu-memory` / `gpu-fraction-num-devices`
annotations as one frozen value (`SharedGpuRequest`), and every conversion of it into a share of a GPU as
its methods. KAI keeps the same facts in one type too (`GpuResourceRequirement`, pkg/scheduler/api/
resource_info); whole GPUs and MIG instances are resource requests, read with the pod's other resources
(`model.resources.PodRequest`, which carries this value as `shared_gpu`).

Reading (`read_shared_gpu_request`) follows KAI's admission rules, and the error names the annotation:
`gpu-fraction` a decimal in (0, 1); `gpu-memory` a positive whole number of MiB; not both;
`gpu-fraction-num-devices` a positive whole number, only with one of them. The simulator's manifest check,
the admission webhook, the scheduler's model, the scale adjuster and the kubectl plugin all read it here.

What the request counts as depends on the question asked, so there are five conversions, each with its
answer for a node that does not report its GPU memory (`nvidia.com/gpu.memory`):

* `fraction_gpus` - KAI's `GPUs()`, what the request is before it has a node (the largest-node and
  topology domain checks): fraction x devices, 0 for a `gpu-memory` request.
* `fit_portion` - placement: the part of one GPU it needs on a node. Not capped: a `gpu-memory` request
  larger than the node's GPUs fits none of them (KAI's isValidGpuPortion). Unknown GPU memory: `inf`, the
  pod fits no GPU there (KAI reads the missing label as its 100 MiB default, which no real request fits
  in).
* `held_portion` - what a pod already on a node holds of each of its GPUs: at most a whole GPU; unknown
  GPU memory: a whole GPU (the pod does hold GPUs there). The pod grouper's packing of bound pods onto
  GPU groups, the per-node quota check and the simulator's GPU timeline use it.
* `queue_gpus` - what it counts for in its queue (quota, limit, fair share, PodGroup and Queue status, the
  kubectl plugin): on a node, `devices x held_portion`; not on a node, `devices x memory / the cluster's
  GPU memory` (smallest for what a job asks, largest for the quota and limit checks; KAI v0.17's
  GpuMemoryAsGpuFraction), not capped, and nothing when no node reports GPU memory (KAI's nil).
* `scaling_gpus` - the node scale adjuster's GPUs for an unschedulable pod, exact (fractions): on a node
  shape of known GPU memory, `devices x held_portion`; unknown, the configured
  `gpu-memory-to-fraction-ratio` per device, as KAI's nodescaleadjuster uses for every gpu-memory pod.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from kai_scheduler.api import constants as c

# Go's strconv is stricter than Python's int()/float() (no `1_000`, no `nan`); mirror it.
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_UNSIGNED = re.compile(r"\d+", re.ASCII)


# The annotations that make a pod a shared-GPU pod (`gpu-fraction-num-devices` only qualifies them).
SHARED_GPU_ANNOTATIONS = (c.GPU_FRACTION_ANNOTATION, c.GPU_MEMORY_ANNOTATION)


def asks_for_shared_gpu(annotations: Mapping[str, object]) -> bool:
    """Whether a pod with these annotations asks for part of a GPU (valid or not: reading it says)."""
    return any(key in annotations for key in SHARED_GPU_ANNOTATIONS)


class InvalidGpuRequest(ValueError):
    """A shared-GPU annotation that KAI's admission would refuse; `field` names it
    (`metadata.annotations.gpu-fraction`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class SharedGpuRequest:
    """A part of each of `devices` GPUs: `fraction` of it (`gpu-fraction`, 0 for a memory request) or
    `memory_mib` of its memory (`gpu-memory`, 0 for a fraction request). See the module doc for which
    conversion answers which question."""

    fraction: float = 0.0
    memory_mib: int = 0
    devices: int = 1

    @property
    def by_memory(self) -> bool:
        return self.fraction <= 0

    @property
    def fraction_gpus(self) -> float:
        """The GPUs it asks for wherever it runs, as KAI's `GpuResourceRequirement.GPUs()` counts them (the
        node-size and topology checks): fraction x devices; a `gpu-memory` request is no definite part of
        a GPU until it has a node, so 0."""
        return self.fraction * self.devices

    def fit_portion(self, node_gpu_memory_mib: float) -> float:
        """The part of one GPU placement must find free on a node of `node_gpu_memory_mib` per GPU (0:
        unknown); above 1, or `inf`, nothing fits."""
        if self.fraction > 0:
            return self.fraction
        if node_gpu_memory_mib <= 0:
            return float("inf")
        return self.memory_mib / node_gpu_memory_mib

    def fit_portions(self, node_gpu_memory_mib: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """`fit_portion` on many nodes at once (placement asks for every node of the table)."""
        if self.fraction > 0:
            return np.full(len(node_gpu_memory_mib), self.fraction)
        memory = node_gpu_memory_mib
        with np.errstate(divide="ignore"):
            portion = np.where(memory > 0, self.memory_mib / np.maximum(memory, 1), np.inf)
        return np.asarray(portion, dtype=np.float64)

    def held_portion(self, node_gpu_memory_mib: float) -> float:
        """The part of each of its GPUs the pod holds on a node of `node_gpu_memory_mib` per GPU (0:
        unknown, a whole GPU)."""
        if self.fraction > 0:
            return self.fraction
        if node_gpu_memory_mib <= 0:
            return 1.0
        return min(1.0, self.memory_mib / node_gpu_memory_mib)

    def queue_gpus(self, node_gpu_memory_mib: float | None, cluster_gpu_memory_mib: float = 0.0) -> float:
        """GPUs in its queue: on a node of `node_gpu_memory_mib` per GPU, or None (not on a node: the
        request weighed with `cluster_gpu_memory_mib`, nothing when 0)."""
        if self.fraction > 0:
            return self.fraction * self.devices
        return gpu_memory_gpus(self.memory_mib, self.devices, node_gpu_memory_mib, cluster_gpu_memory_mib)

    def scaling_gpus(self, shape_gpu_memory_mib: int, gpu_memory_to_fraction_ratio: Fraction) -> Fraction:
        """The scale adjuster's GPUs for the pod on a node shape of `shape_gpu_memory_mib` per GPU (0:
        unknown, the ratio per device), exact."""
        if self.fraction > 0:
            return Fraction(repr(self.fraction)) * self.devices
        if shape_gpu_memory_mib > 0:
            return min(Fraction(1), Fraction(self.memory_mib, shape_gpu_memory_mib)) * self.devices
        return gpu_memory_to_fraction_ratio * self.devices


def gpu_memory_gpus(
    memory_mib: int, devices: int, node_gpu_memory_mib: float | None, cluster_gpu_memory_mib: float = 0.0
) -> float:
    """`SharedGpuRequest.queue_gpus` of a gpu-memory request, for callers that hold the numbers alone (the
    scheduler's hot path does not build a value per call)."""
    if node_gpu_memory_mib is None:
        if cluster_gpu_memory_mib <= 0:
            return 0.0
        return devices * memory_mib / cluster_gpu_memory_mib
    if node_gpu_memory_mib <= 0:
        return float(devices)
    return devices * min(1.0, memory_mib / node_gpu_memory_mib)


def read_shared_gpu_request(annotations: Mapping[str, str]) -> SharedGpuRequest | None:
    """The pod's shared-GPU request, None when it asks for none; raises InvalidGpuRequest (checked in the
    order KAI's admission checks: fraction, memory, both, devices)."""
    fraction_text = annotations.get(c.GPU_FRACTION_ANNOTATION)
    memory_text = annotations.get(c.GPU_MEMORY_ANNOTATION)
    fraction = 0.0 if fraction_text is None else _fraction(fraction_text)
    memory_mib = 0
    if memory_text is not None:
        memory_mib = _positive_integer(memory_text)
        if not memory_mib:
            raise InvalidGpuRequest(
                f"metadata.annotations.{c.GPU_MEMORY_ANNOTATION}",
                f"must be a positive whole number of MiB, got {memory_text!r}",
            )
    if fraction_text is not None and memory_text is not None:
        raise InvalidGpuRequest(
            "metadata.annotations",
            f"{c.GPU_FRACTION_ANNOTATION} and {c.GPU_MEMORY_ANNOTATION} cannot both be set; use one of them",
        )
    devices_text = annotations.get(c.GPU_FRACTION_NUM_DEVICES_ANNOTATION)
    devices = 1
    if devices_text is not None:
        field = f"metadata.annotations.{c.GPU_FRACTION_NUM_DEVICES_ANNOTATION}"
        devices = _positive_integer(devices_text)
        if not devices:
            raise InvalidGpuRequest(field, f"must be a positive whole number, got {devices_text!r}")
        if fraction_text is None and memory_text is None:
            raise InvalidGpuRequest(
                field, f"requires a {c.GPU_FRACTION_ANNOTATION} or {c.GPU_MEMORY_ANNOTATION} annotation"
            )
    if fraction_text is None and memory_text is None:
        return None
    return SharedGpuRequest(fraction, memory_mib, devices)


def _fraction(text: str) -> float:
    field = f"metadata.annotations.{c.GPU_FRACTION_ANNOTATION}"
    if not _DECIMAL.fullmatch(text):
        raise InvalidGpuRequest(field, f"must be a number between 0 and 1 (exclusive), got {text!r}")
    value = float(text)
    if not 0 < value < 1:
        raise InvalidGpuRequest(
            field,
            f"must be between 0 and 1 (exclusive), got {text!r}; request whole GPUs with nvidia.com/gpu",
        )
    return value


def _positive_integer(text: str) -> int:
    """The number, or 0 when `text` is not a positive whole number."""
    return int(text) if _UNSIGNED.fullmatch(text) and int(text) > 0 else 0


GPU_MEMORY_GRANULARITY_MIB = 100


def floor_gpu_memory_mib(mib: int) -> int:
    """KAI floors device memory to 100 MiB so that nearly-equal devices compare equal."""
    return mib // GPU_MEMORY_GRANULARITY_MIB * GPU_MEMORY_GRANULARITY_MIB


def node_gpu_memory_mib(label: object) -> int:
    """The per-GPU memory (MiB) a node's `nvidia.com/gpu.memory` label says, floored to 100 MiB as KAI does;
    0 when the label is missing or not a whole number. The one reading of the label: the node table, the
    shared-GPU packing, the status controllers, the scale adjuster and `kubectl kai` all use it."""
    if not isinstance(label, str) or not label.isdigit():
        return 0
    return floor_gpu_memory_mib(int(label))


__all__ = [
    "GPU_MEMORY_GRANULARITY_MIB",
    "SHARED_GPU_ANNOTATIONS",
    "InvalidGpuRequest",
    "SharedGpuRequest",
    "asks_for_shared_gpu",
    "floor_gpu_memory_mib",
    "gpu_memory_gpus",
    "node_gpu_memory_mib",
    "read_shared_gpu_request",
]
