"""`ClusterCache`: the scheduler's view of the cluster, kept current by deltas (KAI's scheduler cache).

Both edges feed it: the simulator with its loaded objects and the effects it applies, live mode with
informer events. It keeps the scheduling model (jobs, tasks, the node table with every running pod
accounted) between cycles and, per change, rebuilds only what the change touches:

* a pod or PodGroup that changed makes its job *dirty*: the job and its tasks are made again from the
  current objects (`model.builder`), and the nodes its old and new tasks occupy become dirty;
* a dirty node's usage row is accounted again from the pods on it, in creation order, exactly as a
  build from scratch would account it (so floating-point sums are the same);
* nodes, queues or priority classes that change make everything dirty (rare; they change what every
  job and index means).

`snapshot()` hands a cycle a `ClusterSnapshot` whose node table is a copy and whose job and task
objects are the cache's own: a session changes a task's status, node and GPU groups only through its
statements, and `after_cycle` marks the jobs of the cycle's decisions dirty (their tasks were left as
the session committed them), plus any job a plugin marked invalid. A full build is the same code with
everything dirty (`ClusterCache.of(state)`), which is what tests compare the incremental cache with.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple, Protocol, TypeVar

import numpy as np

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import (
    ConfigMap,
    DeviceClass,
    Node,
    NodeResourceTopology,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    Queue,
    ResourceClaim,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.model.builder import (
    PodDerivations,
    build_node_table,
    build_queue_tree,
    implicit_job,
    implicit_pod_group_name,
    is_gated,
    job_from_pod_group,
    job_key_of,
    make_task,
    queue_problem,
    reported_gpu_memory_range,
    task_status,
    waiting_reason,
)
from kai_scheduler.model.disruption import DisruptionBudgets
from kai_scheduler.model.dra_cache import Derived, DraInputs
from kai_scheduler.model.jobs import HostPort, JobInfo, TaskInfo, TaskStatus
from kai_scheduler.model.partition import DEFAULT_NODE_POOL, Partition
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.releasing import StuckReleases
from kai_scheduler.model.resources import PodRequest, Resources
from kai_scheduler.model.scheduling_backoff import is_backed_off
from kai_scheduler.model.snapshot import (
    ClusterSnapshot,
    ClusterState,
    JobTimes,
    NumaInputs,
    PodGroupState,
    PodState,
)
from kai_scheduler.model.storage import Storage
from kai_scheduler.model.topology import TopologyTree, build_topology

_OCCUPYING = (TaskStatus.RUNNING, TaskStatus.RELEASING, TaskStatus.STUCK_IN_RELEASING)
_FINISHED = ("Succeeded", "Failed")


class _Hold(NamedTuple):
    """What one pod holds on a node, as the cache accounted it (ours: a task; else another scheduler's)."""

    node: int
    request: PodRequest
    releasing: bool
    gpu_groups: tuple[str, ...]
    ours: bool


class ClusterCache:
    """See the module doc. Pods and PodGroups arrive as `PodState` / `PodGroupState` (their `rank` is
    their creation order); the cluster-scoped kinds are set as a whole, and a set that equals the current
    one changes nothing.

    With a `partition` (a scheduling shard: `model.partition`), the cache holds that shard's view: only its
    nodes, queues and PodGroups, and of the pods only those its PodGroups hold as ours; every other pod is
    another scheduler's to it (it holds the node it is bound to, when that node is the shard's)."""

    def __init__(self, partition: Partition | None = None) -> None:
        self.partition = partition
        # Partitioned: each PodGroup's pool label (None: absent), for the pods that name it.
        self._group_pools: dict[str, str | None] = {}
        self.derivations = PodDerivations()
        # --- inputs -----------------------------------------------------------------------------
        self._nodes: dict[str, Node] = {}
        self._queues: list[Queue] = []
        self._topologies: list[Topology] = []
        self._priorities = Priorities()
        self._namespace_labels: Mapping[str, Mapping[str, str]] = {}
        self._dra = DraInputs()  # claims, slices, device classes; which pods use which claims
        self._storage = Storage()
        self._storage_objects: tuple[
            list[ConfigMap], list[PersistentVolumeClaim], list[PersistentVolume], list[StorageClass]
        ] = ([], [], [], [])
        self._disruption_budgets: list[PodDisruptionBudget] = []
        self._node_topologies: dict[str, NodeResourceTopology] = {}  # by name (its node's)
        self._pods: dict[str, PodState] = {}
        self._groups: dict[str, PodGroupState] = {}
        # PodGroups backed off on their pool (`model.scheduling_backoff`): not scheduled, their pods not ours.
        self._backed_off: dict[str, PodGroupState] = {}
        self._job_times: dict[str, JobTimes] = {}
        # A pipelined pod's nominated node and shared GPUs, for the next cycle only (see `nominate`).
        self._nominated: dict[str, tuple[str, tuple[str, ...]]] = {}
        # --- indexes ----------------------------------------------------------------------------
        self._ours_by_job: dict[str, set[str]] = {}  # job key -> our pods' keys
        self._job_of_pod: dict[str, str] = {}  # our pod's key -> job key
        self._named_by_group: dict[str, set[str]] = {}  # PodGroup key -> keys of pods that name it
        self._foreign: dict[str, int] = {}  # other schedulers' pods that hold a node -> node index
        # --- the model ----------------------------------------------------------------------------
        self._table = build_node_table([])
        self._queue_tree = build_queue_tree([])
        self._topology_trees: dict[str, TopologyTree] = {}
        self._jobs: dict[str, JobInfo] = {}
        self._tasks: dict[str, TaskInfo] = {}
        self._occupants: dict[int, set[str]] = {}  # node index -> keys of the pods that hold it
        self._holds: dict[str, _Hold] = {}  # pod key -> what it holds (see `_Hold`)
        self._host_port_tasks: set[str] = set()
        self._pod_affinity_tasks: set[str] = set()
        self._running_counts: dict[str, int] = {}  # job key -> its tasks that are RUNNING (none: absent)
        # Reasons a plugin may overwrite during a session (topology problems): restored after it.
        self._base_reasons: dict[str, str | None] = {}
        self._capacity = Resources()
        self._ready_capacity = Resources()
        self._min_gpu_memory = self._max_gpu_memory = 0.0
        self.stuck_releases = StuckReleases()
        self._foreign_host_ports: list[tuple[int, tuple[HostPort, ...]]] = []
        # --- what changed since the model was last brought up to date --------------------------
        self._everything_dirty = True
        self._dirty_jobs: set[str] = set()
        self._dirty_nodes: set[int] = set()
        self._foreign_dirty = True
        # Jobs and tasks are kept in rank order; entries added or re-ranked since the last refresh may be out
        # of place, and all of them (old and new ranks) rank at or after these (None: all in place).
        self._jobs_out_of_place: float | None = None
        self._tasks_out_of_place: float | None = None

    @classmethod
    def of(cls, state: ClusterState, partition: Partition | None = None) -> ClusterCache:
        """A cache holding a whole `ClusterState` (a build from scratch)."""
        cache = cls(partition)
        cache.set_nodes(state.nodes)
        cache.set_queues(state.queues)
        cache.set_topologies(state.topologies)
        cache.set_priorities(Priorities(state.priority_classes, state.default_priority))
        cache.set_namespace_labels(state.namespace_labels)
        cache.set_dra(state.resource_slices, state.device_classes, enabled=state.dra_enabled)
        cache.set_claims(state.resource_claims)
        cache.set_storage(
            state.config_maps, state.persistent_volume_claims, state.persistent_volumes, state.storage_classes
        )
        cache.set_disruption_budgets(state.disruption_budgets)
        cache.set_node_topologies(state.node_topologies)
        for group in state.pod_groups:
            cache.upsert_pod_group(group)
        for pod in state.pods:
            cache.upsert_pod(pod)
            if pod.nominated_node is not None:
                cache._nominated[pod.pod.key] = (pod.nominated_node, pod.nominated_gpu_groups)
        for key, times in state.job_times.items():
            cache.set_job_times(key, times)
        return cache

    # --- deltas: cluster-scoped kinds ----------------------------------------------------------------

    def set_storage(
        self,
        config_maps: Sequence[ConfigMap],
        claims: Sequence[PersistentVolumeClaim],
        volumes: Sequence[PersistentVolume],
        classes: Sequence[StorageClass],
    ) -> None:
        """ConfigMaps and storage objects, all of them. No job is made of them: only the predicates read
        them (`model.storage`), each session afresh."""
        self._storage_objects = (list(config_maps), list(claims), list(volumes), list(classes))
        self._storage = Storage.of(config_maps, claims, volumes, classes)

    def set_disruption_budgets(self, budgets: Sequence[PodDisruptionBudget]) -> None:
        """PodDisruptionBudgets, all of them. Like storage, no job is made of them: each snapshot matches
        them with the pods afresh (`model.disruption`), and only when there are any."""
        self._disruption_budgets = list(budgets)

    def set_node_topologies(self, topologies: Sequence[NodeResourceTopology]) -> None:
        """NodeResourceTopologies, all of them. Only the numa plugin reads them, and only when it is on:
        nothing is made of them here."""
        self._node_topologies = {topology.metadata.name: topology for topology in topologies}

    def set_nodes(self, nodes: Iterable[Node]) -> None:
        partition = self.partition
        by_name = {
            node.metadata.name: node
            for node in nodes
            if partition is None or partition.holds(node.metadata.labels)
        }
        if by_name != self._nodes:
            self._nodes = by_name
            self._everything_dirty = True

    def set_queues(self, queues: Sequence[Queue]) -> None:
        """The queues in creation order (older queues win fair-share ties)."""
        partition = self.partition
        if partition is not None:
            queues = [queue for queue in queues if partition.holds(queue.metadata.labels)]
        if list(queues) != self._queues:
            self._queues = list(queues)
            self._queue_tree = build_queue_tree(self._queues)
            self._dirty_jobs.update(self._jobs)  # whether a job's queue exists and is a leaf

    def set_topologies(self, topologies: Sequence[Topology]) -> None:
        if list(topologies) != self._topologies:
            self._topologies = list(topologies)
            self._topology_trees = self._build_topologies()

    def set_priorities(self, priorities: Priorities) -> None:
        if priorities != self._priorities:
            self._priorities = priorities
            self._everything_dirty = True

    def set_namespace_labels(self, labels: Mapping[str, Mapping[str, str]]) -> None:
        self._namespace_labels = labels

    def set_dra(
        self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass], *, enabled: bool = True
    ) -> None:
        """The ResourceSlices and DeviceClasses; `enabled`: whether the cluster serves DRA at all."""
        self._dra.enabled = enabled
        if self._dra.set_cluster(slices, classes):
            self._everything_dirty = True  # the nodes' GPUs changed

    # --- deltas: DRA claims ----------------------------------------------------------------------------

    def upsert_claim(self, claim: ResourceClaim) -> None:
        self._claims_changed(self._dra.upsert_claim(claim))

    def remove_claim(self, key: str) -> None:
        self._claims_changed(self._dra.remove_claim(key))

    def set_claims(self, claims: Iterable[ResourceClaim]) -> None:
        """Every ResourceClaim at once (those left out are gone)."""
        self._claims_changed(self._dra.set_claims(claims))

    def _claims_changed(self, pods: set[str]) -> None:
        """The pods whose claims changed what they ask for are made again."""
        for key in pods:
            job = self._job_of_pod.get(key)
            if job is not None:
                self._dirty_jobs.add(job)
                continue
            state = self._pods.get(key)
            if state is not None:  # another scheduler's pod: hold what it asks for now
                self._unindex(key, state)
                self._index(key, state)

    # --- deltas: pods and pod groups -----------------------------------------------------------------

    def upsert_pod(self, state: PodState) -> None:
        """A pod added or changed. Its nomination is the cache's own (`nominate`), whatever `state` says."""
        key = state.pod.key
        self.stuck_releases.track(key, state)
        previous = self._pods.get(key)
        if previous is not None and self._update_task_in_place(previous, state):
            self._pods[key] = state
            return
        if previous is not None:
            if previous.pod is not state.pod:
                self.derivations.forget(previous.pod)
            self._unindex(key, previous)
        self._pods[key] = state
        self._index(key, state)

    def remove_pod(self, key: str) -> None:
        previous = self._pods.pop(key, None)
        if previous is None:
            return
        self.stuck_releases.track(key, None)
        self.derivations.forget(previous.pod)
        self._unindex(key, previous)
        self._nominated.pop(key, None)

    @property
    def pool_label_key(self) -> str:
        """The node-pool label that names a PodGroup's pool (`model.partition.pool_of`)."""
        return self.partition.label_key if self.partition is not None else c.NODE_POOL_LABEL

    @property
    def backed_off(self) -> Mapping[str, PodGroupState]:
        """The PodGroups left out for their `schedulingBackoff` (`model.scheduling_backoff`), by key."""
        return self._backed_off

    def upsert_pod_group(self, state: PodGroupState) -> None:
        key = state.pod_group.key
        partition = self.partition
        label_key = self.pool_label_key
        labels = state.pod_group.metadata.labels
        ours = partition is None or partition.holds_value(labels.get(label_key))
        if ours and is_backed_off(state.pod_group, state.condition_pool, label_key):
            # KAI's cache leaves it out of the session: neither tried nor counted in its queue.
            self._backed_off[key] = state
            if self._groups.pop(key, None) is not None:
                self._dirty_jobs.add(key)
            self._group_pools.pop(key, None)
            self._pods_follow_group(key)
            return
        was_backed_off = self._backed_off.pop(key, None) is not None
        if partition is not None:
            pool = labels.get(partition.label_key)
            moved = was_backed_off or key not in self._group_pools or self._group_pools[key] != pool
            self._group_pools[key] = pool
            if not partition.holds_value(pool):  # another shard's: its pods are not ours either
                if self._groups.pop(key, None) is not None:
                    self._dirty_jobs.add(key)
                if moved:
                    self._pods_follow_group(key)
                return
            if moved:
                self._pods_follow_group(key)
        self._groups[key] = state
        self._dirty_jobs.add(key)
        if was_backed_off and partition is None:
            self._pods_follow_group(key)  # its pods are ours again

    def remove_pod_group(self, key: str) -> None:
        if self._groups.pop(key, None) is not None:
            self._dirty_jobs.add(key)
        if self._backed_off.pop(key, None) is not None:
            self._pods_follow_group(key)
        if key in self._group_pools:
            del self._group_pools[key]
            self._pods_follow_group(key)

    def _pods_follow_group(self, group_key: str) -> None:
        """The pods that name a PodGroup whose pool changed (or that arrived or left) are ours or another
        scheduler's as it now says."""
        for key in list(self._named_by_group.get(group_key, ())):
            state = self._pods[key]
            if (key in self._job_of_pod) != self.schedules(state.pod):
                self._unindex(key, state)
                self._index(key, state)

    def schedules(self, pod: Pod) -> bool:
        """Whether this cache schedules `pod` (a pod of this scheduler, in its partition)."""
        return pod.spec.scheduler_name == c.SCHEDULER_NAME and self._in_partition(pod)

    def _in_partition(self, pod: Pod) -> bool:
        """A pod's pool is its PodGroup's; a pod whose PodGroup is not known speaks for itself. A pod whose
        PodGroup is backed off is in no one's."""
        partition = self.partition
        named = pod.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
        if named is not None and self._backed_off and f"{pod.namespace}/{named}" in self._backed_off:
            return False  # its PodGroup is backed off: held like another scheduler's pod
        if partition is None:
            return True
        if named is not None:
            group_key = f"{pod.namespace}/{named}"
            if group_key in self._group_pools:
                return partition.holds_value(self._group_pools[group_key])
        return partition.holds(pod.metadata.labels)

    def pod(self, key: str) -> PodState | None:
        return self._pods.get(key)

    def _update_task_in_place(self, previous: PodState, state: PodState) -> bool:
        """A pod whose runtime facts changed (bound, evicted, moved) changes its task in place when nothing
        its job is made of depends on the change: the same pod object and rank, not gated before or after,
        a task before and after, finished neither before nor after (the job's live-pod count), its node
        known. Otherwise (False) the job is made again."""
        key = state.pod.key
        task = self._tasks.get(key)
        if (
            task is None
            or previous.pod is not state.pod
            or previous.rank != state.rank
            or self._is_dirty(key)
            or is_gated(previous)
            or is_gated(state)
            or (previous.phase in _FINISHED) != (state.phase in _FINISHED)
        ):
            return False
        status = task_status(state, stuck=self.stuck_releases.is_stuck(key))
        node = self._node_index(state)
        if status is None or (state.node_name is not None and node < 0):
            return False
        was_running = task.status is TaskStatus.RUNNING
        task.status, task.node, task.gpu_groups = status, node, state.gpu_groups
        task.job.version += 1
        self._account_task(task)
        self._count_running(task.job.key, int(status is TaskStatus.RUNNING) - int(was_running))
        return True

    def _is_dirty(self, key: str) -> bool:
        """Whether the job of our pod `key` will be made again anyway."""
        job = self._job_of_pod.get(key)
        return self._everything_dirty or job is None or job in self._dirty_jobs

    def _node_index(self, state: PodState) -> int:
        return self._table.index.get(state.node_name, -1) if state.node_name else -1

    def _count_running(self, job: str, change: int) -> None:
        count = self._running_counts.get(job, 0) + change
        if count > 0:
            self._running_counts[job] = count
        else:
            self._running_counts.pop(job, None)

    def _derive(self, pod: Pod) -> Derived:
        """What a pod asks for (`PodDerivations`), with what its DRA claims ask for."""
        derived = self.derivations.of(pod)
        if not pod.spec.resource_claims:
            return derived
        return self._dra.derive(pod.key, derived)

    def _index(self, key: str, state: PodState) -> None:
        pod = state.pod
        self._dra.track(key, pod)
        named = pod.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
        if named is not None:
            group_key = f"{pod.namespace}/{named}"
            self._named_by_group.setdefault(group_key, set()).add(key)
            self._dirty_jobs.add(group_key)  # its first pod may speak for it
        if pod.spec.scheduler_name == c.SCHEDULER_NAME and (
            (self.partition is None and not self._backed_off) or self._in_partition(pod)
        ):
            job = job_key_of(pod)
            self._job_of_pod[key] = job
            self._ours_by_job.setdefault(job, set()).add(key)
            self._dirty_jobs.add(job)
            return
        node = self._table.index.get(state.node_name) if state.node_name else None
        if node is not None and state.phase not in _FINISHED:
            self._foreign[key] = node
            request = self._derive(pod)[0]
            self._hold(key, _Hold(node, request, self.stuck_releases.releasing(key, state), (), ours=False))
        self._foreign_dirty = True

    def _unindex(self, key: str, state: PodState) -> None:
        pod = state.pod
        self._dra.untrack(key)
        named = pod.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
        if named is not None:
            group_key = f"{pod.namespace}/{named}"
            _discard(self._named_by_group, group_key, key)
            self._dirty_jobs.add(group_key)
        job = self._job_of_pod.pop(key, None)
        if job is not None:
            _discard(self._ours_by_job, job, key)
            self._dirty_jobs.add(job)
            return
        if self._foreign.pop(key, None) is not None:
            self._release(key, ours=False)
        self._foreign_dirty = True

    # --- deltas: what the scheduler and the cluster remember about jobs --------------------------------

    def nominate(self, pipelined: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        """A pipeline promises resources for the next cycle only: the pods pipelined by the cycle that just
        ran (pod key -> node, shared GPUs) replace every earlier nomination."""
        changed = [
            k for k in self._nominated.keys() | pipelined.keys() if self._nominated.get(k) != pipelined.get(k)
        ]
        self._nominated = dict(pipelined)
        for key in changed:
            task = self._tasks.get(key)
            if task is None or self._is_dirty(key):
                if key in self._job_of_pod:
                    self._dirty_jobs.add(self._job_of_pod[key])
                continue
            node, groups = self._nominated.get(key, (None, ()))
            task.nominated_node = self._table.index.get(node, -1) if node else -1
            task.nominated_groups = groups

    def set_job_times(self, key: str, times: JobTimes) -> None:
        if times.empty():
            self._job_times.pop(key, None)
        else:
            self._job_times[key] = times
        job = self._jobs.get(key)
        if job is not None:
            job.last_start, job.stale_since, job.last_eviction = (
                times.last_start,
                times.stale_since,
                times.last_eviction,
            )

    def replace_job_times(self, times: Mapping[str, JobTimes]) -> None:
        """Every job's times at once (jobs left out have none)."""
        for key in self._job_times.keys() - times.keys():
            self.set_job_times(key, JobTimes())
        for key, value in times.items():
            if self._job_times.get(key) != value:
                self.set_job_times(key, value)

    @property
    def job_times(self) -> Mapping[str, JobTimes]:
        return self._job_times

    @property
    def job_keys(self) -> frozenset[str]:
        """The jobs this cache schedules (up to date)."""
        self.refresh()
        return frozenset(self._jobs)

    @property
    def running_jobs(self) -> frozenset[str]:
        """Jobs with a pod bound to a node and neither finished nor terminating (up to date)."""
        self.refresh()
        return frozenset(self._running_counts)

    # --- the cycle -------------------------------------------------------------------------------------

    def snapshot(
        self, queue_usage: Mapping[str, Resources] | None = None, now: float | None = None
    ) -> ClusterSnapshot:
        """What one cycle starts from. The session may change the node table and queue tree freely (they
        are its own); jobs and tasks are shared with the cache until `after_cycle`. `now` (session
        clock) moves the time pods stuck in releasing are judged by (`model.releasing`)."""
        if now is not None:
            for key in self.stuck_releases.advance(now):
                self._hold_again(key)
        self.refresh()
        snapshot = ClusterSnapshot(
            nodes=self._table.copy(),
            queues=build_queue_tree(self._queues, queue_usage),
            jobs=dict(self._jobs),
            tasks=dict(self._tasks),
            capacity=self._capacity.copy(),
            min_gpu_memory_mib=self._min_gpu_memory,
            max_gpu_memory_mib=self._max_gpu_memory,
            existing_gpu_groups=set(self._table.group_by_id),
            topologies=dict(self._topology_trees),
            host_port_tasks=self._by_rank(self._host_port_tasks),
            foreign_host_ports=list(self._foreign_host_ports),
            pod_affinity_tasks=self._by_rank(self._pod_affinity_tasks),
            namespace_labels=self._namespace_labels,
            # `_base_reasons` holds exactly the jobs that have a topology constraint (see `_rebuild_job`).
            topology_jobs=frozenset(self._base_reasons),
            dra=self._dra.snapshot(self._table, self._job_of_pod) if self._dra.active else None,
            storage=self._storage,
            node_pool=self.partition.pool if self.partition is not None else DEFAULT_NODE_POOL,
            disruption_budgets=(
                DisruptionBudgets.of(self._disruption_budgets, self._pods.values())
                if self._disruption_budgets
                else None
            ),
            numa=NumaInputs(self._node_topologies, self._pods) if self._node_topologies else None,
        )
        return snapshot

    def _by_rank(self, keys: Iterable[str]) -> list[TaskInfo]:
        return sorted((self._tasks[key] for key in keys), key=lambda task: task.rank)

    def after_cycle(self, decided_pods: Iterable[str]) -> None:
        """A cycle ran on the last snapshot: its decisions left their tasks as the session committed them
        (status, node, shared GPUs), which go back to what their pods say; a plugin may have marked jobs
        invalid, and those are made again on the next refresh."""
        for key in decided_pods:
            task = self._tasks.get(key)
            state = self._pods.get(key)
            status = (
                task_status(state, stuck=self.stuck_releases.is_stuck(key)) if state is not None else None
            )
            if task is None or state is None or status is None or self._is_dirty(key):
                job = self._job_of_pod.get(key)
                if job is not None:
                    self._dirty_jobs.add(job)
                continue
            task.status, task.node, task.gpu_groups = status, self._node_index(state), state.gpu_groups
            task.job.version += 1
        for key, reason in self._base_reasons.items():
            job_info = self._jobs.get(key)
            if job_info is not None and job_info.invalid_reason != reason:
                self._dirty_jobs.add(key)

    def refresh(self) -> None:
        """Bring the model up to date with every delta received."""
        if self._everything_dirty:
            self._rebuild_everything()
        for key in sorted(self._dirty_jobs):
            self._rebuild_job(key)
        self._dirty_jobs.clear()
        # Jobs and tasks stay in creation order, as a build from scratch lists them.
        if self._jobs_out_of_place is not None:
            _sort_tail(self._jobs, self._jobs_out_of_place)
            self._jobs_out_of_place = None
        if self._tasks_out_of_place is not None:
            _sort_tail(self._tasks, self._tasks_out_of_place)
            self._tasks_out_of_place = None
        if self._dirty_nodes:
            self._account_nodes(self._dirty_nodes)
            self._dirty_nodes.clear()
        if self._foreign_dirty:
            self._account_foreign()
            self._foreign_dirty = False

    # --- the full state, for exports and checks --------------------------------------------------------

    def state(self) -> ClusterState:
        """Everything the cache holds as a `ClusterState` (pods and pod groups in creation order)."""
        pods = []
        for pod in sorted(self._pods.values(), key=lambda p: p.rank):
            nominated = self._nominated.get(pod.pod.key)
            if nominated is not None:
                pod = replace(pod, nominated_node=nominated[0], nominated_gpu_groups=nominated[1])
            pods.append(pod)
        return ClusterState(
            nodes=list(self._nodes.values()),
            pods=pods,
            pod_groups=sorted([*self._groups.values(), *self._backed_off.values()], key=lambda g: g.rank),
            queues=list(self._queues),
            priority_classes=self._priorities.classes,
            default_priority=self._priorities.default,
            job_times=dict(self._job_times),
            topologies=list(self._topologies),
            namespace_labels=self._namespace_labels,
            resource_claims=list(self._dra.claims.values()),
            resource_slices=list(self._dra.slices),
            device_classes=list(self._dra.classes),
            dra_enabled=self._dra.enabled,
            config_maps=self._storage_objects[0],
            persistent_volume_claims=self._storage_objects[1],
            persistent_volumes=self._storage_objects[2],
            storage_classes=self._storage_objects[3],
            disruption_budgets=list(self._disruption_budgets),
            node_topologies=list(self._node_topologies.values()),
        )

    def claim(self, key: str) -> ResourceClaim | None:
        return self._dra.claims.get(key)

    # --- rebuilding --------------------------------------------------------------------------------------

    def _rebuild_everything(self) -> None:
        self._everything_dirty = False
        self._table = build_node_table(
            list(self._nodes.values()), self._dra.gpus_per_node, self._dra.backed_scalars
        )
        table = self._table
        ready = np.array([spec.ready for spec in table.specs], dtype=np.bool_)
        self._ready_capacity = Resources(
            gpu=table.gpu_units(ready),
            cpu=float(table.cap_cpu[ready].sum()),
            memory=float(table.cap_memory[ready].sum()),
        )
        self._min_gpu_memory, self._max_gpu_memory = reported_gpu_memory_range(table.gpu_memory_mib)
        self._topology_trees = self._build_topologies()
        self._jobs, self._tasks = {}, {}
        self._occupants, self._holds, self._foreign = {}, {}, {}
        self._host_port_tasks.clear()
        self._pod_affinity_tasks.clear()
        self._running_counts.clear()
        self._base_reasons.clear()
        for key, state in self._pods.items():
            if key in self._job_of_pod:  # ours
                continue
            node = table.index.get(state.node_name) if state.node_name else None
            if node is not None and state.phase not in _FINISHED:
                self._foreign[key] = node
                request = self._derive(state.pod)[0]
                releasing = self.stuck_releases.releasing(key, state)
                self._hold(key, _Hold(node, request, releasing, (), ours=False))
        self._dirty_jobs = set(self._ours_by_job) | set(self._groups)
        self._dirty_nodes = set(range(table.size))
        self._foreign_dirty = True
        self._jobs_out_of_place = -math.inf
        self._tasks_out_of_place = -math.inf

    def _build_topologies(self) -> dict[str, TopologyTree]:
        labels = [spec.labels for spec in self._table.specs]
        return {
            t.metadata.name: build_topology(
                t.metadata.name,
                [level.node_label for level in t.spec.levels],
                labels,
                {level.alias: level.node_label for level in t.spec.levels if level.alias},
            )
            for t in self._topologies
        }

    def _rebuild_job(self, key: str) -> None:
        old = self._jobs.get(key)
        job = self._make_job(key)
        kept = {task.key for task in job.tasks} if job is not None else set()
        if old is not None:
            for task in old.tasks:
                if task.key not in kept:
                    self._drop_task(task)
        if job is None:
            if old is not None:
                del self._jobs[key]
            self._running_counts.pop(key, None)
            self._base_reasons.pop(key, None)
            return
        self._jobs_out_of_place = _placed(self._jobs, old, job, self._jobs_out_of_place)
        self._jobs[key] = job
        for task in job.tasks:
            self._add_task(task)
        self._running_counts.pop(key, None)
        self._count_running(key, sum(1 for task in job.tasks if task.status is TaskStatus.RUNNING))
        if job.has_topology():
            self._base_reasons[key] = job.invalid_reason
        else:
            self._base_reasons.pop(key, None)

    def _make_job(self, key: str) -> JobInfo | None:
        """The job `key` from the current objects (None when it has neither a PodGroup nor a pod)."""
        ours = sorted((self._pods[k] for k in self._ours_by_job.get(key, ())), key=lambda p: p.rank)
        group = self._groups.get(key)
        if group is not None:
            named = (self._pods[k] for k in self._named_by_group.get(key, ()))
            first = min(named, key=lambda p: p.rank, default=None)
            job = job_from_pod_group(group, first.pod if first else None, self._priorities)
        elif ours:
            first_pod = ours[0].pod
            if c.POD_GROUP_ANNOTATION in first_pod.metadata.annotations:
                job = implicit_job(ours[0], key.split("/", 1)[1], self._priorities)
                job.invalid_reason = f"PodGroup {key} does not exist"
            else:
                job = implicit_job(ours[0], implicit_pod_group_name(first_pod), self._priorities)
                if first_pod.metadata.annotations.get(c.SKIP_PODGROUPER_ANNOTATION) == "true":
                    # No pod grouper makes it a PodGroup, and it names none (KAI never schedules it).
                    skip, group_key = c.SKIP_PODGROUPER_ANNOTATION, c.POD_GROUP_ANNOTATION
                    job.invalid_reason = (
                        f'the pod has {skip}: "true" and no {group_key}: no PodGroup is made for it'
                    )
        else:
            return None
        if job.invalid_reason is None:
            job.invalid_reason = queue_problem(job.queue, self._queue_tree)
        times = self._job_times.get(key)
        if times is not None:
            job.last_start, job.stale_since, job.last_eviction = (
                times.last_start,
                times.stale_since,
                times.last_eviction,
            )
        gated = 0
        index = self._table.index
        for state in ours:
            if is_gated(state):
                gated += 1  # KAI's status of that name: alive, but not for the scheduler until ungated
                continue
            nominated = self._nominated.get(state.pod.key)
            if nominated is not None:
                state = replace(state, nominated_node=nominated[0], nominated_gpu_groups=nominated[1])
            stuck = self.stuck_releases.is_stuck(state.pod.key)
            task = make_task(state, job, self._derive(state.pod), index, stuck=stuck)
            if task is not None:
                job.tasks.append(task)
                task.podset.tasks.append(task)
        if job.invalid_reason is None:
            job.invalid_reason = waiting_reason(job, gated)
        job.gated = gated
        return job

    def _add_task(self, task: TaskInfo) -> None:
        old = self._tasks.get(task.key)
        self._tasks_out_of_place = _placed(self._tasks, old, task, self._tasks_out_of_place)
        self._tasks[task.key] = task
        if task.host_ports:
            self._host_port_tasks.add(task.key)
        else:
            self._host_port_tasks.discard(task.key)
        if task.placement.has_pod_affinity:
            self._pod_affinity_tasks.add(task.key)
        else:
            self._pod_affinity_tasks.discard(task.key)
        self._account_task(task)

    def _account_task(self, task: TaskInfo) -> None:
        """Hold what the task holds on its node (or nothing)."""
        if task.node >= 0 and task.status in _OCCUPYING:
            releasing = task.status is TaskStatus.RELEASING
            self._hold(task.key, _Hold(task.node, task.request, releasing, task.gpu_groups, ours=True))
        else:
            self._release(task.key, ours=True)

    def _hold_again(self, key: str) -> None:
        """Account again what a pod holds, as it turned stuck in releasing (or back)."""
        job = self._job_of_pod.get(key)
        if job is not None:
            self._dirty_jobs.add(job)  # its task's status changes
        node = self._foreign.get(key)
        state = self._pods.get(key)
        if node is not None and state is not None:
            releasing = self.stuck_releases.releasing(key, state)
            self._hold(key, _Hold(node, self._derive(state.pod)[0], releasing, (), ours=False))

    def _drop_task(self, task: TaskInfo) -> None:
        if self._tasks.get(task.key) is not task:
            return  # the pod moved to another job, already made again
        del self._tasks[task.key]
        self._host_port_tasks.discard(task.key)
        self._pod_affinity_tasks.discard(task.key)
        self._release(task.key, ours=True)

    def _hold(self, key: str, hold: _Hold) -> None:
        """Account `hold` for a pod (its node's row is accounted again on refresh if anything changed)."""
        previous = self._holds.get(key)
        if previous == hold:
            return
        if previous is not None:
            self._release(key, ours=previous.ours)
        self._holds[key] = hold
        self._occupants.setdefault(hold.node, set()).add(key)
        self._dirty_nodes.add(hold.node)

    def _release(self, key: str, *, ours: bool) -> None:
        """Forget what a pod holds, if the hold is of that kind (a pod may have turned from ours into another
        scheduler's, or back, before its job was made again)."""
        hold = self._holds.get(key)
        if hold is not None and hold.ours == ours:
            del self._holds[key]
            _discard(self._occupants, hold.node, key)
            self._dirty_nodes.add(hold.node)

    def _account_nodes(self, nodes: Iterable[int]) -> None:
        """Account the pods on each node again, in creation order (as a build from scratch would)."""
        table = self._table
        for node in nodes:
            table.clear_node(node)
            keys = sorted(self._occupants.get(node, ()), key=lambda key: self._pods[key].rank)
            for key in keys:
                hold = self._holds[key]
                table.hold(node, hold.request, releasing=hold.releasing)
                if hold.ours:
                    table.share_gpus(node, hold.request, key, hold.gpu_groups, releasing=hold.releasing)

    def _account_foreign(self) -> None:
        """What other schedulers' pods take: capacity fair share cannot divide, and host ports."""
        capacity = self._ready_capacity.copy()
        ports: list[tuple[int, tuple[HostPort, ...]]] = []
        table = self._table
        for state in sorted((self._pods[key] for key in self._foreign), key=lambda p: p.rank):
            node = self._foreign[state.pod.key]
            request, _, host_ports = self._derive(state.pod)
            if host_ports:
                ports.append((node, host_ports))
            if table.specs[node].ready:  # a node that is not ready adds no capacity to take from
                capacity.sub(request.queue_resources(float(table.gpu_memory_mib[node])))
        self._capacity = capacity
        self._foreign_host_ports = ports


class _Ranked(Protocol):
    @property
    def rank(self) -> float: ...


R = TypeVar("R", bound=_Ranked)


def _placed(items: dict[str, R], old: R | None, new: R, out_of_place: float | None) -> float | None:
    """`out_of_place` (see `ClusterCache`) once `new` is stored under its key in `items`, where `old` was:
    assigning an existing key keeps its place in the dict, a new key goes last."""
    if old is not None:
        if old.rank == new.rank:
            return out_of_place
        lowest = min(old.rank, new.rank)
    elif items and new.rank < next(reversed(items.values())).rank:
        lowest = new.rank
    else:
        return out_of_place
    return lowest if out_of_place is None else min(out_of_place, lowest)


def _sort_tail(items: dict[str, R], lowest: float) -> None:
    """Put `items` in rank order again: it was, but for entries added or re-ranked since, all ranked at or
    after `lowest`; so every entry after the last one ranked before `lowest` is in place, and only the
    others (objects arriving nearly in creation order: a few) are sorted again."""
    tail: list[str] = []
    for key, item in reversed(items.items()):
        if item.rank < lowest:
            break
        tail.append(key)
    moved = sorted(((key, items.pop(key)) for key in tail), key=lambda entry: entry[1].rank)
    items.update(moved)


def _discard(index: dict[str, set[str]] | dict[int, set[str]], key: object, value: str) -> None:
    values = index.get(key)  # type: ignore[call-overload]
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]  # type: ignore[arg-type]


def build_snapshot(state: ClusterState, now: float = 0.0) -> ClusterSnapshot:
    """A snapshot of a whole `ClusterState`, built from scratch, at `now` on the session clock."""
    return ClusterCache.of(state).snapshot(state.queue_usage, now)
