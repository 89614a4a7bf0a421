"""Each queue's allocated, requested and non-preemptible sums, carried from one session to the next and
brought up to date along the queue paths of the jobs that changed (issue #23, point 1).

The proportion plugin sums every job of the cluster into its queue and the queue's ancestors when a
session opens (`plugins.proportion.plugin.account_queues`): 80,000 jobs at 5,000 nodes, every cycle,
though a cycle after one pod arrived changes one of them. `CarriedQueueSums` keeps what each job added
(by key: its queue path, whether it is preemptible, its six sums) and the queues' totals, and for a later
snapshot of the same cache takes out and adds again only the jobs the cache's log names
(`model.job_changes`).

The totals must be the bits the full sum gives (`account_queues` adds job by job in snapshot order, and
fair share, queue order and every capacity check read them). Floating-point addition is not associative
in general, so a total is carried only while every addition is exact: every sum a job adds is a
multiple of a power of two 2**v (v may be negative: half a GPU) and the sum of their magnitudes stays
below 2**(52 + v), so every partial sum, in any order, is a multiple of 2**v that a double holds
exactly; then the full sum in snapshot order, and the carried one with jobs taken out and added in any
order, are both the exact sum. Whole GPUs, millicores, bytes and binary fractions of a GPU always are;
a GPU-memory request counted as a fraction of a device, say, may not be, and then the session sums in
full as before (`totals` gives None) until it is again.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np

from kai_scheduler.model.job_changes import JobChangeMark
from kai_scheduler.model.jobs import JobInfo, TaskStatus
from kai_scheduler.model.nodes import FloatArray, IntArray
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.model.snapshot import ClusterSnapshot

# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup of the class's attributes (~10x a global's cost), and these are asked of every pod placed.
_PENDING: Final = TaskStatus.PENDING
# `model.jobs.ALLOCATED`'s two statuses, compared by identity: a status's `in` on a set of them calls the
# enum's `__hash__`, a Python frame, for every pod of every job a full sum visits.
_ALLOCATED: Final = TaskStatus.ALLOCATED
_RUNNING: Final = TaskStatus.RUNNING

# A job's allocated (gpu, cpu, memory), then its pending (gpu, cpu, memory).
JobSums = tuple[float, float, float, float, float, float]
# A queue's allocated, requested (allocated + pending) and non-preemptible allocated (gpu, cpu, memory):
# nine numbers.
QueueTotals = tuple[float, ...]

# A float that is no multiple of any power of two a sum could hold exactly (infinite, NaN).
_INEXACT: Final = -(1 << 30)


def kept_job_sums(job: JobInfo, gpu_memory: FloatArray, pending_gpu_memory: float) -> JobSums:
    """`job_sums`, kept on the job (`JobInfo.queue_sums`) while its `version` and the pending pods' GPU
    memory stay the same: its pods' statuses and nodes change only with its version, and a node's GPU
    memory only with the nodes, which makes every job again."""
    cached = job.queue_sums
    if (
        cached is None
        or job.queue_sums_version != job.version
        or job.queue_sums_gpu_memory != pending_gpu_memory
    ):
        cached = job.queue_sums = job_sums(job, gpu_memory, pending_gpu_memory)
        job.queue_sums_version, job.queue_sums_gpu_memory = job.version, pending_gpu_memory
    return cached


def every_job_sums(jobs: Iterable[JobInfo], gpu_memory: FloatArray, pending_gpu_memory: float) -> FloatArray:
    """`kept_job_sums` of each of `jobs` in turn, a row each (`distinct_job_sums`, spelled out)."""
    distinct, rows = distinct_job_sums(jobs, gpu_memory, pending_gpu_memory)
    return distinct[rows]


def distinct_job_sums(
    jobs: Iterable[JobInfo], gpu_memory: FloatArray, pending_gpu_memory: float
) -> tuple[FloatArray, IntArray]:
    """`kept_job_sums` of each of `jobs` in turn, as a table of distinct sums and each job's row in it: a
    bare pod's plain job whose one pod is pending takes the row of the first such job of its request
    (every such job of one request sums alike, `job_sums`; the others are not told the sums to keep:
    none reads them before its version moves), every other job a row of its own. A first cycle sums
    every job, 15,400 of them plain and pending at 5,000 nodes, of a few dozen requests: each takes its
    row in the loop, and the table holds the distinct sums once (numpy reads a Python float at ~200
    instructions: six a job cost more than the loop; and the queue totals of a table of few rows are
    counted rather than added job by job, `plugins.proportion`)."""
    distinct: list[JobSums] = []
    rows: list[int] = []  # each job's sums' row in `distinct`
    lone_rows: dict[int, tuple[PodRequest, int]] = {}  # id of a request -> the request, its sums' row
    for job in jobs:
        lone = job.lone_task
        if lone is not None and lone.status is _PENDING and job.admission is None:
            # (Not kept on the job: its request's sums are found here, whatever it keeps.)
            request = lone.request
            known = lone_rows.get(id(request))
            if known is not None and known[0] is request:
                rows.append(known[1])
                continue
            lone_rows[id(request)] = (request, len(distinct))
        rows.append(len(distinct))
        distinct.append(kept_job_sums(job, gpu_memory, pending_gpu_memory))
    table = np.array(distinct, dtype=np.float64).reshape(-1, 6)
    return table, np.fromiter(rows, dtype=np.intp, count=len(rows))


def job_sums(job: JobInfo, gpu_memory: FloatArray, pending_gpu_memory: float) -> JobSums:
    """A job's allocated pods' (gpu, cpu, memory), then its pending pods'."""
    ag = ac = am = pg = pc = pm = 0.0
    for task in job.tasks:
        status = task.status
        request = task.request
        if status is _ALLOCATED or status is _RUNNING:  # (`model.jobs.ALLOCATED`)
            # Only gpu-memory requests depend on the device: look the node up only for those.
            memory = float(gpu_memory[task.node]) if request.gpu_memory_mib else 0.0
            ag += request.queue_gpus(memory)
            ac += request.cpu
            am += request.memory
        elif status is _PENDING:
            pg += request.queue_gpus(None, pending_gpu_memory)
            pc += request.cpu
            pm += request.memory
    if job.admission is not None:
        # Pods held at the queue-admission gate are demand as pending pods are (its design's D7: fair share
        # is the same with and without gating); other gates' pods are not, as in KAI.
        for gated in job.admission.gated:
            request = gated.request
            pg += request.queue_gpus(None, pending_gpu_memory)
            pc += request.cpu
            pm += request.memory
    return (ag, ac, am, pg, pc, pm)


def binary_exponent(value: float) -> int:
    """The largest v such that `value` is a multiple of 2**v (`_INEXACT` for an infinity or NaN)."""
    if not math.isfinite(value):
        return _INEXACT
    mantissa, exponent = math.frexp(value)
    digits = abs(int(mantissa * (1 << 53)))
    return exponent - 53 + (digits & -digits).bit_length() - 1


class _Resource:
    """For one resource (gpu, cpu or memory) over the jobs counted: how many of their sums are a multiple
    of each power of two at best, and the sum of their magnitudes."""

    __slots__ = ("exponents", "magnitude")

    def __init__(self, values: FloatArray | None = None, counts: IntArray | None = None) -> None:
        """Over `values` (a row of sums each), each row counted as many times as `counts` says (once
        each without it)."""
        self.exponents: Counter[int] = Counter()
        self.magnitude = 0.0
        if values is not None and values.size:
            weights = np.ones(values.shape, dtype=np.int64)
            if counts is not None:
                weights *= counts.reshape(-1, *(1,) * (values.ndim - 1))
            counted = values != 0
            values, weights = values[counted], weights[counted]
            found, where = np.unique(binary_exponents(values), return_inverse=True)
            how_many = np.bincount(where.ravel(), weights=weights, minlength=found.size).astype(np.int64)
            self.exponents.update(dict(zip(found.tolist(), how_many.tolist(), strict=True)))
            self.magnitude = float((np.abs(values) * weights).sum())

    def add(self, values: tuple[float, float], sign: int) -> None:
        for value in values:
            if value:
                exponent = binary_exponent(value)
                self.exponents[exponent] += sign
                if not self.exponents[exponent]:
                    del self.exponents[exponent]
                self.magnitude += sign * abs(value)

    def least_exponent(self) -> int | None:
        return min(self.exponents) if self.exponents else None


def binary_exponents(values: FloatArray) -> IntArray:
    """`binary_exponent` of each of `values` (none zero)."""
    finite = np.isfinite(values)
    mantissas, exponents = np.frexp(np.where(finite, values, 1.0))
    digits = np.abs(mantissas * float(1 << 53)).astype(np.int64)  # a mantissa's 53 bits, exactly
    lowest_bit = (digits & -digits).astype(np.float64)
    found = exponents - 53 + np.frexp(lowest_bit)[1] - 1
    return np.where(finite, found, _INEXACT).astype(np.int64)


def sums_are_exact(distinct: FloatArray, counts: IntArray) -> bool:
    """Whether every sum of the job sums (`distinct` rows, each counted `counts` times) is exact, in any
    order and grouping, a row's count times its value included (see the module doc): then any way of
    adding them up gives the bits of the job-by-job sum."""
    return all(
        _exact(resource.magnitude, resource.least_exponent())
        for resource in _counted_resources(distinct, counts)
    )


def _counted_resources(distinct: FloatArray, counts: IntArray) -> tuple[_Resource, _Resource, _Resource]:
    """The gpu, cpu and memory `_Resource` of the job sums `distinct`, each row counted `counts` times."""
    gpu, cpu, memory = (_Resource(distinct[:, [column, column + 3]], counts) for column in range(3))
    return gpu, cpu, memory


def _exact(magnitude: float, exponent: int | None) -> bool:
    """Whether sums of magnitude up to `magnitude`, multiples of 2**`exponent`, are all exact (one bit
    spared for the rounding of the magnitude's own sum)."""
    if exponent is None:
        return True  # nothing but zeros
    return exponent > _INEXACT and magnitude < math.ldexp(1.0, 52 + exponent)


@dataclass(frozen=True, slots=True)
class JobRows:
    """What a full sum added, job by job in snapshot order: each job's key, its queue's position,
    whether it is preemptible, and its sums (`JobSums`: the row `rows` gives it in `distinct`)."""

    keys: list[str]
    queues: list[int]
    preemptible: list[bool]
    distinct: FloatArray
    rows: IntArray

    def sums(self, job: int) -> JobSums:
        """The sums of the job at position `job`."""
        ag, ac, am, pg, pc, pm = self.distinct[self.rows[job]].tolist()
        return (ag, ac, am, pg, pc, pm)


_Entry = tuple[tuple[int, ...], bool, JobSums]  # a job's queue path (positions), preemptible, its sums


class CarriedQueueSums:
    """The queue sums of the last snapshot, brought up to date for the next (see the module doc).

    What each job added is kept as the full sum's rows (`JobRows`, a job's row found by its key in
    `_base`) and, for the jobs counted again since, in `_counted`: making one entry per job of the cluster
    would cost more than the full sum it saves."""

    __slots__ = ("_base", "_counted", "_mark", "_paths", "_resources", "_rows", "_shape", "_totals")

    def __init__(self) -> None:
        self._mark: JobChangeMark | None = None
        self._shape: tuple[object, ...] | None = None
        self._paths: list[tuple[int, ...]] = []  # per queue position, the positions of its path to the root
        self._rows: JobRows | None = None  # None: nothing kept; the next full sum's rows are the base
        self._base: dict[str, int] = {}  # key -> its row in `_rows`, for the jobs not counted again since
        self._counted: dict[str, _Entry] = {}
        self._resources = (_Resource(), _Resource(), _Resource())
        # Per queue position, its totals (a list of nine, `QueueTotals`' order), or None: not known exactly.
        self._totals: list[list[float]] | None = None

    def totals(self, snapshot: ClusterSnapshot) -> list[QueueTotals] | None:
        """The totals of `snapshot`'s queues (in the tree's order), or None when they are to be summed in
        full (then hand them to `adopt`)."""
        queues = snapshot.queues
        names = [queue.name for queue in queues]
        position = {name: i for i, name in enumerate(names)}
        paths = [tuple(position[q.name] for q in queues.ancestry(name)) for name in names]
        gpu_memory = snapshot.nodes.gpu_memory_mib
        shape = (tuple(paths), tuple(names), snapshot.min_gpu_memory_mib, gpu_memory.tobytes())
        mark = snapshot.job_changes
        usable = mark is not None and shape == self._shape and self._rows is not None
        changed = mark.since(self._mark) if usable and mark is not None else None
        self._mark, self._shape, self._paths = mark, shape, paths
        if changed is None:
            self._rows = self._totals = None
            return None
        before = self._bounds()
        jobs, pending_memory = snapshot.jobs, snapshot.min_gpu_memory_mib
        for key in changed:
            old = self._take(key)
            if old is not None:
                self._count(old, -1)
            job = jobs.get(key)
            where = position.get(job.queue) if job is not None else None
            if job is not None and where is not None:
                new = (paths[where], job.preemptible, kept_job_sums(job, gpu_memory, pending_memory))
                self._counted[key] = new
                self._count(new, 1)
        after = self._bounds()
        if self._totals is None or not all(
            _exact(b[0] + a[0], _least(b[1], a[1])) for b, a in zip(before, after, strict=True)
        ):
            self._totals = None
            return None
        return [tuple(row) for row in self._totals]

    def adopt(self, totals: list[QueueTotals], rows: JobRows) -> None:
        """The full sums of the snapshot `totals` was last asked about, and what each job added to them:
        carried on when they are exact."""
        if self._rows is None:
            self._rows, self._counted = rows, {}
            self._base = dict(zip(rows.keys, range(len(rows.keys)), strict=True))
            self._resources = _counted_resources(
                rows.distinct, np.bincount(rows.rows, minlength=len(rows.distinct))
            )
        exact = all(_exact(magnitude, exponent) for magnitude, exponent in self._bounds())
        self._totals = [list(row) for row in totals] if exact else None

    def _take(self, key: str) -> _Entry | None:
        """What job `key` added when last counted (and forget it)."""
        entry = self._counted.pop(key, None)
        if entry is not None:
            return entry
        row = self._base.pop(key, None)
        if row is None:
            return None
        rows = self._rows
        assert rows is not None
        return (self._paths[rows.queues[row]], rows.preemptible[row], rows.sums(row))

    def _count(self, entry: _Entry, sign: int) -> None:
        path, preemptible, sums = entry
        for resource, column in zip(self._resources, range(3), strict=True):
            resource.add((sums[column], sums[column + 3]), sign)
        if self._totals is None:
            return
        ag, ac, am, pg, pc, pm = sums
        if sign < 0:
            ag, ac, am, pg, pc, pm = -ag, -ac, -am, -pg, -pc, -pm
        for where in path:
            row = self._totals[where]
            row[0] += ag
            row[1] += ac
            row[2] += am
            row[3] += ag
            row[3] += pg
            row[4] += ac
            row[4] += pc
            row[5] += am
            row[5] += pm
            if not preemptible:
                row[6] += ag
                row[7] += ac
                row[8] += am

    def _bounds(self) -> list[tuple[float, int | None]]:
        return [(resource.magnitude, resource.least_exponent()) for resource in self._resources]


def _least(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)
