"""Jobs (pod groups), their pod sets (gang units) and tasks (pods), as one scheduling session sees them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, NamedTuple

from kai_scheduler.api.objects import Affinity, Toleration
from kai_scheduler.model.admission import AdmissionFacts
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.resources import PodRequest


class TaskStatus(Enum):
    """KAI's pod statuses, reduced to the ones a snapshot and a session produce."""

    PENDING = "Pending"
    ALLOCATED = "Allocated"  # placed in this session, to be bound
    PIPELINED = "Pipelined"  # placed on resources that are still being released
    RUNNING = "Running"  # bound to a node (Bound/Running)
    RELEASING = "Releasing"  # terminating or evicted: still holds its node's resources
    # Deleted longer ago than the threshold (`model.releasing`): holds them as used, not releasing.
    STUCK_IN_RELEASING = "StuckInReleasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    # Members are singletons compared by identity, so they may hash by identity too: `status in
    # OCCUPYING` is asked of every pod each cycle, and Enum's own hash (of the name) is a Python call.
    __hash__ = object.__hash__


# Statuses whose pods occupy node resources, and those counted as the queue's allocation.
OCCUPYING: Final = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.RUNNING,
        TaskStatus.RELEASING,
        TaskStatus.STUCK_IN_RELEASING,
    }
)
ALLOCATED: Final = frozenset({TaskStatus.ALLOCATED, TaskStatus.RUNNING})
# Active-allocated: counts toward a gang's minMember (KAI: allocated, pipelined, bound, running).
ACTIVE_ALLOCATED: Final = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RUNNING})
# Looked up once: Python 3.11 finds an enum's member through the hook `EnumType.__getattr__` puts on every
# lookup of the class's attributes (~10x a global's cost), and these are asked of every pod.
_ALLOCATED_STATUS: Final = TaskStatus.ALLOCATED
_PENDING: Final = TaskStatus.PENDING
_PIPELINED: Final = TaskStatus.PIPELINED
_RUNNING: Final = TaskStatus.RUNNING
_SUCCEEDED: Final = TaskStatus.SUCCEEDED


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod's placement constraints. Pods with equal placements pass the same static predicates, so the
    session computes those once per distinct placement (`key`)."""

    key: str
    node_selector: dict[str, str]
    affinity: Affinity | None
    tolerations: tuple[Toleration, ...]
    has_pod_affinity: bool
    # What the ConfigMap and volume-binding predicates read (`model.storage`): the ConfigMaps the pod needs
    # and the PersistentVolumeClaims it mounts, as `namespace/name` (usually none).
    config_maps: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()


# A host port bound on every address of the node (Kubernetes' default host IP).
ALL_HOST_IPS: Final = "0.0.0.0"


class HostPort(NamedTuple):
    """A port a pod takes on its node (a container port with a `hostPort`), as Kubernetes' NodePorts
    filter compares them: the protocol defaults to TCP and the host IP to 0.0.0.0 (every address)."""

    protocol: str
    host_ip: str
    port: int


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """Where a job (or one of its pod sets) must or would rather run: all in one domain of the
    `required` level, and if possible all in one domain of the `preferred` level (node-label keys of
    the Topology's levels; either may be empty)."""

    topology: str
    required: str = ""
    preferred: str = ""


class TaskInfo:
    """One pod. Mutable: a session changes its status and node as actions place or evict it. Its fields
    may be passed in their order (a cache's lean path makes most tasks: a keyword costs a search of the
    parameters), else by name."""

    __slots__ = (
        "gpu_groups",
        "host_ports",
        "job",
        "key",
        "labels",
        "name",
        "namespace",
        "node",
        "nominated_groups",
        "nominated_node",
        "placement",
        "podset",
        "rank",
        "request",
        "status",
        "task_priority",
    )

    def __init__(
        self,
        namespace: str,
        name: str,
        job: JobInfo,
        podset: PodSet,
        request: PodRequest,
        status: TaskStatus,
        placement: Placement,
        labels: dict[str, str],
        rank: float,
        task_priority: int = 0,
        node: int = -1,
        gpu_groups: tuple[str, ...] = (),
        nominated_node: int = -1,
        nominated_groups: tuple[str, ...] = (),
        host_ports: tuple[HostPort, ...] = (),
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.key = f"{namespace}/{name}"
        self.job = job
        self.podset = podset
        self.request = request
        self.status = status
        self.placement = placement
        self.labels = labels
        self.rank = rank
        self.task_priority = task_priority
        self.node = node
        self.gpu_groups = gpu_groups
        self.nominated_node = nominated_node
        self.nominated_groups = nominated_groups
        self.host_ports = host_ports

    def recreated(self) -> TaskInfo:
        """The pod as its controller recreates it after an eviction: pending, same name, same job. Used
        to place a moved pod on its new node while the evicted one still releases the old node."""
        return TaskInfo(
            namespace=self.namespace,
            name=self.name,
            job=self.job,
            podset=self.podset,
            request=self.request,
            status=_PENDING,
            placement=self.placement,
            labels=self.labels,
            rank=self.rank,
            task_priority=self.task_priority,
            host_ports=self.host_ports,
        )

    def __repr__(self) -> str:
        return f"Task({self.key}, {self.status.value}, node={self.node})"


@dataclass(eq=False, slots=True)
class PodSet:
    """A gang unit: a PodGroup without sub-groups has one (named ""); otherwise one per leaf sub-group."""

    name: str
    min_member: int
    tasks: list[TaskInfo] = field(default_factory=list)
    topology: TopologyConstraint | None = None
    # The non-leaf sub-group it belongs to (None: directly under the job).
    parent: SubGroupSet | None = None

    def count(self, statuses: frozenset[TaskStatus]) -> int:
        return sum(1 for task in self.tasks if task.status in statuses)

    def active_allocated(self) -> int:
        return self.count(ACTIVE_ALLOCATED)

    def is_satisfied(self) -> bool:
        return self.active_allocated() >= self.min_member

    def pending(self) -> list[TaskInfo]:
        return [task for task in self.tasks if task.status is _PENDING]

    # As a member of its parent (KAI's SubGroupMember): it counts as satisfied once it has its minMember.
    def min_to_satisfy(self) -> int:
        return self.min_member

    def satisfied_members(self) -> int:
        return self.active_allocated()

    def is_ready(self) -> bool:
        """Whether enough of its pods are there to be scheduled (running or pending)."""
        return self.count(ACTIVE_ALLOCATED) + len(self.pending()) >= self.min_member


@dataclass(eq=False, slots=True)
class SubGroupSet:
    """A non-leaf sub-group (one that other sub-groups name as their parent), or the job's root (`JobInfo.
    tree`): it holds no pods itself, it is satisfied when `min_sub_group` of its direct children are
    (unset: all of them; 0: the whole subtree is optional), and its topology constraint keeps the pods of
    all its descendants together (e.g. sub-group "workers" in one zone, each of its leaf segments in one
    rack)."""

    name: str
    topology: TopologyConstraint | None = None
    parent: SubGroupSet | None = None
    children: list[SubGroupSet | PodSet] = field(default_factory=list)
    min_sub_group: int | None = None

    def min_to_satisfy(self) -> int:
        return len(self.children) if self.min_sub_group is None else self.min_sub_group

    def satisfied_members(self) -> int:
        """How many of its direct children are satisfied (KAI's GetNumActiveAllocatedDirectSubGroups)."""
        return sum(1 for child in self.children if child.satisfied_members() >= child.min_to_satisfy())

    def is_satisfied(self) -> bool:
        return self.satisfied_members() >= self.min_to_satisfy()

    def is_ready(self) -> bool:
        return sum(1 for child in self.children if child.is_ready()) >= self.min_to_satisfy()

    @property
    def podsets(self) -> list[PodSet]:
        """The leaves below it (its descendants' pod sets)."""
        found: list[PodSet] = []
        for child in self.children:
            if isinstance(child, PodSet):
                found.append(child)
            else:
                found.extend(child.podsets)
        return found

    @property
    def tasks(self) -> list[TaskInfo]:
        """The pods of all its descendants."""
        return [task for podset in self.podsets for task in podset.tasks]


class Tally(NamedTuple):
    """A job's pods counted by what matters for gangs, in one pass (see `JobInfo.tally`)."""

    pending: int
    active_allocated: int  # ACTIVE_ALLOCATED: counts toward minMember
    running: int
    succeeded: int
    gang_satisfied: bool  # every pod set has its minMember, and the job as a whole has its minMember


# The tally of a job of one pod in one pod set, minMember 1 (`JobInfo.lone_task`), by its pod's status.
_LONE_TALLIES: Final = {
    status: Tally(
        int(status is _PENDING),
        int(status in ACTIVE_ALLOCATED),
        int(status is _RUNNING),
        int(status is _SUCCEEDED),
        status in ACTIVE_ALLOCATED,
    )
    for status in TaskStatus
}


@dataclass(eq=False, slots=True)
class JobInfo:
    """A pod group: the unit that queues order and gangs allocate."""

    namespace: str
    name: str
    queue: str
    priority: int
    preemptible: bool
    min_member: int
    rank: float  # creation order: smaller is older
    podsets: dict[str, PodSet] = field(default_factory=dict)
    tasks: list[TaskInfo] = field(default_factory=list)
    # Why the job could not be scheduled as-is, before any action ran (queue missing, not enough pods).
    invalid_reason: str | None = None
    # Session-clock seconds: when the job last started running (min-runtime protection), and since
    # when it has been a stale gang (running below its minMember).
    last_start: float | None = None
    stale_since: float | None = None
    # Its own staleness grace period in seconds (PodGroup `spec.stalenessGracePeriod`; negative: never
    # evicted as stale); None: the scheduler's default.
    staleness_grace: float | None = None
    # Preemption delay (KAI v0.17): the job may evict others (preempt, reclaim, consolidation) only once
    # this many seconds have passed since it was created or last had a pod evicted (session-clock seconds;
    # None: not known, as long ago). Zero: no delay.
    preemption_delay: float = 0.0
    created: float | None = None
    last_eviction: float | None = None
    # The capacity held for it across cycles while it cannot start (`plugins.reservation`).
    reservation: Reservation | None = None
    # Bumped whenever one of its pods changes status in a session, so derived values can be cached
    # (`tally`, and the sessions' per-job caches). Whoever changes a pod's status must bump it.
    version: int = 0
    topology: TopologyConstraint | None = None
    # Pending pods that still have scheduling gates: alive, but not tasks of this session.
    gated: int = 0
    # Queue admission gating's view of its pods (None: no pod of it has met the gate).
    admission: AdmissionFacts | None = None
    # The non-leaf sub-groups by name (pod sets name theirs as `parent`); empty without a hierarchy.
    subgroups: dict[str, SubGroupSet] = field(default_factory=dict)
    # The PodGroup's `spec.minSubGroup`: how many of its top-level sub-groups must be satisfied (None: all).
    min_sub_group: int | None = None
    # Waiting pods of the PodGroup that are none of its tasks: they name a sub-group it does not have (pod
    # key -> KAI's message for them).
    stray: dict[str, str] = field(default_factory=dict)
    # `tree`, once asked (the job's shape never changes after it is made).
    _root: SubGroupSet | None = field(default=None, init=False, repr=False)
    # `tally` and the `version` it was counted at.
    _tally: tuple[int, Tally] | None = field(default=None, init=False, repr=False)
    # The proportion plugin's per-job queue sums (see `account_queues`): allocated (gpu, cpu, memory) and
    # pending (gpu, cpu, memory), summed at `queue_sums_version` with pending pods' GPU memory
    # `queue_sums_gpu_memory`. The cluster cache keeps a job across cycles until its pods change, so this
    # mostly survives them (plain fields: one tuple per job, made only when it is summed again).
    queue_sums: tuple[float, float, float, float, float, float] | None = field(
        default=None, init=False, repr=False
    )
    queue_sums_version: int = field(default=-1, init=False, repr=False)
    queue_sums_gpu_memory: float = field(default=0.0, init=False, repr=False)
    # `has_topology` and `may_go_stale`, once asked: they read only what the job is made of (its
    # constraints, minMembers and pod sets), which never changes after it is made (a change to its pods or
    # PodGroup makes a new JobInfo), so they need no version.
    _has_topology: bool | None = field(default=None, init=False, repr=False)
    _may_go_stale: bool | None = field(default=None, init=False, repr=False)
    # Its one task when the cluster cache made it as a bare pod's plain job (`JobRebuild._make_lone`):
    # minMember 1, one pod set of minMember 1 holding that task, no sub-group or constraint; its next pods,
    # whether it has any pending and its tally are then the task's status alone (`gang.kept_tasks`). None:
    # not said (any job may be one).
    lone_task: TaskInfo | None = field(default=None, init=False, repr=False)
    # `namespace/name`, made with the job: a session reads it ~8 times a job (a property made a new string
    # each time: 125,000 at 5,000 nodes in a first cycle).
    key: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    def count(self, statuses: frozenset[TaskStatus]) -> int:
        return sum(1 for task in self.tasks if task.status in statuses)

    def tally(self) -> Tally:
        """Its pods counted by status, recounted only after a status change (`version`): the actions ask
        every job these questions, several times a cycle, and most jobs never change in a cycle. A bare pod's
        plain job's (`lone_task`) is its pod's status's, not counted (asked again of each one placed)."""
        lone = self.lone_task
        if lone is not None:
            return _LONE_TALLIES[lone.status]
        cached = self._tally
        if cached is not None and cached[0] == self.version:
            return cached[1]
        pending = active = running = succeeded = 0
        for task in self.tasks:
            status = task.status
            if status is _PENDING:
                pending += 1
            elif status is _RUNNING:
                running += 1
                active += 1
            elif status is _ALLOCATED_STATUS or status is _PIPELINED:
                active += 1
            elif status is _SUCCEEDED:
                succeeded += 1
        satisfied = active >= self.min_member
        if satisfied and len(self.podsets) == 1:
            (podset,) = self.podsets.values()
            # The usual job: one pod set holding all its pods (its pods are the job's), whose count is
            # the job's.
            whole = len(podset.tasks) == len(self.tasks)
            satisfied = active >= podset.min_member if whole else podset.is_satisfied()
        elif satisfied:
            satisfied = all(podset.is_satisfied() for podset in self.podsets.values())
        tally = Tally(pending, active, running, succeeded, satisfied)
        self._tally = (self.version, tally)
        return tally

    def active_allocated(self) -> int:
        return self.tally().active_allocated

    def pending_tasks(self) -> list[TaskInfo]:
        return [task for task in self.tasks if task.status is _PENDING]

    def preemption_delay_end(self) -> float | None:
        """When the job may start evicting others (KAI's `PreemptionDelayEnd`): its delay counted from the
        later of its creation and its last eviction; None without a delay."""
        if self.preemption_delay <= 0:
            return None
        anchors = [t for t in (self.created, self.last_eviction) if t is not None]
        return (max(anchors) if anchors else -math.inf) + self.preemption_delay

    def has_pending(self) -> bool:
        lone = self.lone_task
        if lone is not None:  # (asked of each job placed, its version moved: no recount of one task)
            return lone.status is _PENDING
        return self.tally().pending > 0

    def topology_constraints(self) -> tuple[TopologyConstraint | None, ...]:
        """The job's own topology constraint, then its pod sets', then its non-leaf sub-groups'."""
        return (
            self.topology,
            *(podset.topology for podset in self.podsets.values()),
            *(group.topology for group in self.subgroups.values()),
        )

    def tree(self) -> SubGroupSet:
        """The root of its sub-group tree: the top-level sub-groups (non-leaf ones first, as KAI lists a
        SubGroupSet's members) and pod sets, `min_sub_group` of them required. Its children keep `parent`
        None: the job itself is their parent."""
        root = self._root
        if root is None:
            root = self._root = SubGroupSet("", min_sub_group=self.min_sub_group)
            root.children = [
                *(group for group in self.subgroups.values() if group.parent is None),
                *(podset for podset in self.podsets.values() if podset.parent is None),
            ]
        return root

    def has_topology(self) -> bool:
        """Whether the job, or any of its sub-groups, keeps its pods within a topology domain (asked of
        every job each cycle: kept, see `_has_topology`)."""
        known = self._has_topology
        if known is None:
            # Loops rather than any() over generators: first asked as each job is made (290,000 of them,
            # each of one pod set and no sub-groups, at 20,000 nodes).
            known = self.topology is not None
            for podset in self.podsets.values():
                if podset.topology is not None:
                    known = True
            for group in self.subgroups.values():
                if group.topology is not None:
                    known = True
            self._has_topology = known
        return known

    def may_go_stale(self) -> bool:
        """Whether the job is a gang at all: a job whose only pod set asks for at most one pod is satisfied
        by any pod it runs, so it is never a stale gang (most jobs). Kept, see `_may_go_stale`."""
        known = self._may_go_stale
        if known is None:
            known = self._may_go_stale = (
                self.min_member > 1
                or len(self.podsets) > 1
                or any(podset.min_member > 1 for podset in self.podsets.values())
            )
        return known

    def know_as(self, tally: Tally, has_topology: bool, may_go_stale: bool) -> None:
        """`tally`, `has_topology` and `may_go_stale` as this job's answers at its version: those of a job
        made alike (its pod sets, minMembers and constraints, its tasks' statuses), which a cache making
        thousands of alike jobs (a bare pod's each) worked out once."""
        self._tally = (self.version, tally)
        self._has_topology = has_topology
        self._may_go_stale = may_go_stale

    def is_gang_satisfied(self) -> bool:
        """Every pod set has its minMember, and the group as a whole has its minMember."""
        return self.tally().gang_satisfied
