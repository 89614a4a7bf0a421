"""`ClusterCache`: the scheduler's view of the cluster, kept current by deltas (KAI's scheduler cache).

Both edges feed it: the simulator with its loaded objects and the effects it applies, live mode with
informer events. It keeps the scheduling model (jobs, tasks, the node table with every running pod
accounted) between cycles and, per change, rebuilds only what the change touches:

* a pod or PodGroup that changed makes its job *dirty*: the job and its tasks are made again from the
  current objects (`job_rebuild`), and the nodes its old and new tasks occupy become dirty;
* a dirty node's usage row is accounted again from the pods on it, in creation order, exactly as a
  build from scratch would account it (`accounting`: so floating-point sums are the same);
* which nodes there are, priority classes or the nodes' DRA devices that change make everything dirty,
  and queues every job (rare; they change what every job and index means); the same nodes changed (a
  cordon, a label) make only the node table again, every row accounted from what the pods hold.

This class is the one place that says what each delta makes dirty; its parts (the package's other
modules) each keep one kind of state. `snapshot()` hands a cycle a `ClusterSnapshot` whose node table is
a copy and whose job and task objects are the cache's own: a session changes a task's status, node and
GPU groups only through its statements, and `after_cycle` puts the tasks of the cycle's decisions back as
their pods say, and marks dirty any job a plugin marked invalid. A full build is the same code with
everything dirty (`ClusterCache.of(state)`), which is what tests compare the incremental cache with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kai_scheduler.api import constants as c
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
    Queue,
    ResourceClaim,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.model.builder import PodDerivations, build_node_table, node_table_of, queue_tree_of
from kai_scheduler.model.cache.accounting import NodeAccounting
from kai_scheduler.model.cache.asks import PodAsks
from kai_scheduler.model.cache.changes import Changes
from kai_scheduler.model.cache.deltas import delta
from kai_scheduler.model.cache.gang_jobs import GangJobs
from kai_scheduler.model.cache.inputs import ClusterInputs
from kai_scheduler.model.cache.job_rebuild import JobRebuild
from kai_scheduler.model.cache.job_times import JobTimesBook, stamp
from kai_scheduler.model.cache.lone_jobs import LoneJobs
from kai_scheduler.model.cache.nominations import Nomination, Nominations
from kai_scheduler.model.cache.pods import PodIndex
from kai_scheduler.model.cache.running_jobs import RunningJobs, RunningJobsKeeper
from kai_scheduler.model.disruption import DisruptionBudgets
from kai_scheduler.model.job_changes import JobChangeMark
from kai_scheduler.model.nodes import NodeSpecInfo, NodeTable
from kai_scheduler.model.partition import DEFAULT_NODE_POOL, Partition
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.releasing import StuckReleases
from kai_scheduler.model.resources import Resources
from kai_scheduler.model.snapshot import (
    ClusterSnapshot,
    ClusterState,
    JobTimes,
    NumaInputs,
    PodGroupState,
    PodState,
)
from kai_scheduler.model.topology import TopologyTree


class NodeRowsMismatch(AssertionError):
    """The node table made of the rows read as the nodes arrived differs from one read now (a missed
    input)."""


class PodKeyMismatch(AssertionError):
    """`upsert_pod` was handed a key that is not its pod's."""


class ClusterCache:
    """See the module doc. Pods and PodGroups arrive as `PodState` / `PodGroupState` (their `rank` is
    their creation order); the cluster-scoped kinds are set as a whole, and a set that equals the current
    one changes nothing. The methods marked `@delta` are the changes of the cluster (`deltas`).

    With a `partition` (a scheduling shard: `model.partition`), the cache holds that shard's view: only its
    nodes, queues and PodGroups, and of the pods only those its PodGroups hold as ours; every other pod is
    another scheduler's to it (it holds the node it is bound to, when that node is the shard's)."""

    def __init__(self, partition: Partition | None = None) -> None:
        self.partition = partition
        self.stuck_releases = StuckReleases()
        self._changes = Changes()
        self._inputs = ClusterInputs(partition)
        self._asks = PodAsks(self._inputs.dra)
        self._accounting = NodeAccounting(self._changes)
        self._nominations = Nominations()
        # Bare pods' plain jobs, made as the pods arrive (`lone_jobs`); `verify` compares each taken.
        self.lone_jobs = LoneJobs(
            self._inputs, self._asks, self._accounting, self._nominations, self.stuck_releases
        )
        self._pods = PodIndex(
            partition, self._changes, self._asks, self._accounting, self.stuck_releases, self.lone_jobs
        )
        # PodGroups' jobs, drafted as the PodGroups and their pods arrive (`gang_jobs`).
        self._gangs = GangJobs(
            self._pods, self._inputs, self._asks, self._accounting, self._nominations, self.lone_jobs
        )
        self._times = JobTimesBook()
        self._jobs = JobRebuild(
            self._changes,
            self._pods,
            self._inputs,
            self._accounting,
            self._asks,
            self._nominations,
            self._times,
            self.stuck_releases,
            self.lone_jobs,
            self._gangs,
        )
        self._topology_trees: dict[str, TopologyTree] = {}
        # Moves whenever something a cycle reads may have changed (`version`).
        self._version = 0
        # running_jobs, made in what the jobs' change log names since its base (`running_jobs`), and the
        # version it was last asked at with its answer.
        self.running_keeper = RunningJobsKeeper(self._jobs.log)
        self._running: tuple[int, RunningJobs] | None = None

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
        cache.set_accounted_resources(state.accounted_resources)
        for group in state.pod_groups:
            cache.upsert_pod_group(group)
        for pod in state.pods:
            cache.upsert_pod(pod)
            if pod.nominated_node is not None:
                cache._nominations.by_pod[pod.pod.key] = (pod.nominated_node, pod.nominated_gpu_groups)
        for key, times in state.job_times.items():
            cache.set_job_times(key, times)
        return cache

    @property
    def derivations(self) -> PodDerivations:
        """What pods ask for, once per pod object; caches of one cluster may share it."""
        return self._asks.derivations

    @derivations.setter
    def derivations(self, derivations: PodDerivations) -> None:
        self._asks.derivations = derivations

    # --- deltas: cluster-scoped kinds ----------------------------------------------------------------

    @delta
    def set_storage(
        self,
        config_maps: Sequence[ConfigMap],
        claims: Sequence[PersistentVolumeClaim],
        volumes: Sequence[PersistentVolume],
        classes: Sequence[StorageClass],
    ) -> None:
        """ConfigMaps and storage objects, all of them. No job is made of them: only the predicates read
        them (`model.storage`), each session afresh."""
        self._inputs.set_storage(config_maps, claims, volumes, classes)
        self._version += 1

    @delta
    def set_disruption_budgets(self, budgets: Sequence[PodDisruptionBudget]) -> None:
        """PodDisruptionBudgets, all of them. Like storage, no job is made of them: each snapshot matches
        them with the pods afresh (`model.disruption`), and only when there are any."""
        self._inputs.disruption_budgets = list(budgets)
        self._version += 1

    @delta
    def set_node_topologies(self, topologies: Sequence[NodeResourceTopology]) -> None:
        """NodeResourceTopologies, all of them. Only the numa plugin reads them, and only when it is on:
        nothing is made of them here."""
        self._inputs.set_node_topologies(topologies)
        self._version += 1

    @delta
    def set_accounted_resources(self, resources: Sequence[AccountedResource]) -> None:
        """AccountedResources, all of them. No job is made of them: each snapshot hands their reading to
        the limit checks (`model.accounted`)."""
        self._inputs.set_accounted_resources(resources)
        self._version += 1

    @delta
    def set_nodes(self, nodes: Iterable[Node]) -> None:
        changed = self._inputs.set_nodes(nodes)
        if changed is None:
            return
        if changed.same_names:
            self._changes.node_table = True  # the same nodes: their indexes in the jobs' tasks stay
            edited = self._changes.edited_nodes
            for name, before in changed.replaced.items():
                edited.setdefault(name, before)  # the first: what the table was made of
        else:
            self._changes.everything = True
        self._version += 1

    @delta
    def set_queues(self, queues: Sequence[Queue]) -> None:
        """The queues in creation order (older queues win fair-share ties)."""
        if self._inputs.set_queues(queues):
            self._changes.jobs.update(self._jobs.jobs)  # whether a job's queue exists and is a leaf
            self._version += 1

    @delta
    def set_topologies(self, topologies: Sequence[Topology]) -> None:
        if self._inputs.set_topologies(topologies):
            self._topology_trees = self._inputs.topology_trees(self._accounting.table)
            self._version += 1

    @delta
    def set_priorities(self, priorities: Priorities) -> None:
        if self._inputs.set_priorities(priorities):
            self._changes.everything = True
            self._version += 1

    @delta
    def set_namespace_labels(self, labels: Mapping[str, Mapping[str, str]]) -> None:
        self._inputs.namespace_labels = labels
        self._version += 1

    @delta
    def set_dra(
        self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass], *, enabled: bool = True
    ) -> None:
        """The ResourceSlices and DeviceClasses; `enabled`: whether the cluster serves DRA at all."""
        if self._inputs.set_dra(slices, classes, enabled=enabled):
            self._changes.everything = True  # the nodes' GPUs changed
            self._version += 1

    # --- deltas: DRA claims (the pods whose claims changed what they ask for are made again) ------------

    @delta
    def upsert_claim(self, claim: ResourceClaim) -> None:
        self._pods.asks_changed(self._inputs.dra.upsert_claim(claim))
        self._version += 1

    @delta
    def remove_claim(self, key: str) -> None:
        self._pods.asks_changed(self._inputs.dra.remove_claim(key))
        self._version += 1

    @delta
    def set_claims(self, claims: Iterable[ResourceClaim]) -> None:
        """Every ResourceClaim at once (those left out are gone)."""
        self._pods.asks_changed(self._inputs.dra.set_claims(claims))
        self._version += 1

    # --- deltas: pods and pod groups -----------------------------------------------------------------

    @delta
    def upsert_pod(self, state: PodState, key: str | None = None) -> None:
        """A pod added or changed. Its nomination is the cache's own (`nominate`), whatever `state` says.
        `key`: the pod's key (`Pod.key`) when the caller holds it already (the simulator keeps each pod's):
        made from the pod object, it costs some 2,800 instructions, and every arrival and bind asks it.
        With `verify` (`KAI_SCHEDULER_VERIFY_REUSE=1`) it is made again and compared."""
        if key is None:
            key = state.pod.key
        elif self.lone_jobs.verify and key != state.pod.key:
            raise PodKeyMismatch(f"upsert_pod was handed the key {key!r} for the pod {state.pod.key!r}")
        self._version += 1  # in place or not, a task may change
        self.stuck_releases.track(key, state)
        pods = self._pods
        previous = pods.pods.get(key)
        if previous is not None and self._jobs.update_in_place(key, previous, state):
            pods.pods[key] = state
            return
        pods.put(key, previous, state)
        if self._gangs.drafting:
            job = pods.job_of_pod.get(key)
            if job is not None:
                self._gangs.pod_arrived(job, key, state)

    @delta
    def remove_pod(self, key: str) -> None:
        self._version += 1
        if self._pods.remove(key):
            self.stuck_releases.track(key, None)
            self._nominations.by_pod.pop(key, None)

    @delta
    def upsert_pod_group(self, state: PodGroupState) -> None:
        self._version += 1
        self._pods.put_group(state, self.pool_label_key)
        self._gangs.group_arrived(state.pod_group.key)

    @delta
    def remove_pod_group(self, key: str) -> None:
        self._version += 1
        self._pods.remove_group(key)
        self._gangs.forget(key)

    # --- deltas: what the scheduler and the cluster remember about jobs --------------------------------

    @delta
    def nominate(self, pipelined: Mapping[str, Nomination]) -> None:
        """A pipeline promises resources for the next cycle only: the pods pipelined by the cycle that just
        ran (pod key -> node, shared GPUs) replace every earlier nomination."""
        for key in self._nominations.replace(pipelined):
            self._jobs.nominate(key)
            self._version += 1

    @delta
    def set_job_times(self, key: str, times: JobTimes) -> None:
        self._set_job_times(key, times)

    @delta
    def replace_job_times(self, times: Mapping[str, JobTimes]) -> None:
        """Every job's times at once (jobs left out have none): as `_set_job_times` of each that differs,
        in one loop (after a first cycle at 5,000 nodes, ~15,000 jobs started), the version moved and the
        log's notes made at once."""
        changed = self._times.differences(times)
        self._version += len(changed)
        self._jobs.log.note_all([key for key, value in changed.items() if self._book_times(key, value)])

    def _set_job_times(self, key: str, times: JobTimes) -> None:
        self._version += 1
        if self._book_times(key, times):
            self._jobs.log.note(key)

    def _book_times(self, key: str, times: JobTimes) -> bool:
        """`times` into the book and onto the job `key` (stamped): whether there is such a job."""
        self._times.set(key, times)
        job = self._jobs.jobs.get(key)
        if job is None:
            return False
        stamp(job, times)
        return True

    # --- queries ------------------------------------------------------------------------------------

    @property
    def pool_label_key(self) -> str:
        """The node-pool label that names a PodGroup's pool (`model.partition.pool_of`)."""
        return self.partition.label_key if self.partition is not None else c.NODE_POOL_LABEL

    @property
    def backed_off(self) -> Mapping[str, PodGroupState]:
        """The PodGroups left out for their `schedulingBackoff` (`model.scheduling_backoff`), by key."""
        return self._pods.backed_off

    def schedules(self, pod: Pod) -> bool:
        """Whether this cache schedules `pod` (a pod of this scheduler, in its partition)."""
        return self._pods.schedules(pod)

    def pod(self, key: str) -> PodState | None:
        return self._pods.pods.get(key)

    def claim(self, key: str) -> ResourceClaim | None:
        return self._inputs.dra.claims.get(key)

    @property
    def job_times(self) -> Mapping[str, JobTimes]:
        return self._times.by_job

    @property
    def job_keys(self) -> frozenset[str]:
        """The jobs this cache schedules (up to date)."""
        self.refresh()
        return frozenset(self._jobs.jobs)

    @property
    def running_jobs(self) -> RunningJobs:
        """Jobs with a pod bound to a node and neither finished nor terminating (up to date); the same set
        while the version stays, else made in the jobs changed since (a large cluster has hundreds of
        thousands: `running_jobs`)."""
        self.refresh()
        if self._running is not None and self._running[0] == self._version:
            return self._running[1]
        running = self.running_keeper.of(self._jobs.running_counts)
        self._running = (self._version, running)
        return running

    # --- the cycle -------------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """A count that moves whenever something a cycle reads may have changed: every delta that changed
        anything (a pod or PodGroup upserted or removed moves it even when equal: live resyncs repeat
        them), a nomination or job's times that changed, a job a session left marked invalid, a pod that
        turned stuck in releasing. Read it after `catch_up` or `snapshot`: equal counts of one cache, then
        the cycles' snapshots are the same (`controlplane.unchanged_cycles`)."""
        return self._version

    def catch_up(self, now: float | None = None) -> None:
        """`refresh` at `now` on the session clock, which moves the time pods stuck in releasing are judged
        by (`model.releasing`)."""
        if now is not None:
            for key in self.stuck_releases.advance(now):
                self._pods.release_changed(key)
                self._version += 1
        self.refresh()

    def refresh(self) -> None:
        """Bring the model up to date with every delta received."""
        changes = self._changes
        if changes.everything or changes.node_table or changes.jobs or changes.nodes or changes.foreign:
            self._version += 1
        everything = changes.everything
        if everything:
            self._rebuild_everything()
        elif changes.node_table:
            self._rebuild_node_table()
        jobs = self._jobs
        # A few changed jobs in a fixed order (a set's is not); every job in the order its objects came,
        # nearly creation order: the jobs then need next to no sorting, and their pods are read in the
        # order they were made, as they lie in memory (290,000 one-pod jobs: a third less CPU).
        if everything:
            jobs.rebuild_all()
        else:
            for key in sorted(changes.jobs):
                jobs.rebuild(key)
        changes.jobs.clear()
        jobs.sort()
        if changes.nodes:
            self._accounting.account_nodes(self._pods.pods)
        if changes.foreign:
            self._accounting.account_foreign(self._pods.pods, self._pods.foreign, self._asks)

    def _rebuild_everything(self) -> None:
        """Every job to be made again (`JobRebuild.rebuild_all`), on a new node table."""
        changes = self._changes
        changes.everything = changes.node_table = False
        changes.edited_nodes = {}
        table = self._new_node_table()
        self._accounting.reset(table)
        self._topology_trees = self._inputs.topology_trees(table)
        self._jobs.reset()
        self._pods.hold_foreign_pods()

    def _rebuild_node_table(self) -> None:
        """The same nodes, changed (`Changes.node_table`). When no edited node's capacity moved (a cordon,
        a label, a taint), the table keeps every row and only those nodes' static facts are replaced;
        else a new table whose rows are the old ones', every row accounted again from the holds kept,
        exactly as `_rebuild_everything` would account the jobs it made again."""
        changes = self._changes
        changes.node_table = False
        edited, changes.edited_nodes = changes.edited_nodes, {}
        specs = self._respecified(edited)
        if specs is not None:
            self._accounting.respecify(specs)
        else:
            self._accounting.reset(self._new_node_table(), keep_holds=True)
        self._topology_trees = self._inputs.topology_trees(self._accounting.table)

    def _respecified(self, edited: Mapping[str, Node]) -> dict[int, NodeSpecInfo] | None:
        """The new static facts of the `edited` nodes (name -> the object the table was made of) by row,
        each built as the whole table builds it; None when one's capacity is not the same (then every row
        is accounted again)."""
        inputs, table = self._inputs, self._accounting.table
        gpus, backed = inputs.dra.gpus_per_node, inputs.dra.backed_scalars
        specs = {}
        for name, was in edited.items():
            now = node_table_of([inputs.node_rows[name]], gpus, backed)
            if not now.same_capacity(build_node_table([was], gpus, backed)):
                return None
            specs[table.index[name]] = now.specs[0]
        return specs

    def _new_node_table(self) -> NodeTable:
        """The table of the nodes' rows read as they arrived (`ClusterInputs.node_rows`); `verify`: the
        same as the table read off the nodes now, else `NodeRowsMismatch`."""
        inputs = self._inputs
        gpus, backed = inputs.dra.gpus_per_node, inputs.dra.backed_scalars
        table = node_table_of(inputs.node_rows.values(), gpus, backed)
        if self.lone_jobs.verify:
            made = build_node_table(list(inputs.nodes.values()), gpus, backed)
            if not (table.same_capacity(made) and table.specs == made.specs):
                raise NodeRowsMismatch("the node table of the rows read as the nodes arrived differs")
        return table

    def snapshot(
        self, queue_usage: Mapping[str, Resources] | None = None, now: float | None = None
    ) -> ClusterSnapshot:
        """What one cycle starts from. The session may change the node table and queue tree freely (they
        are its own); jobs and tasks are shared with the cache until `after_cycle`, and so are the dicts
        that hold them, which stay as they are until the cache next catches up (a copy of each, and its
        release after the cycle, cost ~3 ms a cycle at 80,000 jobs: more than the rest of a snapshot).
        `now` (session clock) moves the time pods stuck in releasing are judged by (`model.releasing`)."""
        self.catch_up(now)
        inputs, accounting, jobs = self._inputs, self._accounting, self._jobs
        table = accounting.table
        return ClusterSnapshot(
            nodes=table.copy(),
            queues=queue_tree_of(inputs.queue_specs, queue_usage),
            jobs=jobs.jobs,
            tasks=jobs.tasks,
            capacity=accounting.capacity.copy(),
            min_gpu_memory_mib=accounting.min_gpu_memory,
            max_gpu_memory_mib=accounting.max_gpu_memory,
            existing_gpu_groups=set(table.group_by_id),
            topologies=dict(self._topology_trees),
            host_port_tasks=jobs.by_rank(jobs.host_port_tasks),
            foreign_host_ports=list(accounting.foreign_host_ports),
            pod_affinity_tasks=jobs.by_rank(jobs.pod_affinity_tasks),
            nominated_tasks=jobs.by_rank(jobs.nominated_tasks),
            admission_jobs=jobs.jobs_by_rank(jobs.admission_jobs),
            asks_gpu_memory=bool(jobs.gpu_memory_tasks),
            namespace_labels=inputs.namespace_labels,
            topology_jobs=frozenset(jobs.base_reasons),  # exactly the jobs with a topology constraint
            dra=inputs.dra.snapshot(table, self._pods.job_of_pod) if inputs.dra.active else None,
            storage=inputs.storage,
            node_pool=self.partition.pool if self.partition is not None else DEFAULT_NODE_POOL,
            disruption_budgets=(
                DisruptionBudgets.of(inputs.disruption_budgets, self._pods.pods.values())
                if inputs.disruption_budgets
                else None
            ),
            numa=NumaInputs(inputs.node_topologies, self._pods.pods) if inputs.node_topologies else None,
            accounted=inputs.accounted(self._pods.pods),
            job_changes=JobChangeMark(jobs.log, jobs.log.stamp),
        )

    def after_cycle(self, decided_pods: Iterable[str]) -> None:
        """A cycle ran on the last snapshot: its decisions left their tasks as the session committed them
        (status, node, shared GPUs), which go back to what their pods say; a plugin may have marked jobs
        invalid, and those are made again on the next refresh."""
        self._version += self._jobs.restore(decided_pods)
        self._jobs.restore_reasons()

    # --- the full state, for exports and checks --------------------------------------------------------

    def state(self) -> ClusterState:
        """Everything the cache holds as a `ClusterState` (pods and pod groups in creation order)."""
        inputs, pods, dra = self._inputs, self._pods, self._inputs.dra
        config_maps, claims, volumes, classes = inputs.storage_objects
        return ClusterState(
            nodes=list(inputs.nodes.values()),
            pods=[self._nominations.of(pod) for pod in sorted(pods.pods.values(), key=lambda p: p.rank)],
            pod_groups=sorted([*pods.groups.values(), *pods.backed_off.values()], key=lambda g: g.rank),
            queues=list(inputs.queues),
            priority_classes=inputs.priorities.classes,
            default_priority=inputs.priorities.default,
            job_times=dict(self._times.by_job),
            topologies=list(inputs.topologies),
            namespace_labels=inputs.namespace_labels,
            resource_claims=list(dra.claims.values()),
            resource_slices=list(dra.slices),
            device_classes=list(dra.classes),
            dra_enabled=dra.enabled,
            config_maps=config_maps,
            persistent_volume_claims=claims,
            persistent_volumes=volumes,
            storage_classes=classes,
            disruption_budgets=list(inputs.disruption_budgets),
            node_topologies=list(inputs.node_topologies.values()),
            accounted_resources=list(inputs.accounted_resources),
        )


def build_snapshot(state: ClusterState, now: float = 0.0) -> ClusterSnapshot:
    """A snapshot of a whole `ClusterState`, built from scratch, at `now` on the session clock."""
    return ClusterCache.of(state).snapshot(state.queue_usage, now)
