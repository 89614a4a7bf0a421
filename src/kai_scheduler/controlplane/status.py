"""PodGroup and Queue status numbers, by the rules of KAI's podgroupcontroller and queuecontroller: what
`simulate --output json` reports and what live mode writes to `PodGroup.status` and `Queue.status` come
from these two functions.

* A PodGroup counts its pods by phase (no phase: pending). A pod that is not finished asks for its
  resources (`requested`); one that is also bound to a node holds them (`allocated`);
  `allocated_non_preemptible` is `allocated` for a non-preemptible PodGroup, else nothing.
* GPUs are in queue units, as the scheduler counts them (`PodRequest.queue_resources`, the rule of
  `SharedGpuRequest.queue_gpus`): a bound `gpu-memory` pod takes its share of its node's GPUs; one
  not bound yet asks `devices x memory / the cluster's smallest reported GPU memory`, and nothing when no
  node reports GPU memory.
* As KAI's podgroupcontroller does, `requested` also says how much GPU memory (MiB) the `gpu-memory`
  pods that are not finished ask for, devices x memory (`requested_gpu_memory_mib`).
* A Queue sums its own PodGroups and its children, bottom-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kai_scheduler.model.resources import PodRequest, Resources

FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodFacts:
    """One pod of a PodGroup: its phase, whether it is bound (and its node's GPU memory, MiB; 0 when
    unknown), and its request (None when it cannot be read: it counts, but asks for nothing)."""

    phase: str | None
    bound: bool
    node_gpu_memory_mib: float
    request: PodRequest | None


@dataclass(slots=True)
class Numbers:
    """Status numbers of a PodGroup (with its pod counts) or of a Queue (the counts stay zero)."""

    allocated: Resources = field(default_factory=Resources)
    allocated_non_preemptible: Resources = field(default_factory=Resources)
    requested: Resources = field(default_factory=Resources)
    requested_gpu_memory_mib: float = 0.0
    running: int = 0
    pending: int = 0
    succeeded: int = 0
    failed: int = 0

    def add_usage(self, other: Numbers) -> None:
        self.allocated.add(other.allocated)
        self.allocated_non_preemptible.add(other.allocated_non_preemptible)
        self.requested.add(other.requested)
        self.requested_gpu_memory_mib += other.requested_gpu_memory_mib


def pod_group_numbers(pods: Iterable[PodFacts], *, preemptible: bool, min_gpu_memory_mib: float) -> Numbers:
    numbers = Numbers()
    for pod in pods:
        phase = pod.phase or "Pending"
        if phase == "Running":
            numbers.running += 1
        elif phase == "Succeeded":
            numbers.succeeded += 1
        elif phase == "Failed":
            numbers.failed += 1
        elif phase == "Pending":
            numbers.pending += 1
        if phase in FINISHED or pod.request is None:
            continue
        usage = pod.request.queue_resources(
            pod.node_gpu_memory_mib if pod.bound else None, min_gpu_memory_mib
        )
        numbers.requested.add(usage)
        numbers.requested_gpu_memory_mib += pod.request.gpu_memory_mib * pod.request.gpu_devices
        if pod.bound:
            numbers.allocated.add(usage)
    if not preemptible:
        numbers.allocated_non_preemptible = numbers.allocated.copy()
    return numbers


def queue_numbers(
    parents: Mapping[str, str | None], pod_groups: Iterable[tuple[str, Numbers]]
) -> dict[str, Numbers]:
    """Per queue (every queue of `parents`: name -> parent), its PodGroups' numbers plus its children's.
    PodGroups of unknown queues count nowhere; a parent that is not a queue ends the climb."""
    totals = {name: Numbers() for name in parents}
    for queue, numbers in pod_groups:
        seen: set[str] = set()
        current: str | None = queue
        while current is not None and current in totals and current not in seen:
            seen.add(current)
            totals[current].add_usage(numbers)
            current = parents[current]
    return totals
