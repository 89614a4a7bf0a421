"""The cluster as one scheduling cycle sees it, and the state an edge hands in to build it.

An edge (the simulator, or the live mode's informers) describes the cluster as pod and PodGroup states (the
API objects plus what the edge knows about each pod at runtime: its node, phase, shared GPUs) and the
cluster-scoped objects; `model.cache.ClusterCache` keeps them and makes the `ClusterSnapshot` of model
objects that one cycle works on. `ClusterState` is all of it at once (exports, replays, tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from kai_scheduler.api.objects import (
    AccountedResource,
    ConfigMap,
    DeviceClass,
    Node,
    NodeResourceTopology,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Queue,
    ResourceClaim,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.model.dra import DraSnapshot
from kai_scheduler.model.job_changes import JobChangeMark
from kai_scheduler.model.jobs import HostPort, JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.queues import QueueTree
from kai_scheduler.model.reservations import Reservation, RunEstimates
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.storage import Storage
from kai_scheduler.model.topology import TopologyTree

if TYPE_CHECKING:
    from kai_scheduler.model.accounted import AccountedInputs
    from kai_scheduler.model.disruption import DisruptionBudgets


@dataclass(slots=True)
class PodState:
    """A pod and what is known of it at runtime. `rank` is its creation order (smaller is older). Nothing
    changes one once made (not frozen: an edge makes one per pod it hands in, 290,000 at once at 20,000
    nodes, and a frozen dataclass sets each field through `object.__setattr__`, four times the cost)."""

    pod: Pod
    rank: float
    node_name: str | None = None
    phase: str = "Pending"
    gpu_groups: tuple[str, ...] = ()
    terminating: bool = False
    nominated_node: str | None = None
    nominated_gpu_groups: tuple[str, ...] = ()  # the shared GPUs it was pipelined onto
    # When it was created, in session-clock seconds (None: not known): the start of a preemption delay
    # for the job the pod grouper makes of a pod without a PodGroup.
    created: float | None = None
    # Its deletionTimestamp, in session-clock seconds (None: not being deleted, or not known): a running
    # pod deleted long enough ago is stuck in releasing (`ClusterCache.stuck_in_releasing_after`).
    deleted: float | None = None
    # When the scheduler removed its queue-admission gate (`api.admission_gate`), in session-clock seconds
    # (None: never gated, or not known): its quota reservation runs from here.
    admitted: float | None = None


@dataclass(frozen=True, slots=True)
class PodGroupState:
    pod_group: PodGroup
    rank: float
    # The node pool of its latest `schedulingConditions` entry (None: none), for `schedulingBackoff`
    # (`model.scheduling_backoff`); edges fill it in only for PodGroups with a backoff.
    condition_pool: str | None = None
    # When it was created, in session-clock seconds (None: not known): where its preemption delay starts.
    created: float | None = None


@dataclass(frozen=True, slots=True)
class JobTimes:
    """Bookkeeping a cluster keeps on PodGroups (KAI's last-start, stale-podgroup and last-eviction
    timestamps), in session-clock seconds."""

    last_start: float | None = None
    stale_since: float | None = None
    # When one of its pods was last evicted (KAI's `kai.scheduler/last-eviction-timestamp`): its preemption
    # delay starts again from here.
    last_eviction: float | None = None
    # The capacity held for it while it cannot start (reservation and backfill, `plugins.reservation`;
    # live mode keeps it on the PodGroup as `kai.scheduler/reservation`).
    reservation: Reservation | None = None

    def empty(self) -> bool:
        return (
            self.last_start is None
            and self.stale_since is None
            and self.last_eviction is None
            and self.reservation is None
        )


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Everything a cycle starts from. Sequences are in creation order where order matters."""

    nodes: Sequence[Node]
    pods: Sequence[PodState]
    pod_groups: Sequence[PodGroupState]
    queues: Sequence[Queue]
    priority_classes: Mapping[str, int]
    default_priority: int = 50
    # Per job key: what the edge remembers across cycles (see `JobTimes`).
    job_times: Mapping[str, JobTimes] = field(default_factory=dict)
    topologies: Sequence[Topology] = ()
    # Time-based fairness: each queue's recent usage as a share of capacity (see `model.usage`).
    queue_usage: Mapping[str, Resources] = field(default_factory=dict)
    # Namespace name -> its labels, for pod (anti-)affinity's namespaceSelector. Live mode watches
    # Namespaces; the simulator reads those its input gives, and a namespace it was not given carries only
    # `kubernetes.io/metadata.name` (which the matching adds to every namespace, see
    # `model.matching.namespace_labels`).
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Dynamic Resource Allocation: the claims (with their status), the devices the slices publish and the
    # device classes; `dra_enabled` is False when the cluster does not serve resource.k8s.io.
    resource_claims: Sequence[ResourceClaim] = ()
    resource_slices: Sequence[ResourceSlice] = ()
    device_classes: Sequence[DeviceClass] = ()
    dra_enabled: bool = True
    # ConfigMaps and storage, for the ConfigMap and volume-binding predicates (`model.storage`).
    config_maps: Sequence[ConfigMap] = ()
    persistent_volume_claims: Sequence[PersistentVolumeClaim] = ()
    persistent_volumes: Sequence[PersistentVolume] = ()
    storage_classes: Sequence[StorageClass] = ()
    # PodDisruptionBudgets: the victim search prefers victims they let go (`model.disruption`).
    disruption_budgets: Sequence[PodDisruptionBudget] = ()
    # NodeResourceTopologies (the numa plugin's per-node NUMA zones), in any order.
    node_topologies: Sequence[NodeResourceTopology] = ()
    # AccountedResources: what queues' `spec.accountedResources` limits count (`model.accounted`).
    accounted_resources: Sequence[AccountedResource] = ()


@dataclass(frozen=True, slots=True)
class NumaInputs:
    """The NodeResourceTopologies by node name, and the pods by key (the cache's own, only to be read):
    handed to a snapshot as they are, so that a configuration without the numa plugin pays nothing for
    them; the plugin makes its per-node zones of them when it opens."""

    topologies: Mapping[str, NodeResourceTopology]
    pods: Mapping[str, PodState]


# Looked up once: Python 3.11 finds an enum's member through a hook on every lookup of the class's
# attributes, and this is asked of every job as a session opens.
_PENDING: Final = TaskStatus.PENDING


@dataclass(eq=False)
class ClusterSnapshot:
    nodes: NodeTable
    queues: QueueTree
    jobs: dict[str, JobInfo]
    tasks: dict[str, TaskInfo]
    # What fair share divides: ready nodes' allocatable, minus what other schedulers' pods hold.
    capacity: Resources
    # Smallest and largest per-GPU memory nodes report (0: none does, KAI's nil), to convert gpu-memory
    # requests not yet on a node into GPU units: the smallest where KAI takes it (queue order, reclaim,
    # queue requests), the largest for the queue's quota and limit checks (KAI's capacity policy).
    min_gpu_memory_mib: float
    max_gpu_memory_mib: float = 0.0
    existing_gpu_groups: set[str] = field(default_factory=set)
    topologies: dict[str, TopologyTree] = field(default_factory=dict)
    # Host ports (Kubernetes' NodePorts): our tasks that ask for any (whatever their status), and what
    # other schedulers' pods hold, by node index. Both empty in the usual cluster without host ports.
    host_port_tasks: list[TaskInfo] = field(default_factory=list)
    foreign_host_ports: list[tuple[int, tuple[HostPort, ...]]] = field(default_factory=list)
    # Namespace name -> its labels (from `ClusterState.namespace_labels`), for namespaceSelectors.
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Keys of the jobs that have a topology constraint (`JobInfo.has_topology`), as the cluster cache
    # keeps them, so that the topology plugin need not ask every job each cycle.
    topology_jobs: frozenset[str] = frozenset()
    # Our tasks with inter-pod (anti-)affinity rules (whatever their status), as the cache keeps them:
    # usually none, and then nothing needs to track where pods are.
    pod_affinity_tasks: list[TaskInfo] = field(default_factory=list)
    # Our tasks nominated to a node (whatever their status) and whether any task asks for GPU memory, as the
    # cache keeps them (None: not kept, every task is looked at).
    nominated_tasks: list[TaskInfo] | None = None
    asks_gpu_memory: bool | None = None
    # The jobs with a pod that meets queue admission gating (`JobInfo.admission`), in creation order, as
    # the cache keeps them (None: not kept, every job is looked at: `actions.ungate.gated_jobs`).
    admission_jobs: list[JobInfo] | None = None
    # DRA devices and claims; None when the cluster has no DRA objects and no pod with claims.
    dra: DraSnapshot | None = None
    # ConfigMaps, claims, volumes and storage classes (`model.storage`); the node pool's name, as KAI's
    # messages give it (`model.partition.pool_of`).
    storage: Storage = field(default_factory=Storage)
    node_pool: str = "default"
    # The budgets that cover some running pod, with what this cycle's evictions took of them; None when
    # no budget covers any (the usual cluster: the victim search is then exactly KAI's).
    disruption_budgets: DisruptionBudgets | None = None
    # What the numa plugin reads; None when the cluster has no NodeResourceTopology.
    numa: NumaInputs | None = None
    # What the accounted-resource limits read; None when no AccountedResource exists and no queue names
    # one (the usual cluster: then nothing is checked).
    accounted: AccountedInputs | None = None
    # When pods are expected to end, for reservation and backfill; None when the edge was not asked for
    # them (the reservation plugin is not configured).
    run_estimates: RunEstimates | None = None
    # How far the cache's log of changed jobs had got (`model.job_changes`): what was worked out over all
    # jobs of an earlier snapshot of the same cache is brought up to date by the jobs changed since. None
    # for a snapshot not taken from a cache's model.
    job_changes: JobChangeMark | None = None
    _at_open: JobsAtOpen | None = field(default=None, init=False, repr=False)

    def jobs_at_open(self) -> JobsAtOpen:
        """The jobs the actions look at, grouped as the session found them when first asked (after the
        plugins opened). A busy cluster has tens of thousands of jobs, nearly all running untouched, and
        each action would otherwise walk them all."""
        if self._at_open is None:
            self._at_open = JobsAtOpen.of(self.jobs.values())
        return self._at_open

    def offer_jobs_at_open(self, at_open: JobsAtOpen) -> None:
        """`at_open` as `jobs_at_open`'s answer unless it was asked already (the groups carried from an
        earlier snapshot and brought up to date, `framework.kept_job_groups`)."""
        if self._at_open is None:
            self._at_open = at_open


@dataclass(frozen=True, slots=True)
class JobsAtOpen:
    """Jobs in snapshot order. Within a session a pod becomes neither pending nor running again (a placed
    pod is allocated or pipelined, an evicted one releasing, and a rollback restores what was), so the
    jobs that have such pods at any later moment are among these; callers check each job's tally."""

    # A pending pod, or no schedulable pod and a reason for it (gated pods of an invalid job).
    waiting: tuple[JobInfo, ...]
    # Preemptible with a running pod: the victims, with pods placed during the session (among `waiting`).
    preemptible_running: tuple[JobInfo, ...]
    # Marked stale, or able to become so (see `JobInfo.may_go_stale`).
    may_go_stale: tuple[JobInfo, ...]
    # Among `waiting`, the preemptible ones with an active pod (victims already, as the session opens).
    waiting_victims: tuple[JobInfo, ...]
    # Among `waiting`, those with a preemption delay (only they may be within it).
    waiting_delayed: tuple[JobInfo, ...]

    @staticmethod
    def of(jobs: Iterable[JobInfo]) -> JobsAtOpen:
        waiting: list[JobInfo] = []
        running: list[JobInfo] = []
        stale: list[JobInfo] = []
        victims: list[JobInfo] = []
        delayed: list[JobInfo] = []
        groups_of = JobsAtOpen.groups_of
        for job in jobs:
            lone = job.lone_task
            if lone is not None and lone.status is _PENDING and job.stale_since is None:
                # `groups_of` of a bare pod's plain job whose pod waits (most jobs of a first cycle): it
                # has no gated pod and never goes stale (`JobInfo.lone_task`), and no pod holds anything.
                waiting.append(job)
                if job.preemption_delay > 0:
                    delayed.append(job)
                continue
            is_waiting, is_running, is_stale, is_victim, is_delayed = groups_of(job)
            if is_waiting:
                waiting.append(job)
                if is_victim:
                    victims.append(job)
                if is_delayed:
                    delayed.append(job)
            if is_running:
                running.append(job)
            if is_stale:
                stale.append(job)
        return JobsAtOpen(tuple(waiting), tuple(running), tuple(stale), tuple(victims), tuple(delayed))

    @staticmethod
    def groups_of(job: JobInfo) -> tuple[bool, bool, bool, bool, bool]:
        """Whether `job` is in each group, in the order of `JOB_GROUPS`."""
        tally = job.tally()
        waiting = bool(tally.pending or (job.gated and job.invalid_reason))
        return (
            waiting,
            bool(tally.running and job.preemptible),
            job.stale_since is not None or job.may_go_stale(),
            waiting and job.preemptible and tally.active_allocated > 0,
            waiting and job.preemption_delay > 0,
        )


# The names of `JobsAtOpen`'s groups, in field order (what `groups_of` answers for).
JOB_GROUPS = ("waiting", "preemptible_running", "may_go_stale", "waiting_victims", "waiting_delayed")
