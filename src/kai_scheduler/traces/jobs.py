"""What a trace format reads: the cluster's nodes and the jobs, before queues are assigned.

A `TraceJob` is a bare pod (`min_member` None: openb's pods) or a PodGroup of `replicas` identical pods of
which `min_member` must run together (Pollux's elastic jobs); each pod runs `duration` seconds once bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kai_scheduler.api.errors import ManifestError
from kai_scheduler.traces.rows import Row


@dataclass(frozen=True, slots=True)
class PodShape:
    """What each pod of a job asks for."""

    cpu_milli: int
    memory_mib: int
    gpus: int = 0  # whole GPUs (`nvidia.com/gpu`), or the devices of a fraction
    gpu_fraction: float | None = None  # each device's share, for shared GPUs (KAI's `gpu-fraction`)
    gpu_models: tuple[str, ...] = ()  # `nvidia.com/gpu.product` values the pod accepts (none: any)

    @property
    def gpu_amount(self) -> float:
        """The GPUs the pod holds: whole GPUs, or devices x fraction."""
        return self.gpus * self.gpu_fraction if self.gpu_fraction is not None else float(self.gpus)


@dataclass(frozen=True, slots=True)
class TraceJob:
    name: str
    row: Row  # the trace row it came from: queue rules match its columns
    arrival: float  # seconds from the start of the (sliced) trace
    duration: float | None  # seconds each pod runs once bound (None: until the simulation ends)
    priority_class: str
    pod: PodShape
    replicas: int = 1
    min_member: int | None = None  # None: a bare pod; else a PodGroup with this minMember

    @property
    def gpu_seconds(self) -> float | None:
        """GPU x seconds the job asks for at full size (None: it has no duration)."""
        if self.duration is None:
            return None
        return self.pod.gpu_amount * self.replicas * self.duration


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace read: its nodes (manifests), its jobs in arrival order, and how it names its queues by
    default (a column of its rows)."""

    format: str
    sources: tuple[str, ...]
    nodes: list[dict[str, Any]]
    jobs: list[TraceJob]
    default_queue_column: str
    notes: list[str] = field(default_factory=list)  # what the import did that a user should know

    @property
    def gpu_capacity(self) -> int:
        return sum(int(node["status"]["allocatable"].get("nvidia.com/gpu", "0")) for node in self.nodes)


@dataclass(frozen=True, slots=True)
class Slice:
    """`--window START:END` (seconds of trace time; END None: to the end) and `--limit N` (the first N
    jobs that arrive in the window). The window's start becomes second 0."""

    start: float = 0.0
    end: float | None = None
    limit: int | None = None

    def take(self, jobs: Sequence[TraceJob]) -> list[TraceJob]:
        """`jobs` (in arrival order, at trace times) in the slice, their arrivals shifted to its start."""
        chosen = [
            replace(job, arrival=job.arrival - self.start)
            for job in jobs
            if job.arrival >= self.start and (self.end is None or job.arrival < self.end)
        ]
        return chosen if self.limit is None else chosen[: self.limit]


def in_arrival_order(jobs: list[TraceJob]) -> list[TraceJob]:
    """Jobs by arrival, then name (the trace's own order is not always by time)."""
    return sorted(jobs, key=lambda job: (job.arrival, job.name))


# Kubernetes object names (DNS-1123 subdomains), with room for a pod's `-<index>` suffix.
_NAME = re.compile(r"[a-z0-9]([-.a-z0-9]*[a-z0-9])?")
_MAX_NAME = 240


def check_names(jobs: Sequence[TraceJob]) -> None:
    """Every job's name can name Kubernetes objects, and only one job has it (a name twice would be the
    same object twice): refused on the row where it is wrong."""
    seen: dict[str, Row] = {}
    for job in jobs:
        if not _NAME.fullmatch(job.name) or len(job.name) > _MAX_NAME:
            raise ManifestError(
                job.row.source,
                f"{job.name!r} cannot name a pod (lower-case letters, digits, '-' and '.')",
                line=job.row.line,
                field="name",
            )
        first = seen.setdefault(job.name, job.row)
        if first is not job.row:
            raise ManifestError(
                job.row.source, f"name {job.name!r} already used on line {first.line}", line=job.row.line
            )
