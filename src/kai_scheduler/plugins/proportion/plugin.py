"""proportion: queue accounting, fair share, queue order, and the queue capacity checks.

At session open it sums each queue's allocation and requests from the snapshot (up the tree), divides
the cluster among the queues per resource (`division.divide`), then keeps allocations live as actions
place and evict pods, so that queue order and the capacity checks always see the current state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final

import numpy as np

from kai_scheduler.api.reasons import NON_PREEMPTIBLE_OVER_QUOTA, OVER_LIMIT, WaitReason
from kai_scheduler.framework.gang import next_request
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.queue_order_memo import CarriedQueueOrder, OrderMemo
from kai_scheduler.framework.queue_sums import (
    CarriedQueueSums,
    JobRows,
    QueueTotals,
    distinct_job_sums,
    sums_are_exact,
)
from kai_scheduler.framework.session import Session
from kai_scheduler.model.fair_share_record import DivisionRecorder
from kai_scheduler.model.jobs import JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import FloatArray, IntArray
from kai_scheduler.model.queues import QueueInfo, QueueTree, effective_deserved, effective_limit, is_unlimited
from kai_scheduler.model.resources import EPSILON, RESOURCE_NAMES, PodRequest, Resources
from kai_scheduler.model.snapshot import ClusterSnapshot
from kai_scheduler.plugins.accounted_limits import open_accounted_limits
from kai_scheduler.plugins.arguments import number
from kai_scheduler.plugins.proportion.division import (
    LevelShares,
    QueueShareInput,
    TreeOrder,
    divide,
    float_bits,
    tree_order,
)
from kai_scheduler.plugins.proportion.node_capacity import gpu_memory_capacity
from kai_scheduler.plugins.proportion.victim_filter import may_be_reclaimed

# What a queue's order key reads of it that is fixed for the session (`_fixed_order_parts`).
_FixedOrderParts = tuple[
    tuple[float, float, float],
    tuple[float, float, float],
    tuple[float, float, float],
    bool,
    int,
    "SmallerAllocatableShare",
    int,
]
# A queue's allocatable share of 0 makes any use "infinitely" dominant; KAI scales allocation by this.
_ZERO_SHARE_PENALTY: Final = 1000.0
_NOTHING: Final = Resources()
# Where a reclaimer's and a victim's branches split: the reclaimer side and its deserved quota, the victim
# side and its allocatable share.
_ReclaimSides = tuple[QueueInfo, Resources, QueueInfo, Resources]
# What a placement moves of the capacity checks' inputs: the queues whose parts and the queues whose paths
# (`ProportionPlugin._path_inputs`) it moves.
_MovedInputs = tuple[tuple[str, ...], tuple[str, ...]]
# A queue's path root first, its deserved quota and its allocatable share (`_side_parts`).
_SideParts = tuple[list[QueueInfo], Resources, Resources]


# Distinct next requests numbered for the queue order (`_order_reads`) beyond which it numbers afresh.
_MOST_READ_NUMBERS = 4096
# Siblings' shares whose ordering is kept (`_siblings_weakly_ordered`) beyond which it is let go.
_MOST_SIBLING_SHARES = 1024


class ProportionPlugin:
    name = "proportion"

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.k_value = _number(arguments, "kValue", 1.0)
        # KAI's code spells it relcaimerSaturationMultiplier; its docs say reclaimerUtilizationMultiplier.
        name = next(
            (
                n
                for n in ("relcaimerSaturationMultiplier", "reclaimerUtilizationMultiplier")
                if n in arguments
            ),
            "relcaimerSaturationMultiplier",
        )
        multiplier = _number(arguments, name, 1.0)
        if multiplier < 1.0:
            raise ValueError(f"proportion.arguments.{name}: must be >= 1, got {multiplier:g}")
        self.reclaimer_saturation_multiplier = multiplier
        self._session: Session | None = None
        self._chains: dict[str, list[QueueInfo]] = {}  # each queue with its ancestors, per session
        # `_path_inputs` by queue, until a queue on its path shifts what they read of it.
        self._path_values: dict[str, tuple[float | str | None, ...]] = {}
        # A queue's part of them, until it shifts what they read of it.
        self._segments: dict[str, tuple[float | str | None, ...]] = {}
        # Per queue, whether its part reads its allocation (it has a limit) and its non-preemptible
        # allocation (it has a quota), and the queues whose paths go through it (itself first).
        self._input_reads: dict[str, tuple[bool, bool, list[str]]] = {}
        # Per queue, what a placement in it moves of those (`_moved_inputs`), for a preemptible job and for
        # a non-preemptible one.
        self._input_moves: dict[str, tuple[_MovedInputs, _MovedInputs]] = {}
        self._path_bounds: dict[str, list[tuple[QueueInfo, tuple[float, ...], tuple[float, ...]]]] = {}
        # `_task_resources` of the requests that do not read a node, by the request (converted with the
        # session's smallest GPU memory).
        self._amounts: dict[PodRequest, Resources] = {}
        # Those of the requests of a shared GPU on a node, by the request and the node's GPU memory.
        self._amounts_on: dict[tuple[PodRequest, float], Resources] = {}
        # Per queue, the queues on its path that have a limit, with their limits (`over_limit`), for the
        # session: the others' bounds are infinite, nothing goes above them.
        self._limited: dict[str, list[tuple[QueueInfo, tuple[float, ...]]]] = {}
        # Likewise the queues on its path that have a quota, with their quotas (`non_preemptible_over_quota`).
        self._quotas: dict[str, list[tuple[QueueInfo, tuple[float, ...]]]] = {}
        self._shares: dict[str, tuple[float, float, float]] = {}
        self._smaller_share: dict[str, SmallerAllocatableShare] = {}
        self._order_fixed: dict[str, _FixedOrderParts] = {}
        # `_siblings_weakly_ordered` by the siblings' allocatable shares: it reads nothing else, and a
        # cluster's queues keep their shares from one cycle to the next (carried, `CarriedQueueOrder`).
        self._weakly_ordered: dict[tuple[tuple[float, float, float], ...], bool] = {}
        # queue_order_key by (queue, its allocation, the request): everything else it reads is fixed for
        # the session, and a queue's next jobs mostly ask for the same few shapes. Carried to the next
        # session for the queues whose other inputs stay (`_carry_order_keys`).
        self._order_keys: dict[OrderMemo, tuple[Any, ...]] = {}
        # Per queue, the allocation its last key was asked at, from the session's start on
        # (`queue_order_key`: a key is kept from the second at an allocation).
        self._asked_at: dict[str, tuple[float, float, float]] = {}
        # Per leaf queue, the job of it whose next request `queue_order_key` read last, the job's version
        # then and the request: the job queue ranks a leaf on its next job, then its ancestors on their
        # leaves' next jobs (a first cycle at 5,000 nodes asked 32,000 keys of 16,000 jobs). Within a
        # session the request moves only with the job's version (the smallest GPU memory it converts
        # with is the snapshot's).
        self._head_requests: dict[str, tuple[JobInfo, int, Resources]] = {}
        # `_order_reads`: each job's next request as a number (one per distinct request) with the job's
        # version and the smallest GPU memory it was read at; carried across sessions with the queue
        # order keys (`CarriedQueueOrder`), dropped when many.
        self._read_numbers: dict[tuple[float, float, float], int] = {}
        self._reads_kept: dict[JobInfo, tuple[int, float, int]] = {}
        # Each queue's allocation when the current victim search started, saved as the queue's allocation
        # first moves since (`_shift`): a queue not in it has not moved. A search moves a few queues, and
        # copying every queue's allocation for each search grew with the searches times the queues.
        # None before the session's first search.
        self._before: dict[str, Resources] | None = None
        # With `verify_carried`: every queue's allocation copied as the search started, to compare with.
        self._before_full: dict[str, Resources] | None = None
        # victim_queue_key's parts that depend on the queue and its allocation only.
        self._victim_keys: dict[tuple[str, float, float, float], tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        # `_reclaim_sides` by reclaimer and victim queue, made from each queue's `_side_parts`.
        self._sides: dict[tuple[str, str], _ReclaimSides | None] = {}
        self._parts: dict[str, _SideParts] = {}

    # --- session hooks ---------------------------------------------------------------------------

    def on_session_open(self, session: Session) -> None:
        self._session = session
        self._chains = {}
        self._head_requests = {}
        carried = session.queue_orders
        if carried is not None:
            # Ended jobs' reads dropped once many; the numbers only with every read kept by them.
            if len(carried.reads_kept) > 2 * len(session.snapshot.jobs) + 1024:
                carried.reads_kept = {}
            if len(carried.read_numbers) > _MOST_READ_NUMBERS:
                carried.read_numbers, carried.reads_kept = {}, {}
            self._read_numbers, self._reads_kept = carried.read_numbers, carried.reads_kept
            if len(carried.weakly_ordered) > _MOST_SIBLING_SHARES:
                carried.weakly_ordered = {}
            self._weakly_ordered = carried.weakly_ordered
        self._before = self._before_full = None
        snapshot = session.snapshot
        account_queues(snapshot, session.queue_sums, verify=session.verify_carried)
        # (The keys carried from the last session are at the queues' allocations now: kept, asked first.)
        self._asked_at = {queue.name: queue.allocated.values() for queue in snapshot.queues}
        # Asked for (`Session.record_fair_share`): the division's steps, for `kubectl kai fairshare`.
        recorder = DivisionRecorder(session.cycle) if session.record_fair_share else None
        compute_fair_shares(
            snapshot.queues,
            snapshot.capacity,
            self.k_value,
            recorder,
            carried=session.fair_share_levels,
            verify=session.verify_carried,
        )
        if recorder is not None:
            session.fair_share_record = recorder.record
        if session.queue_orders is not None:
            self._carry_order_keys(session.queue_orders, verify=session.verify_carried)
        points = session.points
        points.queue_order = self.queue_order_key
        points.queue_order_moved = self.moved_queue_order_key
        points.queue_order_reads = self._order_reads
        points.queue_order_weak = self._siblings_weakly_ordered
        points.job_capacity_checks.append(self.over_limit)
        points.job_capacity_checks.append(self.non_preemptible_over_quota)
        points.job_capacity_inputs[self.over_limit] = self._path_inputs
        points.job_capacity_inputs[self.non_preemptible_over_quota] = self._path_inputs
        points.quota_checks.append(self.non_preemptible_over_quota)
        points.victim_queue_order = self.victim_queue_key
        points.on_solution_start.append(self._remember_allocations)
        points.reclaim_eligibility.append(self.can_reclaim)
        points.reclaim_validators.append(self.reclaim_is_fair)
        points.reclaim_victim_filters.append(self.may_reclaim_from)
        asks_gpu_memory = snapshot.asks_gpu_memory
        if asks_gpu_memory is None:
            asks_gpu_memory = any(task.request.gpu_memory_mib for task in snapshot.tasks.values())
        if asks_gpu_memory:
            checks = [self.over_limit, self.non_preemptible_over_quota]
            points.task_predicates.append(gpu_memory_capacity(session, checks))
        points.on_allocate.append(self._on_allocate)
        points.on_deallocate.append(self._on_deallocate)
        # Limits on AccountedResources, next to the limits above (a cluster without them opens nothing).
        open_accounted_limits(session)

    def on_session_close(self, session: Session) -> None:
        self._session = None

    # --- live accounting -------------------------------------------------------------------------

    def _task_resources(self, task: TaskInfo) -> Resources:
        """What `task` takes of its queue (read only: one object for the pods that ask alike)."""
        assert self._session is not None
        snapshot = self._session.snapshot
        request = task.request
        # Only a shared GPU's request on a node reads the node's GPU memory (`queue_gpus`); every other
        # request's amount is kept by the request, converted with the session's smallest GPU memory (a
        # first cycle places thousands of pods of a few requests).
        if request.shared_gpu is None or task.node < 0:
            amount = self._amounts.get(request)
            if amount is None:
                amount = self._amounts[request] = request.queue_resources(None, snapshot.min_gpu_memory_mib)
            return amount
        # (Kept by the request and the node's GPU memory too: a first cycle places thousands of shared-GPU
        # pods on nodes of a few kinds, and a Resources made for each cost more than the look-up.)
        node_memory = float(snapshot.nodes.gpu_memory_mib[task.node])
        key = (request, node_memory)
        amount = self._amounts_on.get(key)
        if amount is None:
            amount = self._amounts_on[key] = request.queue_resources(node_memory, snapshot.min_gpu_memory_mib)
        return amount

    def _on_allocate(self, task: TaskInfo) -> None:
        self._shift(task, self._task_resources(task), 1.0)

    def _on_deallocate(self, task: TaskInfo) -> None:
        self._shift(task, self._task_resources(task), -1.0)

    def _shift(self, task: TaskInfo, amount: Resources, sign: float) -> None:
        # Hot (every placement, eviction and undo of every scenario): the queue's chain to the root is
        # kept per queue, and the vector added in place.
        job = task.job
        name = job.queue
        chain = self._chains.get(name)
        if chain is None:
            assert self._session is not None
            queues = self._session.snapshot.queues
            chain = self._chains[name] = queues.ancestry(name) if name in queues else []
        non_preemptible = not job.preemptible
        segments = self._segments
        if segments:
            # Only the capacity inputs that move go (`_path_inputs`): a queue's part reads its allocation
            # only where it is limited and its non-preemptible one only where its quota is, so most
            # placements (a preemptible job, its queues without limits) leave the inputs as they are,
            # the same object for the next job's admission to tell equal at a glance.
            moves = self._input_moves.get(name)
            if moves is None:
                moves = self._input_moves[name] = self._moved_inputs(chain)
            parts, paths = moves[non_preemptible]
            for part in parts:
                segments.pop(part, None)
            path_values = self._path_values
            for path in paths:
                path_values.pop(path, None)
        gpu, cpu, memory = amount.gpu * sign, amount.cpu * sign, amount.memory * sign
        before = self._before
        if before is not None:  # (saved before the allocation moves)
            for queue in chain:
                if queue.name not in before:
                    before[queue.name] = queue.allocated.copy()
        for queue in chain:
            allocated = queue.allocated
            allocated.gpu += gpu
            allocated.cpu += cpu
            allocated.memory += memory
            if non_preemptible:
                allocated = queue.allocated_non_preemptible
                allocated.gpu += gpu
                allocated.cpu += cpu
                allocated.memory += memory

    # --- queue order -----------------------------------------------------------------------------

    def queue_order_key(self, queue: QueueInfo, job: JobInfo | None) -> tuple[Any, ...]:
        """KAI's queue order as a sort key (smaller first). Hot: called for every queue on the path of
        every job an action hands out, so it is remembered per allocation and request, from the second
        key asked of a queue at an allocation on: the first after the allocation moved is worked out
        and not kept (a first cycle moves the allocation of the path of most jobs it hands out, and
        kept ~32,000 keys never asked again: the look-ups and the dict's growth cost more than the keys)."""
        allocated = queue.allocated
        gpu, cpu, memory = at = (allocated.gpu, allocated.cpu, allocated.memory)
        name = queue.name
        if self._asked_at.get(name) != at:
            return self.moved_queue_order_key(queue, job, at)
        request = self._head_request(job)
        memo = (name, gpu, cpu, memory, request.gpu, request.cpu, request.memory)
        key = self._order_keys.get(memo)
        if key is None:
            key = self._order_keys[memo] = self._order_key_at(queue, at, request)
        return key

    def moved_queue_order_key(
        self, queue: QueueInfo, job: JobInfo | None, at: tuple[float, float, float]
    ) -> tuple[Any, ...]:
        """`queue_order_key` of `queue` at its allocation `at`, which moved since the caller last asked a
        key of it (`ExtensionPoints.queue_order_moved`): worked out and not kept, as the first key asked
        at an allocation is. Why: the job queue knows it moved (it keeps the allocation it ranked each
        queue at), and a first cycle asks two such keys for nearly every job it hands out."""
        self._asked_at[queue.name] = at
        return self._order_key_at(queue, at, self._head_request(job))

    def _head_request(self, job: JobInfo | None) -> Resources:
        """The next request of `job`, the job a queue is ranked by (`next_request`; none for no job), kept
        per leaf queue while the job and its version stay (`_head_requests`)."""
        if job is None:
            return _NOTHING
        session = self._session
        assert session is not None
        kept = self._head_requests.get(job.queue)
        if kept is not None and kept[0] is job and kept[1] == job.version:
            if session.verify_carried:
                _check_kept_request(session, job, kept[2])
            return kept[2]
        request = next_request(session, job)
        self._head_requests[job.queue] = (job, job.version, request)
        return request

    def _order_reads(self, job: JobInfo) -> int:
        """All that `queue_order_key` reads of `job`: its next request, as a number (equal requests, one
        number), kept as `next_request` keeps the request (by the job's version and the smallest GPU
        memory). Asked of every job a walk hands out, and the walk's look-ups by it then hash a number."""
        session = self._session
        assert session is not None
        smallest = session.snapshot.min_gpu_memory_mib
        kept = self._reads_kept.get(job)
        if kept is not None and kept[0] == job.version and kept[1] == smallest:
            if session.verify_carried and self._read_number(job) != kept[2]:
                raise CarriedMismatch(
                    f"{job.key}: its next request's number kept for the queue order differs"
                )
            return kept[2]
        number = self._read_number(job)
        self._reads_kept[job] = (job.version, smallest, number)
        return number

    def _read_number(self, job: JobInfo) -> int:
        """The number of `job`'s next request (`_order_reads`), worked out now."""
        assert self._session is not None
        request = next_request(self._session, job)
        numbers = self._read_numbers
        return numbers.setdefault((request.gpu, request.cpu, request.memory), len(numbers))

    def _siblings_weakly_ordered(self, queues: Sequence[QueueInfo]) -> bool:
        """Whether `queue_order_key` ranks `queues` (siblings) by a strict weak ordering, whatever their
        jobs ask. Criteria 1-6 and the creation rank are numbers; criterion 7 (`SmallerAllocatableShare`)
        is one when the siblings' allocatable shares, the distinct ones, are totally ordered by
        dominance. Two siblings always are: a heap and a scan pick alike between two."""
        if len(queues) < 3:
            return True
        shares = tuple(self._allocatable_shares(queue) for queue in queues)
        known = self._weakly_ordered.get(shares)
        if known is None:
            known = self._weakly_ordered[shares] = _dominance_is_total(set(shares))
        elif self._session is not None and self._session.verify_carried:
            _check_weakly_ordered(shares, known)
        return known

    def _carry_order_keys(self, carried: CarriedQueueOrder, *, verify: bool) -> None:
        """Start from the last session's queue order keys that this one would work out again (`verify`:
        work each out again and raise `CarriedMismatch` on a difference)."""
        assert self._session is not None
        queues = self._session.snapshot.queues
        fixed = {
            queue.name: (
                *queue.fair_share.values(),
                *queue.deserved.values(),
                *self._allocatable_shares(queue),
                queue.priority,
                queue.rank,
            )
            for queue in queues
        }
        allocated = {queue.name: queue.allocated.values() for queue in queues}
        self._order_keys = carried.keys_for(fixed, allocated)
        if verify:
            for memo, key in self._order_keys.items():
                fresh = self._queue_order_key(queues[memo[0]], Resources(*memo[4:]))
                if not _same_order_key(fresh, key):
                    raise CarriedMismatch(
                        f"queue {memo[0]}: its order key for a request of {memo[4:]}, carried from the last "
                        f"cycle ({key!r}), differs from the one worked out again ({fresh!r})"
                    )

    def _queue_order_key(self, queue: QueueInfo, request: Resources) -> tuple[Any, ...]:
        """`queue_order_key` of `queue` at its allocation for a job asking `request`, worked out now."""
        return self._order_key_at(queue, queue.allocated.values(), request)

    def _order_key_at(
        self, queue: QueueInfo, used: tuple[float, float, float], request: Resources
    ) -> tuple[Any, ...]:
        """`queue_order_key` of `queue` at the allocation `used` for a job asking `request`, worked out
        now. Written out per resource, from the queue's parts fixed for the session as one tuple
        (`_fixed_order_parts`): it runs for each queue on the path of every job handed out, and a first
        cycle over a deep backlog hands out tens of thousands, its allocation moved at most."""
        fixed = self._order_fixed.get(queue.name)
        if fixed is None:
            fixed = self._order_fixed[queue.name] = self._fixed_order_parts(queue)
        fair, deserved, shares, shares_positive, priority, smaller_share, rank = fixed
        used_gpu, used_cpu, used_memory = used
        over_utilised = (
            fair[0] < used_gpu - EPSILON and fair[1] < used_cpu - EPSILON and fair[2] < used_memory - EPSILON
        )
        # Whether the job fits in the deserved quota (unlimited: negative), resource by resource.
        asked_gpu, asked_cpu, asked_memory = request.gpu, request.cpu, request.memory
        with_gpu, with_cpu, with_memory = (
            used_gpu + asked_gpu,
            used_cpu + asked_cpu,
            used_memory + asked_memory,
        )
        deserved_gpu, deserved_cpu, deserved_memory = deserved
        starved = (
            (deserved_gpu < 0 or with_gpu <= deserved_gpu + EPSILON)
            and (deserved_cpu < 0 or with_cpu <= deserved_cpu + EPSILON)
            and (deserved_memory < 0 or with_memory <= deserved_memory + EPSILON)
        )
        if shares_positive:
            # (`_dominant` of each with every share above EPSILON: the largest ratio, from 0.0 on, the
            # first of equals kept, as `max` keeps it; compared in line, which costs half a call of the
            # builtin, and a call of a Python function twice over.)
            gpu_share, cpu_share, memory_share = shares
            zero_share_use = False
            dominant = dominant_used = 0.0
            ratio = with_gpu / gpu_share
            if ratio > dominant:
                dominant = ratio
            ratio = with_cpu / cpu_share
            if ratio > dominant:
                dominant = ratio
            ratio = with_memory / memory_share
            if ratio > dominant:
                dominant = ratio
            ratio = used_gpu / gpu_share
            if ratio > dominant_used:
                dominant_used = ratio
            ratio = used_cpu / cpu_share
            if ratio > dominant_used:
                dominant_used = ratio
            ratio = used_memory / memory_share
            if ratio > dominant_used:
                dominant_used = ratio
        else:
            zero_share_use = (
                (shares[0] <= EPSILON and asked_gpu > EPSILON)
                or (shares[1] <= EPSILON and asked_cpu > EPSILON)
                or (shares[2] <= EPSILON and asked_memory > EPSILON)
            )
            dominant = _dominant((with_gpu, with_cpu, with_memory), shares)
            dominant_used = _dominant((used_gpu, used_cpu, used_memory), shares)
        return (
            over_utilised,
            not starved,
            priority,
            zero_share_use,
            dominant,
            dominant_used,
            smaller_share,
            rank,
        )

    def _fixed_order_parts(self, queue: QueueInfo) -> _FixedOrderParts:
        """What `_order_key_at` reads of a queue that is fixed for the session: its fair share and deserved
        quota, its allocatable shares and whether each is above EPSILON (none counts use 1000 times over),
        its priority (negated: higher first), the shares' criterion, its rank."""
        shares = self._allocatable_shares(queue)
        return (
            queue.fair_share.values(),
            queue.deserved.values(),
            shares,
            shares[0] > EPSILON and shares[1] > EPSILON and shares[2] > EPSILON,
            -queue.priority,
            self._smaller_share_of(queue, shares),
            queue.rank,
        )

    def _smaller_share_of(
        self, queue: QueueInfo, shares: tuple[float, float, float]
    ) -> SmallerAllocatableShare:
        """The criterion of `queue`'s allocatable shares (`shares`), made once a session."""
        smaller_share = self._smaller_share.get(queue.name)
        if smaller_share is None:
            smaller_share = self._smaller_share[queue.name] = SmallerAllocatableShare(shares)
        return smaller_share

    def victim_queue_key(
        self, queue: QueueInfo, allocated: Resources, remaining: Resources
    ) -> tuple[Any, ...]:
        """The queue order key of a queue in a victim queue (KAI's queue order with no job, `allocated`
        the queue's allocation before any victim was taken, and the dominant-share criterion computed on
        `remaining`, the allocation once its victims so far and its next one are gone). Victims come from
        the queue whose key is the largest. Asked for each victim handed out: all but the dominant share
        of `remaining` is kept per queue and allocation."""
        shares = self._allocatable_shares(queue)
        memo = (queue.name, *allocated.values())
        known = self._victim_keys.get(memo)
        if known is None:
            fair, deserved = queue.fair_share, queue.deserved
            used = allocated.values()
            over_utilised = all(f < u - EPSILON for f, u in zip(fair.values(), used, strict=True))
            starved = all(
                is_unlimited(d) or u <= d + EPSILON for d, u in zip(deserved.values(), used, strict=True)
            )
            zero_share_use = any(
                share <= EPSILON and u > EPSILON for share, u in zip(shares, used, strict=True)
            )
            smaller_share = self._smaller_share_of(queue, shares)
            known = self._victim_keys[memo] = (
                (over_utilised, not starved, -queue.priority, zero_share_use),
                (_dominant(used, shares), smaller_share, queue.rank),
            )
        return (*known[0], _dominant(remaining.values(), shares), *known[1])

    # --- capacity checks -------------------------------------------------------------------------

    def _path_inputs(self, leaf: str) -> tuple[float | str | None, ...]:
        """All that `over_limit` and `non_preemptible_over_quota` read of the session for a job of queue
        `leaf`: on the queue path, the limits and quotas, and the allocations they bound (an unbounded
        resource's allocation is never read: a placement in a queue without limits moves no leaf's
        inputs below it). Kept per queue, and each queue's part, until a placement moves what they read
        (`_shift`): a first cycle places a pod between most two asks."""
        values = self._path_values.get(leaf)
        if values is None:
            values = ()
            segments = self._segments
            for queue, limits, deserved in self._bounds(leaf):
                segment = segments.get(queue.name)
                if segment is None:
                    # Read field by field (no `values()` calls): a first cycle makes one a queue on the
                    # path of most jobs it hands out.
                    used, fixed, inf = queue.allocated, queue.allocated_non_preemptible, math.inf
                    segment = segments[queue.name] = (
                        queue.name,
                        *limits,
                        *deserved,
                        used.gpu if limits[0] != inf else None,
                        used.cpu if limits[1] != inf else None,
                        used.memory if limits[2] != inf else None,
                        fixed.gpu if deserved[0] != inf else None,
                        fixed.cpu if deserved[1] != inf else None,
                        fixed.memory if deserved[2] != inf else None,
                    )
                values += segment
            self._path_values[leaf] = values
        return values

    def _moved_inputs(self, chain: list[QueueInfo]) -> tuple[_MovedInputs, _MovedInputs]:
        """What a placement in the queue of `chain` (it and its ancestors) moves of `_path_inputs`, for a
        preemptible job and for a non-preemptible one: the parts of the queues on the chain that read
        what moves, and the paths through them."""
        reads = self._input_reads or self._find_input_reads()

        def moved(non_preemptible: bool) -> _MovedInputs:
            parts: list[str] = []
            paths: dict[str, None] = {}  # (in order, each once)
            for queue in chain:
                reads_allocated, reads_non_preemptible, through = reads[queue.name]
                if reads_allocated or (non_preemptible and reads_non_preemptible):
                    parts.append(queue.name)
                    paths.update(dict.fromkeys(through))
            return tuple(parts), tuple(paths)

        return moved(False), moved(True)

    def _find_input_reads(self) -> dict[str, tuple[bool, bool, list[str]]]:
        """`_input_reads`, made."""
        assert self._session is not None
        queues = self._session.snapshot.queues
        unbounded = (math.inf, math.inf, math.inf)
        reads: dict[str, tuple[bool, bool, list[str]]] = {}
        for queue in queues:
            _, limits, deserved = self._bounds(queue.name)[0]
            reads[queue.name] = (limits != unbounded, deserved != unbounded, [])
        for queue in queues:
            for ancestor, _, _ in self._bounds(queue.name):
                reads[ancestor.name][2].append(queue.name)
        self._input_reads = reads
        return reads

    def _allocatable_shares(self, queue: QueueInfo) -> tuple[float, float, float]:
        """Fair shares do not change within a session, so neither do allocatable shares."""
        shares = self._shares.get(queue.name)
        if shares is None:
            assert self._session is not None
            shares = self._shares[queue.name] = allocatable_shares(queue, self._session.snapshot.capacity)
        return shares

    def _bounds(self, name: str) -> list[tuple[QueueInfo, tuple[float, ...], tuple[float, ...]]]:
        """Each queue on the path of queue `name` with its limits and its deserved quota per resource,
        unlimited as infinity (fixed for the session): what the capacity checks compare with. Made from
        its parent's path (the capacity checks and `_find_input_reads` ask for every queue's)."""
        bounds = self._path_bounds.get(name)
        if bounds is None:
            assert self._session is not None
            path: list[tuple[QueueInfo, tuple[float, ...], tuple[float, ...]]] = []
            for queue in reversed(self._session.snapshot.queues.ancestry(name)):
                known = self._path_bounds.get(queue.name)
                if known is None:
                    known = self._path_bounds[queue.name] = [
                        (queue, _unbounded_as_infinity(queue.limit), _unbounded_as_infinity(queue.deserved)),
                        *path,
                    ]
                path = known
            bounds = path
        return bounds

    def over_limit(self, job: JobInfo, request: Resources) -> str | None:
        """OverLimit: no queue on the job's path may go above its limit. Hot (every job allocate hands
        out, after every placement in a first cycle): compared over the bounds of the path's queues that
        have a limit (`_first_exceeded`: most paths have none, or one), the reason worded only for the
        queue that fails."""
        name = job.queue
        limited = self._limited.get(name)
        if limited is None:
            limited = self._limited[name] = [
                (queue, limits)
                for queue, limits, _ in self._bounds(name)
                if any(limit != math.inf for limit in limits)
            ]
        for queue, limits in limited:
            r = _first_exceeded(queue.allocated, request, limits)
            if r is not None:
                allocated, asked = queue.allocated.get(r), request.get(r)
                return WaitReason(
                    f"OverLimit: queue {queue.name} would exceed its {r} limit "
                    f"({_amount(r, allocated)} allocated + {_amount(r, asked)} requested "
                    f"> limit {_amount(r, effective_limit(queue, r))})",
                    OVER_LIMIT,
                )
        return None

    def non_preemptible_over_quota(self, job: JobInfo, request: Resources) -> str | None:
        """NonPreemptibleOverQuota: non-preemptible jobs live within deserved quota on the whole path
        (compared as `over_limit` does)."""
        if job.preemptible:
            return None
        name = job.queue
        quotas = self._quotas.get(name)
        if quotas is None:
            quotas = self._quotas[name] = [
                (queue, deserved)
                for queue, _, deserved in self._bounds(name)
                if any(quota != math.inf for quota in deserved)
            ]
        for queue, deserved in quotas:
            r = _first_exceeded(queue.allocated_non_preemptible, request, deserved)
            if r is not None:
                used, asked = queue.allocated_non_preemptible.get(r), request.get(r)
                return WaitReason(
                    f"NonPreemptibleOverQuota: non-preemptible job would take queue {queue.name} above its "
                    f"{r} quota ({_amount(r, used)} non-preemptible allocated + {_amount(r, asked)} "
                    f"requested > quota {_amount(r, queue.deserved.get(r))})",
                    NON_PREEMPTIBLE_OVER_QUOTA,
                )
        return None

    # --- reclaim ---------------------------------------------------------------------------------

    def can_reclaim(self, job: JobInfo, request: Resources) -> str | None:
        """A queue may reclaim only while it stays within its fair share (and a non-preemptible job
        within deserved quota)."""
        assert self._session is not None
        queue = self._session.snapshot.queues[job.queue]
        for r in RESOURCE_NAMES:
            if (
                request.get(r) > EPSILON
                and queue.allocated.get(r) + request.get(r) > queue.fair_share.get(r) + EPSILON
            ):
                held, asked = _amount(r, queue.allocated.get(r)), _amount(r, request.get(r))
                share = _amount(r, queue.fair_share.get(r))
                return f"queue {queue.name} would go above its {r} fair share ({held} + {asked} > {share})"
        return self.non_preemptible_over_quota(job, request)

    def may_reclaim_from(self, reclaimer: JobInfo, request: Resources, victim_queue: str) -> bool:
        """Whether any reclaim strategy could take a job of `victim_queue` for this reclaimer, before
        anything is taken (`victim_filter`: KAI v0.17 asks it whether consolidating reclaim is on or not)."""
        sides = self._reclaim_sides(reclaimer.queue, victim_queue)
        if sides is None:
            return False
        reclaimer_side, deserved, victim_side, share = sides
        # `_all_le(reclaimer_side.allocated.plus(request), deserved)` and `_all_le(victim_side.allocated,
        # share)` written out (the same float operations), the second only when `may_be_reclaimed` reads
        # it: reclaim asks this for every victim queue in each attempt.
        held = reclaimer_side.allocated
        within = (
            held.gpu + request.gpu <= deserved.gpu + EPSILON
            and held.cpu + request.cpu <= deserved.cpu + EPSILON
            and held.memory + request.memory <= deserved.memory + EPSILON
        )
        above_share = False
        if not within:
            taken = victim_side.allocated
            above_share = not (
                taken.gpu <= share.gpu + EPSILON
                and taken.cpu <= share.cpu + EPSILON
                and taken.memory <= share.memory + EPSILON
            )
        return may_be_reclaimed(
            victim_side, request, reclaimer_within_deserved=within, above_share=above_share
        )

    def _reclaim_sides(self, reclaimer_queue: str, victim_queue: str) -> _ReclaimSides | None:
        """Where a reclaimer's and a victim's branches split (None: on one branch), with the reclaimer
        side's deserved quota and the victim side's allocatable share: fixed for the session (the tree,
        quotas and fair shares are), so worked out once per pair of queues. Why: reclaim asks
        `may_reclaim_from` for every victim queue in each attempt (32,000 times in a first cycle at
        20,000 nodes), and walking both paths to the root was most of each call."""
        key = (reclaimer_queue, victim_queue)
        if key in self._sides:
            return self._sides[key]
        reclaimer_side, victim_side = _split(
            self._side_parts(reclaimer_queue)[0], self._side_parts(victim_queue)[0]
        )
        sides = None
        if reclaimer_side is not None and victim_side is not None:
            deserved = self._side_parts(reclaimer_side.name)[1]
            sides = (reclaimer_side, deserved, victim_side, self._side_parts(victim_side.name)[2])
        self._sides[key] = sides
        return sides

    def _side_parts(self, name: str) -> _SideParts:
        """What `_reclaim_sides` reads of queue `name`, fixed for the session: its path root first, its
        deserved quota and its allocatable share (a first cycle's reclaim asks for most pairs of its 50
        leaf queues: worked out per pair, the paths and shares were most of the victim filter's cost)."""
        parts = self._parts.get(name)
        if parts is None:
            assert self._session is not None
            queues = self._session.snapshot.queues
            queue = queues[name]
            parts = self._parts[name] = (
                list(reversed(queues.ancestry(name))),
                _deserved(queue, self._session.snapshot.capacity),
                Resources(*self._allocatable_shares(queue)),
            )
        return parts

    def _remember_allocations(self) -> None:
        assert self._session is not None
        self._before = {}
        if self._session.verify_carried:
            self._before_full = {q.name: q.allocated.copy() for q in self._session.snapshot.queues}

    def _allocations_before(self) -> dict[str, Resources]:
        """The allocations of the queues that moved since the search started, as they were then (the
        others are as they are now); with `verify_carried` compared with every queue's copied then."""
        assert self._session is not None
        before = self._before if self._before is not None else {}
        if self._before_full is not None:
            for queue in self._session.snapshot.queues:
                if before.get(queue.name, queue.allocated) != self._before_full[queue.name]:
                    raise CarriedMismatch(
                        f"queue {queue.name}: its allocation as the victim search started, saved as it "
                        "first moved, differs from the copy taken then"
                    )
        return before

    def reclaim_is_fair(self, reclaimer: JobInfo, request: Resources, victims: Sequence[TaskInfo]) -> bool:
        """KAI's reclaim rules, judged per victim unit and compared where the two queues' branches of
        the tree split. A victim job's first minMember pods taken (per pod set) form one unit, every
        further pod is a unit of its own (`_victim_units`); a unit may be taken if, before it is
        subtracted, the victim side is above its allocatable share (MaintainFairShare), or the reclaimer
        side stays within its deserved quota and the victim side is above its own (GuaranteeDeservedQuota).
        So taking a whole gang may bring a queue below its quota. Then no queue on the reclaimer's path
        may end up more saturated than a sibling that lost resources.

        Victims placed again count only when consolidating reclaim is off (KAI counts every victim
        then); allocations are those from before the search (`on_solution_start`)."""
        assert self._session is not None
        session = self._session
        queues = session.snapshot.queues
        total = session.snapshot.capacity
        before = self._allocations_before()
        reclaimer_path = list(reversed(queues.ancestry(reclaimer.queue)))
        remaining: dict[str, Resources] = {}
        involved: dict[str, set[str]] = {}

        def left(name: str) -> Resources:
            amount = remaining.get(name)
            if amount is None:
                amount = remaining[name] = before.get(name, queues[name].allocated).copy()
            return amount

        # Per victim queue, what does not change from one unit to the next: where the branches split,
        # the victim side's allocatable share and deserved quota, whether the reclaimer side stays within
        # its deserved quota.
        sides: dict[str, tuple[QueueInfo, Resources, Resources, bool] | None] = {}
        count_moved = not session.config.allow_consolidating_reclaim
        for queue_name, amount in _victim_units(victims, self._task_resources, count_moved):
            if queue_name not in sides:
                reclaimer_side, victim_side = _split(
                    reclaimer_path, list(reversed(queues.ancestry(queue_name)))
                )
                if victim_side is None or reclaimer_side is None:
                    sides[queue_name] = None
                else:
                    share = Resources(*allocatable_shares(victim_side, total))
                    reclaimer_before = before.get(reclaimer_side.name, reclaimer_side.allocated)
                    within = _all_le(reclaimer_before.plus(request), _deserved(reclaimer_side, total))
                    sides[queue_name] = (victim_side, share, _deserved(victim_side, total), within)
            side = sides[queue_name]
            if side is None:
                return False
            victim_side, share, victim_deserved, within_deserved = side
            victim_left = left(victim_side.name)
            maintain = not _all_le(victim_left, share)
            guarantee = within_deserved and not _all_le(victim_left, victim_deserved)
            if not (maintain or guarantee):
                return False
            names = {r for r in RESOURCE_NAMES if amount.get(r) > 0}
            for q in queues.ancestry(queue_name):
                left(q.name).sub(amount)
                involved.setdefault(q.name, set()).update(names)
        asked = {r for r in RESOURCE_NAMES if request.get(r) > 0}
        for level in queues.ancestry(reclaimer.queue):
            mine = remaining.get(level.name, before.get(level.name, level.allocated)).plus(request)
            for name, sibling_left in remaining.items():
                sibling = queues[name]
                if sibling.parent != level.parent or sibling.name == level.name:
                    continue
                if self._more_saturated(involved[name] | asked, mine, level, sibling_left, sibling):
                    return False
        return True

    def _more_saturated(
        self,
        resources: set[str],
        reclaimer_after: Resources,
        reclaimer: QueueInfo,
        sibling_left: Resources,
        sibling: QueueInfo,
    ) -> bool:
        """Whether the reclaimer's side would end up above its fair share and at least as saturated
        (times relcaimerSaturationMultiplier) as a sibling it took from, in a resource involved."""
        for r in resources:
            fair, sibling_fair = reclaimer.fair_share.get(r), sibling.fair_share.get(r)
            ratio = _saturation(reclaimer_after.get(r), fair)
            if (
                ratio > 1 + EPSILON
                and sibling_fair > EPSILON
                and ratio * self.reclaimer_saturation_multiplier
                >= _saturation(sibling_left.get(r), sibling_fair)
            ):
                return True
        return False


def _first_exceeded(used: Resources, request: Resources, bounds: tuple[float, ...]) -> str | None:
    """The first resource (gpu, cpu, memory) that `request` asks for and that on top of `used` goes above
    `bounds` (unlimited is infinity), as the capacity checks compare; None: none (written out: asked for
    every job handed out)."""
    gpu, cpu, memory = request.gpu, request.cpu, request.memory
    if gpu > EPSILON and used.gpu + gpu > bounds[0] + EPSILON:
        return "gpu"
    if cpu > EPSILON and used.cpu + cpu > bounds[1] + EPSILON:
        return "cpu"
    if memory > EPSILON and used.memory + memory > bounds[2] + EPSILON:
        return "memory"
    return None


def _saturation(allocated: float, fair_share: float) -> float:
    """allocated / fair share; a fair share of 0 makes any allocation infinitely saturated."""
    if fair_share <= EPSILON:
        return float("inf") if allocated > EPSILON else 0.0
    return allocated / fair_share


def _victim_units(
    victims: Sequence[TaskInfo], resources_of: Callable[[TaskInfo], Resources], count_moved: bool
) -> list[tuple[str, Resources]]:
    """The victims as KAI's reclaim rules weigh them: per job (in the order taken), each pod taken
    beyond the first minMember of its pod set is a unit of its own, then the first minMember pods of
    every pod set together are one unit (the gang). A unit weighs what its pods that stay evicted hold
    (every pod's, with `count_moved`); units that weigh nothing are left out. (queue, amount) pairs."""
    by_job: dict[int, list[TaskInfo]] = {}
    for task in victims:
        by_job.setdefault(id(task.job), []).append(task)
    units: list[tuple[str, Resources]] = []
    for tasks in by_job.values():
        by_podset: dict[int, list[TaskInfo]] = {}
        for task in tasks:
            by_podset.setdefault(id(task.podset), []).append(task)
        gang: list[TaskInfo] = []
        extra: list[TaskInfo] = []
        for members in by_podset.values():
            core = members[0].podset.min_member
            gang.extend(members[:core])
            extra.extend(members[core:])
        for unit in [[task] for task in extra] + [gang]:
            amount = Resources()
            for task in unit:
                if count_moved or task.status is TaskStatus.RELEASING:
                    amount.add(resources_of(task))
            if any(value > EPSILON for value in amount.values()):
                units.append((tasks[0].job.queue, amount))
    return units


class SmallerAllocatableShare:
    """Queue order criterion 7 as an element of the sort key: a queue whose allocatable share is
    smaller, ≤ in every resource and < in at least one, goes first; when neither queue's shares are
    below the other's (equal, or each smaller in a different resource) the criterion does not decide,
    and the next element (creation) does.

    The element compares as KAI's pairwise comparator does: `<` is "dominates" and `==` is "neither
    dominates", so a tuple comparison moves on to the queue's creation rank exactly when KAI's
    comparator would. That relation is a partial order plus a tie-break, not a strict weak ordering:
    with three or more queues it can be cyclic (A dominates C, C is older than B, B older than A, with
    B incomparable to both), and then no order agrees with every pair. The consumer picks the best
    child by one scan with `<` (`QueueOrderedJobs._best_child`), which in such a cycle returns a queue
    that none of the queues after it in the scan beats, deterministically by the tree's child order, as
    KAI's heap returns one that depends on its insertion order. The alternative, a lexicographic tuple
    of shares (a total order that extends dominance), would be a strict weak ordering but would decide
    every incomparable pair by the first resource instead of by creation, which is wrong for two queues
    as well. Cycles need criteria 1-6 to tie across three queues, which is rare."""

    __slots__ = ("shares",)

    def __init__(self, shares: tuple[float, float, float]) -> None:
        self.shares = shares

    def __lt__(self, other: SmallerAllocatableShare) -> bool:
        return _dominates(self.shares, other.shares)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SmallerAllocatableShare):
            return NotImplemented
        return not _dominates(self.shares, other.shares) and not _dominates(other.shares, self.shares)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SmallerAllocatableShare({self.shares})"


def _same_order_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two queue order keys are the same (their allocatable shares by value: `==` of
    `SmallerAllocatableShare` says only that neither dominates)."""
    return len(a) == len(b) and all(
        x.shares == y.shares
        if isinstance(x, SmallerAllocatableShare) and isinstance(y, SmallerAllocatableShare)
        else type(x) is type(y) and x == y
        for x, y in zip(a, b, strict=True)
    )


def _check_weakly_ordered(shares: tuple[tuple[float, float, float], ...], known: bool) -> None:
    """A kept answer of `_siblings_weakly_ordered` worked out again (`verify_carried`)."""
    if known != _dominance_is_total(set(shares)):
        raise CarriedMismatch(
            f"whether siblings of allocatable shares {shares!r} are weakly ordered, kept, differs from "
            "working it out again"
        )


def _dominance_is_total(shares: set[tuple[float, float, float]]) -> bool:
    """Whether `_dominates` orders `shares` totally: every two compare, and no three make a cycle (with
    `EPSILON` the relation need not be transitive): the i-th of n dominates exactly n - 1 - i others.
    Each pair is compared once each way, for both questions."""
    distinct = list(shares)
    dominated = [0] * len(distinct)
    for index, a in enumerate(distinct):
        for other in range(index + 1, len(distinct)):
            b = distinct[other]
            a_over_b, b_over_a = _dominates(a, b), _dominates(b, a)
            if not (a_over_b or b_over_a):
                return False
            dominated[index] += a_over_b
            dominated[other] += b_over_a
    return sorted(dominated) == list(range(len(distinct)))


def _dominates(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """a ≤ b in every resource and a < b in at least one. Written out per resource (no generators): the
    queue order compares every two siblings' allocatable shares once a cycle."""
    a_gpu, a_cpu, a_memory = a
    b_gpu, b_cpu, b_memory = b
    return (
        a_gpu <= b_gpu + EPSILON
        and a_cpu <= b_cpu + EPSILON
        and a_memory <= b_memory + EPSILON
        and (a_gpu < b_gpu - EPSILON or a_cpu < b_cpu - EPSILON or a_memory < b_memory - EPSILON)
    )


def _number(arguments: dict[str, Any], key: str, default: float) -> float:
    return number("proportion", arguments, key, default)


def _split(path_a: list[QueueInfo], path_b: list[QueueInfo]) -> tuple[QueueInfo | None, QueueInfo | None]:
    """The two queues just below the lowest common ancestor of two root-first paths."""
    for a, b in zip(path_a, path_b, strict=False):
        if a.name != b.name:
            return a, b
    return None, None


def _deserved(queue: QueueInfo, total: Resources) -> Resources:
    return Resources(*(effective_deserved(queue, r, total.get(r)) for r in RESOURCE_NAMES))


def _all_le(a: Resources, b: Resources) -> bool:
    return all(a.get(r) <= b.get(r) + EPSILON for r in RESOURCE_NAMES)


def _amount(resource: str, value: float) -> str:
    if resource == "cpu":
        return f"{value / 1000:g} CPU"
    if resource == "memory":
        return f"{value / 2**30:.3g}Gi memory"
    return f"{value:g} GPU"


def allocatable_share(queue: QueueInfo, resource: str, total: float) -> float:
    """min(limit, max(deserved, fairShare)); unlimited counts as the cluster's total."""
    return _allocatable(
        queue.deserved.get(resource), queue.limit.get(resource), queue.fair_share.get(resource), total
    )


def allocatable_shares(queue: QueueInfo, total: Resources) -> tuple[float, float, float]:
    """`allocatable_share` of every resource (gpu, cpu, memory), field by field: a session asks it of
    every queue."""
    deserved, limit, fair_share = queue.deserved, queue.limit, queue.fair_share
    return (
        _allocatable(deserved.gpu, limit.gpu, fair_share.gpu, total.gpu),
        _allocatable(deserved.cpu, limit.cpu, fair_share.cpu, total.cpu),
        _allocatable(deserved.memory, limit.memory, fair_share.memory, total.memory),
    )


def _allocatable(deserved: float, limit: float, fair_share: float, total: float) -> float:
    """`allocatable_share` of one resource from its amounts (`max` and `min` written out as they pick:
    the first of equals)."""
    if is_unlimited(deserved):
        deserved = total
    share = fair_share if fair_share > deserved else deserved
    if is_unlimited(limit):
        limit = math.inf
    return share if share < limit else limit


def _unbounded_as_infinity(amounts: Resources) -> tuple[float, float, float]:
    """A queue's limits or quotas per resource (gpu, cpu, memory), unlimited as infinity."""
    gpu, cpu, memory = amounts.gpu, amounts.cpu, amounts.memory
    return (
        math.inf if is_unlimited(gpu) else gpu,
        math.inf if is_unlimited(cpu) else cpu,
        math.inf if is_unlimited(memory) else memory,
    )


def _dominant(amounts: tuple[float, ...], shares: tuple[float, float, float]) -> float:
    """The largest used/share ratio; a share of 0 makes any use count 1000 times over (as KAI). Written
    out per resource (no zip): a first cycle asks it twice for each queue order key it works out."""
    gpu, cpu, memory = amounts
    gpu_share, cpu_share, memory_share = shares
    dominant = 0.0
    ratio = gpu * _ZERO_SHARE_PENALTY if gpu_share <= EPSILON else gpu / gpu_share
    if ratio > dominant:
        dominant = ratio
    ratio = cpu * _ZERO_SHARE_PENALTY if cpu_share <= EPSILON else cpu / cpu_share
    if ratio > dominant:
        dominant = ratio
    ratio = memory * _ZERO_SHARE_PENALTY if memory_share <= EPSILON else memory / memory_share
    if ratio > dominant:
        dominant = ratio
    return dominant


def dominant_share(amount: Resources, shares: dict[str, float]) -> float:
    """The largest used/share ratio of `amount` over per-resource `shares`."""
    return _dominant(amount.values(), (shares["gpu"], shares["cpu"], shares["memory"]))


def account_queues(
    snapshot: ClusterSnapshot, carried: CarriedQueueSums | None = None, *, verify: bool = False
) -> None:
    """Allocated (bound pods), non-preemptible allocated, and requested (allocated + pending), up the tree.

    Each job's pods are summed, then every queue adds up the sums of the jobs at or below it, job by job
    in the snapshot's order (so that fractional GPUs add up to the same bits every cycle). With the sums
    `carried` from the last cycle, only the queue paths of the jobs that changed since are summed again,
    when that gives the same bits (`framework.queue_sums`; `verify`: sum in full too and raise
    `CarriedMismatch` on any difference)."""
    queues = snapshot.queues
    totals = carried.totals(snapshot) if carried is not None else None
    if totals is None or verify:
        full, rows = summed_queues(snapshot)
        if totals is not None and totals != full:
            different = next(q.name for q, a, b in zip(queues, totals, full, strict=True) if a != b)
            raise CarriedMismatch(
                f"queue {different}: its sums carried from the last cycle differ from the full sums"
            )
        if totals is None and carried is not None:
            carried.adopt(full, rows)
        totals = full
    for queue, row in zip(queues, totals, strict=True):
        queue.allocated = Resources(row[0], row[1], row[2])
        queue.request = Resources(row[3], row[4], row[5])
        queue.allocated_non_preemptible = Resources(row[6], row[7], row[8])


def summed_queues(snapshot: ClusterSnapshot) -> tuple[list[QueueTotals], JobRows]:
    """Each queue's totals (`QueueTotals`, in the tree's order) summed from every job, and what each job
    added. Hot when nothing is carried: it visits every job of the cluster, so each job's sums are kept on
    it and the per-queue additions are done by numpy."""
    queues = snapshot.queues
    gpu_memory = snapshot.nodes.gpu_memory_mib
    pending_gpu_memory = snapshot.min_gpu_memory_mib
    names = [queue.name for queue in queues]
    position = {name: i for i, name in enumerate(names)}
    # Per job in order: its key, its queue's position, whether it is preemptible, and its row of six
    # numbers (`every_job_sums`): its allocated then its pending (gpu, cpu, memory).
    keys = list(snapshot.jobs)
    jobs = list(snapshot.jobs.values())
    job_queue = [position.get(job.queue, -1) for job in jobs]
    if -1 in job_queue:  # (a job of a queue the tree does not have adds to none)
        counted = [i for i, where in enumerate(job_queue) if where >= 0]
        keys, jobs = [keys[i] for i in counted], [jobs[i] for i in counted]
        job_queue = [job_queue[i] for i in counted]
    preemptible = [job.preemptible for job in jobs]
    distinct, rows = distinct_job_sums(jobs, gpu_memory, pending_gpu_memory)
    added = JobRows(keys, job_queue, preemptible, distinct, rows)
    if not jobs:
        return [(0.0,) * 9 for _ in names], added
    totals = _counted_queue_totals(distinct, rows, job_queue, preemptible, queues, position)
    if totals is None:
        table = distinct[rows]
        totals = _queue_totals(table, job_queue, preemptible, _ancestors_by_depth(queues, position))
    return totals, added


def _counted_queue_totals(
    distinct: FloatArray,
    rows: IntArray,
    job_queue: list[int],
    preemptible: list[bool],
    queues: QueueTree,
    position: dict[str, int],
) -> list[QueueTotals] | None:
    """`_queue_totals` of the jobs whose sums are the rows `rows` of `distinct`, added per queue and
    preemptibility once, then up the tree by a matrix product; None where that could give other bits
    than the job-by-job sum (the sums are not all exact, `sums_are_exact`). Exact sums add up to the same
    bits in any order and grouping: a first cycle's are (whole GPUs, binary fractions of one,
    millicores, bytes), and this is one `bincount` of each job's six sums and a few small numpy calls,
    where adding each job's twelve additions at every depth of the tree reads and writes arrays of them
    all."""
    if not sums_are_exact(distinct, np.bincount(rows, minlength=len(distinct))):
        return None
    queue_count = len(position)
    queue_of = np.fromiter(job_queue, dtype=np.intp, count=len(job_queue))
    non_preemptible = ~np.fromiter(preemptible, dtype=np.bool_, count=len(preemptible))
    # Each job's six sums to the bins of its queue and preemptibility (six a pair, in the sums' order).
    bins = ((queue_of * 2 + non_preemptible) * 6)[:, np.newaxis] + np.arange(6)
    own = np.bincount(bins.ravel(), weights=distinct[rows].ravel(), minlength=queue_count * 12)
    own = own.reshape(queue_count, 2, 6)  # per queue: preemptible, non-preemptible jobs' sums
    allocated = own[:, 0, :3] + own[:, 1, :3]
    pending = own[:, 0, 3:] + own[:, 1, 3:]
    own_totals = np.concatenate((allocated, allocated + pending, own[:, 1, :3]), axis=1)
    return [tuple(row) for row in (_subtrees(queues, position) @ own_totals).tolist()]


def _subtrees(queues: QueueTree, position: dict[str, int]) -> FloatArray:
    """A queue-by-queue matrix (by position) with 1 where the row's queue is the column's or one of its
    ancestors: a queue's totals are those of the queues of its subtree."""
    subtree = np.zeros((len(position), len(position)))
    for name, column in position.items():
        for ancestor in queues.ancestry(name):
            subtree[position[ancestor.name], column] = 1.0
    return subtree


# Each job's twelve additions to its queues' totals, in the order a job-by-job sum makes them: its
# allocated (gpu, cpu, memory) to the queue's allocated, its allocated then its pending to the queue's
# request, its allocated to the queue's non-preemptible allocated. By the column of the job's sums each
# takes, and the column of `QueueTotals` (allocated, request, non-preemptible: three each) it adds to.
_ADDED_SUMS: Final = np.array([0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1, 2], dtype=np.int64)
_ADDED_TO: Final = np.array([0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8], dtype=np.int64)
_NON_PREEMPTIBLE_ADDITIONS: Final = slice(9, 12)


def _queue_totals(
    table: FloatArray, job_queue: list[int], preemptible: list[bool], ancestors: list[IntArray]
) -> list[QueueTotals]:
    """Every queue's nine totals from the jobs' sums (`table`, a row per job in snapshot order, with each
    job's queue position and preemptibility), by one weighted `bincount`: it adds each addition of a job
    (`_ADDED_SUMS`) to its bin in array order, so every bin (a queue at a depth of the tree, and a column
    of its totals) adds its jobs' values one by one in snapshot order, as a job-by-job sum does. The
    queues at one depth hold disjoint sets of jobs. Only the additions that change a total are made: an
    addition of zero leaves a bin's bits as they are (a bin starts at +0.0 and never holds -0.0), and a
    pending job adds nothing but zeros to its queue's allocated totals; a preemptible job's
    non-preemptible additions, and a job's additions at a depth where its queue has no ancestor (it is
    shallower), are left out."""
    queue_count = ancestors[0].size if ancestors else 0
    bins_per_depth = queue_count * 9
    additions = table[:, _ADDED_SUMS]
    counted = additions != 0.0
    is_preemptible = np.fromiter(preemptible, dtype=np.bool_, count=len(preemptible))
    counted[is_preemptible, _NON_PREEMPTIBLE_ADDITIONS] = False
    job_of, addition_of = np.nonzero(counted)  # (row-major: job by job, and each job's additions in order)
    weights = additions[job_of, addition_of]
    queue_of = np.fromiter(job_queue, dtype=np.int64, count=len(job_queue))[job_of]
    added_to = _ADDED_TO[addition_of]
    bins = []
    for depth, ancestor_at_depth in enumerate(ancestors):
        owner = ancestor_at_depth[queue_of]  # each addition's queue at this depth (-1: none, it is shallower)
        bins.append(np.where(owner < 0, -1, owner * 9 + depth * bins_per_depth + added_to))
    every_bin = np.concatenate(bins)
    has_bin = every_bin >= 0
    summed = np.bincount(
        every_bin[has_bin],
        weights=np.tile(weights, len(ancestors))[has_bin],
        minlength=len(ancestors) * bins_per_depth,
    )
    totals = np.zeros((queue_count, 9))
    for depth_totals in summed.reshape(len(ancestors), queue_count, 9):
        totals += depth_totals  # (each queue's at its own depth; zeros at the others, as before)
    return [tuple(row) for row in totals.tolist()]


def _ancestors_by_depth(queues: QueueTree, position: dict[str, int]) -> list[IntArray]:
    """Per depth of the tree (roots first): for each queue (by position), its ancestor at that depth (itself
    at its own depth), or -1 where the queue is shallower."""
    chains = {name: [q.name for q in reversed(queues.ancestry(name))] for name in position}
    depths = max(len(chain) for chain in chains.values())
    table = np.full((depths, len(position)), -1, dtype=np.int64)
    for name, chain in chains.items():
        for depth, ancestor in enumerate(chain):
            table[depth, position[name]] = position[ancestor]
    return list(table)


# Time-based fairness compares usage at 1% of the cluster: as two queues' usages converge, differences
# of a few hundredths of a percent would otherwise flip a whole GPU of fair share between them every
# usage bucket, and reclaim would move pods back and forth.
USAGE_DECIMALS = 2


def compute_fair_shares(
    queues: QueueTree,
    capacity: Resources,
    k_value: float,
    recorder: DivisionRecorder | None = None,
    *,
    carried: dict[str, LevelShares] | None = None,
    verify: bool = False,
) -> None:
    """Fair share per resource, top-down through the tree; queues detached by a flattened tree report
    the sum of their leaves. A `recorder` is told every step of every resource's division.

    With the divisions `carried` from the last session (not with a recorder, which is told every step), a
    resource whose inputs are all the bits they were gets the shares it got then, and otherwise only the
    levels whose inputs moved are divided again (`division.divide`); `verify`: divide in full too and
    raise `CarriedMismatch` on any difference in the bits. `carried` holds per resource its levels, and
    under "<resource> tree" the whole division's inputs and shares (as the top level's entry)."""
    reused = carried if recorder is None else None
    inputs = _share_inputs(queues)
    # Everything the divisions of all three resources read: a resource keeps its shares while it is the same.
    signature = _division_inputs(inputs, capacity, k_value) if reused is not None else None
    order: TreeOrder | None = None  # (the same for every resource: worked out by the first one divided)
    by_resource = []
    for resource, resource_inputs in zip(RESOURCE_NAMES, inputs, strict=True):
        total = max(capacity.get(resource), 0.0)
        if recorder is not None:
            recorder.resource(resource, total, k_value)
        shares: dict[str, float] | None = None
        whole = reused.setdefault(f"{resource} tree", {}) if reused is not None else None
        if whole is not None:
            known = whole.get(None)
            if known is not None and known[0] == signature:
                shares = known[1]
        if shares is None:
            if order is None:
                order = tree_order(resource_inputs)
            shares = divide(
                total,
                resource_inputs,
                k_value=k_value,
                unit=1.0,
                recorder=recorder,
                carried=reused.setdefault(resource, {}) if reused is not None else None,
                order=order,
            )
            if whole is not None:
                whole[None] = (signature, shares)
        if verify and reused is not None:
            full = divide(total, resource_inputs, k_value=k_value, unit=1.0)
            _check_carried_shares(resource, shares, full)
        by_resource.append(shares)
        for parent, leaves in queues.detached.values():
            parent.fair_share.set(resource, sum(shares.get(name, 0.0) for name in leaves))
            if recorder is not None:
                recorder.detached(parent.name, leaves)
    gpu, cpu, memory = by_resource
    for queue in queues:
        name, fair_share = queue.name, queue.fair_share
        fair_share.gpu = gpu.get(name, 0.0)
        fair_share.cpu = cpu.get(name, 0.0)
        fair_share.memory = memory.get(name, 0.0)


# Every queue's inputs to the division of each resource (gpu, cpu, memory).
_ShareInputs = tuple[list[QueueShareInput], list[QueueShareInput], list[QueueShareInput]]


def _share_inputs(queues: QueueTree) -> _ShareInputs:
    """Every queue's division inputs for each resource, read off the queues in one pass (field by field:
    a session reads 55 queues' five amounts of three resources)."""
    gpu: list[QueueShareInput] = []
    cpu: list[QueueShareInput] = []
    memory: list[QueueShareInput] = []
    make = QueueShareInput._make  # (the fields in order, without a call of the class's `__new__` in Python)
    for q in queues:
        names = (q.name, q.parent, q.priority, q.rank)
        deserved, limit, weight, request = q.deserved, q.limit, q.weight, q.request
        usage = q.usage.values()
        # Zeros (time-based fairness off: every queue's) are kept as they are, the bits `round` gives them.
        if usage != (0.0, 0.0, 0.0):
            usage = (
                round(usage[0], USAGE_DECIMALS),
                round(usage[1], USAGE_DECIMALS),
                round(usage[2], USAGE_DECIMALS),
            )
        gpu.append(make((*names, deserved.gpu, limit.gpu, weight.gpu, request.gpu, usage[0])))
        cpu.append(make((*names, deserved.cpu, limit.cpu, weight.cpu, request.cpu, usage[1])))
        memory.append(make((*names, deserved.memory, limit.memory, weight.memory, request.memory, usage[2])))
    return gpu, cpu, memory


def _division_inputs(inputs: _ShareInputs, capacity: Resources, k_value: float) -> Hashable:
    """What `compute_fair_shares` divides by, for every resource: the queues' names, parents, priorities
    and ranks, and the numbers of their inputs (`_share_inputs`) with the capacity and `k_value`, as
    their bits (0.0 and -0.0 differ: the shares given could differ in sign)."""
    numbers = [*capacity.values(), k_value]
    for resource_inputs in inputs:
        for q in resource_inputs:
            numbers += (q.deserved, q.limit, q.over_quota_weight, q.request, q.usage)
    return (tuple((q.name, q.parent, q.priority, q.creation_rank) for q in inputs[0]), float_bits(numbers))


def _check_carried_shares(resource: str, carried: dict[str, float], full: dict[str, float]) -> None:
    """Raise `CarriedMismatch` unless `carried` (shares partly carried) are the bits of `full`."""
    for name in carried.keys() | full.keys():
        mine, share = carried.get(name), full.get(name)
        if mine is None or share is None or mine.hex() != share.hex():
            raise CarriedMismatch(
                f"queue {name}: its {resource} fair share carried from the last cycle ({mine!r}) differs "
                f"from the full division's ({share!r})"
            )


def _check_kept_request(session: Session, job: JobInfo, request: Resources) -> None:
    """Raise `CarriedMismatch` unless `request`, kept for `job` at its version by the queue order, is its
    next request now."""
    fresh = next_request(session, job)
    if fresh.values() != request.values():
        raise CarriedMismatch(
            f"{job.key}: its next request kept for the queue order ({request!r}) is now {fresh!r}"
        )
