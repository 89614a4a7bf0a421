"""What a session decides: the only thing that leaves the scheduling core."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kai_scheduler.api.numa_placement import NumaZonePlacement
from kai_scheduler.api.objects import AllocationResult, ContainerExtendedResourceRequest, DeviceRequest
from kai_scheduler.framework.search_record import SearchRecord
from kai_scheduler.model.fair_share_record import FairShareRecord
from kai_scheduler.model.reservations import Reservation

DecisionType = Literal["bind", "pipeline", "evict"]


@dataclass(frozen=True, slots=True)
class ClaimAllocation:
    """A DRA claim of a pod being bound and the devices it gets, as KAI's BindRequest carries it
    (`resourceClaimAllocations`): the binder writes the allocation into the claim before the bind."""

    name: str  # the pod's name for the claim (`spec.resourceClaims[].name`)
    claim: str  # the ResourceClaim, namespace/name
    allocation: AllocationResult


@dataclass(frozen=True, slots=True)
class ExtendedClaimAllocation:
    """The claim a pod's DRA-backed extended resources get on its node (KEP-5004), as KAI's BindRequest
    carries it (`extendedResourceClaimAllocation`): the binder creates the claim with these requests,
    writes the allocation and names the claim in the pod's status with these container mappings."""

    allocation: AllocationResult
    device_requests: tuple[DeviceRequest, ...]
    container_mappings: tuple[ContainerExtendedResourceRequest, ...]


# Not frozen (a frozen dataclass sets each of its ten fields through object.__setattr__: a first cycle at
# 5,000 nodes makes ~20,000, 2% of its time), but hashed as a frozen one would be: never changed once made
# (a plugin adding to one makes a new one, `dataclasses.replace`).
@dataclass(slots=True, unsafe_hash=True)
class Decision:
    """One bind, pipeline or evict, with the action that took it and a reason a person can read.

    `gpu_groups` names the shared GPUs the pod gets (bind, pipeline) or frees (evict); `claims` the DRA
    claims a bound pod gets, with their devices, and `extended_claim` the claim made for its DRA-backed
    extended resources; `for_job` the pod group a victim action acted for (its preemptor: the evictions,
    the moves and its own pods' pipelines; empty elsewhere); `numa_zones` the NUMA zones a bound pod is
    predicted to take (the numa plugin; empty without it)."""

    action: str
    type: DecisionType
    pod: str  # namespace/name
    node: str
    gpu_groups: tuple[str, ...]
    reason: str
    claims: tuple[ClaimAllocation, ...] = ()
    extended_claim: ExtendedClaimAllocation | None = None
    for_job: str = ""
    numa_zones: tuple[NumaZonePlacement, ...] = ()


@dataclass(frozen=True, slots=True)
class Ungating:
    """The `ungate` action's decision on one pod group: remove the queue-admission gate (and that gate only)
    from `pods`, because its queue's quota and limit admit them (or gating no longer applies: `reason`)."""

    job: str  # namespace/name of the pod group
    queue: str
    pods: tuple[str, ...]  # namespace/name, oldest first
    reason: str


@dataclass(slots=True)
class ActionCounts:
    """What one action tried in a session, for metrics: pod groups it took up (each time it took one up),
    eviction scenarios it simulated, and scenarios a cheap filter ruled out before simulating them."""

    acted_on: int = 0
    scenarios_simulated: int = 0
    scenarios_filtered: int = 0
    # The victim search, for its metrics (times in it: not part of comparing counts).
    search: SearchRecord = field(default_factory=SearchRecord, compare=False)


@dataclass(frozen=True, slots=True)
class SessionResult:
    """Decisions in the order they were taken, why jobs still wait, and the fair share computed; then what
    the session measured about itself for metrics (no I/O: seconds on `time.perf_counter`)."""

    decisions: list[Decision]
    unschedulable: dict[str, str]  # job key -> reason
    fair_share: dict[str, tuple[float, float, float]]  # queue -> (gpu, cpu millicores, memory bytes)
    stale_since: dict[str, float | None] = field(default_factory=dict)  # job -> stale since (None: not stale)
    # The earliest time at which a decision taken now may change by the clock alone (a victim's minimum
    # runtime runs out), for an edge that would otherwise sleep until the next event.
    wake_at: float | None = None
    # Opening the session (the Session and every plugin's on_session_open) and closing it (every plugin's
    # on_session_close and this result), in seconds.
    open_seconds: float = 0.0
    close_seconds: float = 0.0
    action_seconds: dict[str, float] = field(default_factory=dict)  # action -> its execute, seconds
    plugin_open_seconds: dict[str, float] = field(default_factory=dict)  # plugin -> on_session_open
    plugin_close_seconds: dict[str, float] = field(default_factory=dict)  # plugin -> on_session_close
    counts: dict[str, ActionCounts] = field(default_factory=dict)  # action -> what it tried
    # The fair-share division step by step, when the session was asked to record it (`Session`).
    fair_share_record: FairShareRecord | None = None
    # Pod groups whose queue-admission gate comes off (the `ungate` action), in the order admitted.
    ungates: list[Ungating] = field(default_factory=list)
    # Reservation and backfill (`plugins.reservation`): the jobs whose reservation the cycle made, moved or
    # let go (None), for the edge to keep with the job's other times; and the jobs it placed on reserved
    # capacity because they are expected to end before the reservation starts (backfilled), in order.
    reservations: dict[str, Reservation | None] = field(default_factory=dict)
    backfilled: list[str] = field(default_factory=list)
