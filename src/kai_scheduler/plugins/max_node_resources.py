"""KAI's MaxNodePoolResources pre-filter (pkg/scheduler/k8s_internal/predicates/maxNodeResources.go): a pod
that asks for more GPUs, CPU, memory or of another resource than the largest node of its pool holds (each
resource's maximum over the pool's nodes' allocatable, whatever their state) cannot be scheduled, with
KAI's message, e.g. "The pod ns/p requires GPU: 2, CPU: 1 (cores), memory: 0 (GB), pods: 1. Max GPU
resources available in a single node in the default node-pool is topped at 1".

Checked in KAI's order: GPUs (whole, fractions and DRA claims' GPUs; MIG instances are not counted),
CPU, memory, then every other resource the pod asks for, a pod slot included. A resource no node has,
or any other resource over the maximum, reads "No node in the <pool> node-pool has <name> resources".
Ephemeral storage is not modelled here (the node table does not hold it). Decided once per request.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

import numpy as np

from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.resources import PodRequest, mig_gpu_units

PODS: Final = "pods"
_MIG_PREFIX: Final = "nvidia.com/mig-"
_CORE: Final = 1000.0  # millicores
_GB: Final = 1e9


def ftoa(value: float, digits: int = 3) -> str:
    """go-humanize's FtoaWithDigits: at most `digits` decimals, trailing zeros (and dot) dropped."""
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def describe_request(request: PodRequest) -> str:
    """KAI's `ResourceRequirements.DetailedString`: GPUs (MIG instances and DRA GPUs included), CPU cores,
    memory GB, then the other resources (with the pod slot) and the MIG instances, each by name."""
    migs = request.mig_instances
    gpus = request.device_gpus
    gpus += sum(mig_gpu_units(name) * count for name, count in migs)
    others = sorted([(PODS, 1.0), *((n, q) for n, q in request.scalars if not n.startswith(_MIG_PREFIX))])
    cpu, memory = ftoa(request.cpu / _CORE), ftoa(request.memory / _GB)
    text = f"GPU: {ftoa(gpus)}, CPU: {cpu} (cores), memory: {memory} (GB)"
    text += "".join(f", {name}: {quantity:g}" for name, quantity in others)
    return text + "".join(f", mig {name}: {count:g}" for name, count in migs)


class MaxNodeResources:
    """The largest allocatable of each resource over one session's nodes."""

    def __init__(self, nodes: NodeTable, pool: str) -> None:
        self.pool = pool

        def largest(column: np.ndarray) -> float:
            return float(column.max()) if column.size else 0.0

        self.gpus = largest(nodes.cap_gpus)
        self.cpu = largest(nodes.cap_cpu)
        self.memory = largest(nodes.cap_memory)
        self.scalars = {name: largest(nodes.cap_scalars[:, j]) for name, j in nodes.scalar_index.items()}
        self.scalars[PODS] = largest(nodes.cap_pods)
        # Request -> (resource name, the largest there, units) of the first resource over the maximum.
        self._verdicts: dict[PodRequest, tuple[str, float, str] | None] = {}

    def reads(self) -> tuple[Hashable, ...]:
        """All that `pre_filter` reads besides the pod."""
        return (self.pool, self.gpus, self.cpu, self.memory, tuple(sorted(self.scalars.items())))

    def pre_filter(self, task: TaskInfo) -> str | None:
        request = task.request
        if request not in self._verdicts:
            self._verdicts[request] = self._over(request)
        verdict = self._verdicts[request]
        if verdict is None:
            return None
        name, largest, units = verdict
        text = f"The pod {task.namespace}/{task.name} requires {describe_request(request)}. "
        if largest == 0:
            return text + f"No node in the {self.pool} node-pool has {name} resources"
        suffix = f" {units}" if units else ""
        return (
            text + f"Max {name} resources available in a single node in the {self.pool} node-pool "
            f"is topped at {ftoa(largest)}{suffix}"
        )

    def _over(self, request: PodRequest) -> tuple[str, float, str] | None:
        gpus = request.device_gpus
        if gpus > self.gpus:
            return ("GPU", self.gpus, "")
        if request.cpu > self.cpu:
            return ("CPU", self.cpu / _CORE, "cores")
        if request.memory > self.memory:
            return ("memory", self.memory / _GB, "GB")
        for name, quantity in [(PODS, 1.0), *request.scalars]:
            if name.startswith(_MIG_PREFIX):
                continue
            largest = self.scalars.get(name)
            if largest is None or quantity > largest:
                return (name, 0.0, "")  # KAI names the maximum of storage resources only
        return None
