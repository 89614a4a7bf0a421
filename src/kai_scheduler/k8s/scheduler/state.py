"""The live edge's side of the shared cluster state: informer events in, `ClusterCache` deltas out.

`StateBuilder` keeps a `model.cache.ClusterCache` current, as the simulator's `SimCluster` keeps its
own (sim/in_memory_cluster.py); the rules they share (priorities, phases, timestamps, job keys) live
below both edges.
What is live mode's own:

* Objects are parsed with the project's models; a pod of ours (and every PodGroup) goes through
  `parse_object`, the same checks as the simulator's input (KAI's admission rules), so that nothing the
  builder cannot handle reaches it. An object that fails is skipped and logged once per version; one bad
  object never stops scheduling. Pods of other schedulers only need to parse (they occupy capacity).
* Each pod's runtime facts (`pod_facts.py`): its node or its outstanding BindRequest's, what this process
  is evicting, pipelines; gated (but for the queue admission gate) and ungrouped pods and GPU
  reservation pods left out. When the scheduler removed the queue admission gate, from its annotation.
* Creation order: pods and PodGroups share one rank space, by `creationTimestamp` then namespace/name
  (a bare pod's implicit group takes the pod's rank), kept by `controlplane.ranks.CreationRanks` as objects
  come and go (the few objects whose rank moves to make room for a new one are handed to the cache again);
  queues are ordered the same way.
* Namespaces' labels (when the informers watch Namespaces, as the scheduler's do) for pod (anti-)affinity's
  namespaceSelector; without them a namespace carries only its `kubernetes.io/metadata.name` label.
* Priority classes: `model.priorities.Priorities.of` (KAI's four unless redefined; `globalDefault`).
* `JobTimes` come from the PodGroup annotations `kai.scheduler/last-start-timestamp`,
  `kai.scheduler/stale-podgroup-timestamp` and `kai.scheduler/last-eviction-timestamp` (RFC 3339),
  converted to the session clock (`SessionClock`), the last start from the job's running pods when that is
  newer (`job_starts.py`: the scheduler writes no last-start annotation), the reservation from
  `kai.scheduler/reservation` (`reservations.py`), unless the loop's own bookkeeping has the job.
* For the loop, per job: how many of its pods run and which wait (`JobPods`), and which jobs changed since
  the last build, so that a cycle's bookkeeping looks at those jobs rather than at every pod.

The models are read in `parsing.py`; what the loop gets besides the state, and the session clock, is
`live_state.py`; the cluster-scoped kinds (nodes, queues, topologies, priority classes, namespaces) go into
the cache through `cluster_scoped.py`, and objects' times are read by `object_times.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from kai_scheduler.api import constants as c
from kai_scheduler.api.admission_gate import QUEUE_ADMITTED_ANNOTATION
from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.api.reasons import INVALID_POD_GROUP
from kai_scheduler.controlplane.ranks import CreationRanks
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.informers import POD_GROUP_INDEX, POD_INDEX, POD_NODE_INDEX, InformerSet
from kai_scheduler.k8s.runtime.objects import annotations_of, labels_of, metadata_of, object_key
from kai_scheduler.k8s.scheduler.accounted_state import AccountedResourceFeed
from kai_scheduler.k8s.scheduler.cluster_scoped import ClusterScopedFeed
from kai_scheduler.k8s.scheduler.disruption_state import DisruptionBudgetFeed
from kai_scheduler.k8s.scheduler.dra_state import DraFeed
from kai_scheduler.k8s.scheduler.job_starts import JobStarts, later_start, placed_at
from kai_scheduler.k8s.scheduler.live_state import TERMINAL_PHASES, JobPods, LiveState, Placed, SessionClock
from kai_scheduler.k8s.scheduler.notices import Noticed, notices_of
from kai_scheduler.k8s.scheduler.numa_state import NodeTopologyFeed, with_predicted_zones
from kai_scheduler.k8s.scheduler.object_times import (
    annotation_time,
    creation_key,
    in_creation_order,
    incarnation_ended,
    pod_group_times,
    stamp_at,
)
from kai_scheduler.k8s.scheduler.parsing import (
    Parsed,
    checked,
    renamed,
    same_pod_group_model,
    same_pod_model,
    schema_only,
)
from kai_scheduler.k8s.scheduler.pod_facts import is_reservation_pod, pod_facts
from kai_scheduler.k8s.scheduler.storage_state import StorageFeed
from kai_scheduler.k8s.scheduler.ungrouped import UngroupedPods
from kai_scheduler.k8s.scheduler.waiting import Waiting, invalid_pod, problem_text, waits_for_scheduler
from kai_scheduler.model.builder import job_key_of
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.scheduling_backoff import backs_off, latest_condition_pool
from kai_scheduler.model.shared_gpus import BoundPod, assign_missing_gpu_groups, is_shared_gpu_pod
from kai_scheduler.model.snapshot import JobTimes, PodGroupState, PodState

OTHER_SCHEDULER = "other-scheduler"

# The last part of a rank's sort key (`StateBuilder._rank`): a PodGroup, or a pod (after its group).
_GROUP, _POD = 0, 1
_NO_TIMES = JobTimes()


class StateBuilder:
    """Keeps a `ClusterCache` current from an `InformerSet` (see the module doc) and builds `LiveState`s.

    Informer events mark what changed (pods, PodGroups, BindRequests by their pod, the cluster-scoped
    kinds); `build` parses and hands to the cache only those, plus the pods whose in-flight memory
    (evicting) changed. Everything that was in the informers' caches when the builder was made
    counts as changed once."""

    def __init__(
        self,
        informers: InformerSet,
        clock: SessionClock,
        *,
        scheduler_name: str = c.SCHEDULER_NAME,
        require_pod_groups: bool = False,
        partition: Partition | None = None,
    ) -> None:
        self.informers = informers
        # The node pool this scheduler serves (a shard of KAI's): the cache holds its view, and the loop's
        # bookkeeping looks only at its jobs, so that two shards never write over each other's PodGroups.
        self.partition = partition
        self._group_pools: dict[str, tuple[str | None]] = {}  # PodGroup key -> (its pool label,) as last seen
        self.clock = clock
        self.scheduler_name = scheduler_name
        # With a pod grouper running, a pending pod waits until it names its PodGroup (as in KAI): placed
        # on its own before that, a gang member would start alone.
        self.require_pod_groups = require_pod_groups
        self._ungrouped = UngroupedPods(scheduler_name, grouper_runs=require_pod_groups)
        # The cache knows our pods by the name `kai-scheduler`: ours are presented under that name, and
        # others (even ones that say kai-scheduler: another shard's) under another one.
        self._our_pods = Parsed("pod", renamed(checked(Pod), c.SCHEDULER_NAME, always=True), same_pod_model)
        self._other_pods = Parsed(
            "pod", renamed(schema_only(Pod), OTHER_SCHEDULER, always=False), same_pod_model
        )
        self._groups = Parsed("podgroup", checked(PodGroup), same_pod_group_model)
        self._cluster = ClusterScopedFeed(informers, partition)
        self.cache = ClusterCache(partition)
        self._dra = DraFeed(informers)
        self._storage = StorageFeed(informers)
        self._budgets = DisruptionBudgetFeed(informers)
        self._node_topologies = NodeTopologyFeed(informers)
        self._accounted = AccountedResourceFeed(informers)
        self._ranks = CreationRanks()
        # What the cache holds, as the informers showed it: raw objects by key, and PodGroup times.
        self._pod_objects: dict[str, JsonObject] = {}
        self._group_objects: dict[str, JsonObject] = {}
        self._group_times: dict[str, JobTimes] = {}
        self._group_states: dict[str, PodGroupState] = {}  # as last handed to the cache
        self._skipped: dict[str, str] = {}  # object key -> "<Kind> <key>", for objects that do not parse
        # Pods of ours that wait but that the scheduler cannot take (`waiting.py`), and why; PodGroups that
        # break the admission rules, and how (their pods wait for them: `InvalidPodGroup`).
        self._rejected: dict[str, Waiting] = {}
        self._invalid_groups: dict[str, str] = {}
        self._noticed: list[Noticed] = []  # warnings about the objects read since the last build
        # What the loop reads, kept per changed pod (see `LiveState`).
        self._our_states: dict[str, PodState] = {}
        self._job_of_pod: dict[str, str] = {}
        self._active_pods: dict[str, int] = {}  # job -> its pods bound (or binding) and not finished
        self._job_pods: dict[str, JobPods] = {}
        self._changed_jobs: set[str] = set()  # since the last build
        self._conditioned_groups: set[str] = set()
        self._times_changed: set[str] = set()  # jobs whose PodGroup times may have changed since then
        self._starts = JobStarts()  # when each job's running pods were placed
        self._bind_requests: dict[str, JsonObject] = {}
        self._last: LiveState | None = None
        # The in-flight memory as of the last build (a change makes the pod dirty).
        self._evicting: dict[str, str] = {}
        # --- what changed since the last build ----------------------------------------------------
        self._dirty_pods: set[str] = set(informers.pods.cache)
        self._dirty_groups: set[str] = set(informers.pod_groups.cache)
        self._watch(informers)

    def _watch(self, informers: InformerSet) -> None:
        def pod_changed(*objs: JsonObject) -> None:
            self._dirty_pods.add(object_key(objs[-1]))

        def group_changed(*objs: JsonObject) -> None:
            self._dirty_groups.add(object_key(objs[-1]))

        def request_changed(*objs: JsonObject) -> None:
            for obj in objs:
                meta = metadata_of(obj)
                pod_name = (obj.get("spec") or {}).get("podName") or meta.get("name")
                self._dirty_pods.add(f"{meta.get('namespace') or 'default'}/{pod_name}")

        informers.pods.add_handler(pod_changed, pod_changed, pod_changed)
        informers.pod_groups.add_handler(group_changed, group_changed, group_changed)
        informers.bind_requests.add_handler(request_changed, request_changed, request_changed)

    @property
    def pod_group_states(self) -> Mapping[str, PodGroupState]:  # as handed to the cache (read-only)
        return MappingProxyType(self._group_states)

    def _in_shard(self, obj: JsonObject) -> bool:
        """Whether an object that does not parse is this shard's (so that one shard says what is wrong with
        it, not every one): by its node-pool label, a pod by its PodGroup's when that is known."""
        if self.partition is None:
            return True
        named = annotations_of(obj).get(c.POD_GROUP_ANNOTATION)
        namespace = metadata_of(obj).get("namespace") or "default"
        group = self._group_objects.get(f"{namespace}/{named}") if named else None
        return self.partition.holds(labels_of(group if group is not None else obj))

    def _ours(self, obj: JsonObject) -> bool:
        return str((obj.get("spec") or {}).get("schedulerName") or "default-scheduler") == self.scheduler_name

    def build(
        self,
        *,
        nominated: Mapping[str, Placed] | None = None,
        evicting: Mapping[str, str] | None = None,
        job_times: Mapping[str, JobTimes] | None = None,
        job_times_changed: Iterable[str] | None = None,
    ) -> LiveState:
        """The state now. `nominated`: pod key -> where it was pipelined last cycle; `evicting`: pod key ->
        uid of pods evicted but maybe not yet seen terminating; `job_times`: the loop's own bookkeeping, which
        overrides the PodGroup annotations (the cache may not show its latest writes yet), and
        `job_times_changed` the jobs whose entry in it may have changed since the last build (None: any)."""
        if self._last is not None:
            self._last.expire()
        self._changed_jobs = set()
        evicting = dict(evicting or {})
        previous = self._evicting
        self._dirty_pods.update(
            k for k in evicting.keys() | previous.keys() if evicting.get(k) != previous.get(k)
        )
        self._evicting = evicting
        self._dirty_pods |= self._ungrouped.due()
        gone = self._cluster.update(self.cache, self._noticed)
        if gone:  # the pods naming a priority class that is gone are read again, to say so (`notices_of`)
            self._dirty_pods |= {
                key
                for key, obj in self.informers.pods.cache.items()
                if obj.get("spec", {}).get("priorityClassName") in gone
            }
        self._dra.update(self.cache)
        self._storage.update(self.cache)
        self._budgets.update(self.cache)
        self._node_topologies.update(self.cache)
        self._accounted.update(self.cache)
        while self._dirty_groups or self._dirty_pods:  # again when ranks moved to make room (`_rank`)
            self._update_groups()
            self._update_pods()
        cache = self.cache
        cache.nominate({key: (placed.node, placed.gpu_groups) for key, placed in (nominated or {}).items()})
        self._update_job_times(job_times or {}, job_times_changed)
        return self._live_state()

    # --- deltas into the cache -----------------------------------------------------------------------

    def _update_groups(self) -> None:
        cache = self.informers.pod_groups.cache
        dirty, self._dirty_groups = self._dirty_groups, set()
        for key in in_creation_order(dirty, cache):
            obj = cache.get(key)
            group = self._groups.get(key, obj) if obj is not None else None
            self._note_group(key, group)
            if obj is not None and group is None:
                self._skipped[key] = f"PodGroup {key}"
                self._invalid_groups[key] = problem_text(self._groups.errors.get(key))
                if self._in_shard(obj):
                    self._noticed.append(Noticed(obj, INVALID_POD_GROUP, self._invalid_groups[key]))
            else:
                self._skipped.pop(key, None)
                self._invalid_groups.pop(key, None)
            previous = self._group_objects.pop(key, None)
            self._conditioned_groups.discard(key)
            if previous is not None and incarnation_ended(previous, obj, key):
                self._ranks.forget((*creation_key(previous, key), _GROUP))
            if group is None:
                if obj is None:
                    self._groups.forget(key)
                if previous is not None:
                    self.cache.remove_pod_group(key)
                self._group_states.pop(key, None)
                self._group_times.pop(key, None)
                continue
            assert obj is not None  # it parsed
            self._group_objects[group.key] = obj
            if self._in_shard(obj):
                self._noticed += notices_of(obj, group, self._cluster.class_names)
            if (obj.get("status") or {}).get("schedulingConditions") and key in self._changed_jobs:
                self._conditioned_groups.add(group.key)
            rank = self._rank((*creation_key(obj, key), _GROUP))
            # Read for `schedulingBackoff` only: other PodGroups' status writes change nothing here.
            conditions = (obj.get("status") or {}).get("schedulingConditions") or []
            pool = latest_condition_pool(conditions) if backs_off(group) else None
            state = PodGroupState(group, rank, pool, stamp_at(self.clock, obj, "creationTimestamp"))
            if self._group_states.get(key) != state:  # a status write changes nothing the job is made of
                self._group_states[key] = state
                self.cache.upsert_pod_group(state)
            annotations = annotations_of(obj)
            times = pod_group_times(self.clock, annotations, key)
            if times.empty():
                self._group_times.pop(key, None)
            else:
                self._group_times[key] = times

    def _note_group(self, key: str, group: PodGroup | None) -> None:
        """The PodGroup `key` changed (None: gone or unreadable): the loop's bookkeeping looks at it when
        it is this shard's now or was before; when its pool changed, the pods that name it are looked at
        again (a pod's pool is its PodGroup's)."""
        partition = self.partition
        if partition is None:
            self._changed_jobs.add(key)
            self._times_changed.add(key)
            return
        before = self._group_pools.pop(key, None)
        after = None if group is None else (group.metadata.labels.get(partition.label_key),)
        if after is not None:
            self._group_pools[key] = after
        if before != after:
            named = self.informers.pods.by_index(POD_GROUP_INDEX, key)
            self._dirty_pods.update(object_key(pod) for pod in named)
        if any(pool is not None and partition.holds_value(pool[0]) for pool in (before, after)):
            self._changed_jobs.add(key)
            self._times_changed.add(key)

    def _update_pods(self) -> None:
        informers = self.informers
        requests = informers.bind_requests
        unlabelled_nodes: set[str] = set()
        dirty, self._dirty_pods = self._dirty_pods, set()
        for key in in_creation_order(dirty, informers.pods.cache):
            obj = informers.pods.cache.get(key)
            previous = self._pod_objects.pop(key, None)
            if previous is not None and incarnation_ended(previous, obj, key):
                self._ranks.forget((*creation_key(previous, key), _POD))
            if obj is None:
                self._our_pods.forget(key)
                self._other_pods.forget(key)
                self._skipped.pop(key, None)
                self._ungrouped.forget(key)
            found = requests.by_index(POD_INDEX, key) if obj else []
            read = previous is not None or key in self._our_pods.entries or key in self._other_pods.entries
            if obj is not None and self._ungrouped.put_off(key, obj, read, found):
                continue  # read when the pod grouper has grouped it (`ungrouped.py`)
            self._rejected.pop(key, None)
            state = self._pod_state(key, obj, found) if obj else None
            self._forget_loop_view(key)
            if state is None:
                self._starts.note(key, None, None)
                if previous is not None:
                    self.cache.remove_pod(key)
                continue
            assert obj is not None  # it has a state
            self._pod_objects[key] = obj
            self._remember_loop_view(key, state, found[0] if found else None)
            self._note_start(key, state, obj, found[0] if found else None)
            self.cache.upsert_pod(state)
            if state.node_name is not None and not state.gpu_groups and is_shared_gpu_pod(state.pod):
                unlabelled_nodes.add(state.node_name)
        for node in unlabelled_nodes:
            self._name_unlabelled_gpus(node)

    def _remember_loop_view(self, key: str, state: PodState, request: JsonObject | None) -> None:
        if request is not None:
            self._bind_requests[key] = request
        if state.pod.spec.scheduler_name != c.SCHEDULER_NAME or not self.cache.schedules(state.pod):
            return
        job = job_key_of(state.pod)
        self._our_states[key] = state
        self._job_of_pod[key] = job
        self._changed_jobs.add(job)
        bound = bool((self._pod_objects[key].get("spec") or {}).get("nodeName"))
        self._job_pods.setdefault(job, JobPods()).count(key, state, 1, bound=bound)
        if state.node_name is not None and state.phase not in TERMINAL_PHASES:
            self._active_pods[job] = self._active_pods.get(job, 0) + 1

    def _note_start(self, key: str, state: PodState, obj: JsonObject, request: JsonObject | None) -> None:
        """When the pod was placed, if it runs in a job of ours (`job_starts.py`)."""
        job = self._job_of_pod.get(key)
        running = state.node_name is not None and state.phase not in TERMINAL_PHASES and not state.terminating
        if job is None or not running:
            self._starts.note(key, None, None)
        else:
            self._starts.note(key, job, placed_at(self.clock, obj, request))

    def _forget_loop_view(self, key: str) -> None:
        self._bind_requests.pop(key, None)
        state = self._our_states.pop(key, None)
        job = self._job_of_pod.pop(key, None)
        if state is None or job is None:
            return
        self._changed_jobs.add(job)
        pods = self._job_pods[job]
        pods.count(key, state, -1)
        if not pods.pods:
            del self._job_pods[job]
        if state.node_name is None or state.phase in TERMINAL_PHASES:
            return
        left = self._active_pods[job] - 1
        if left:
            self._active_pods[job] = left
        else:
            del self._active_pods[job]

    def _pod_state(self, key: str, obj: JsonObject, requests: list[JsonObject]) -> PodState | None:
        """The pod as the cache should hold it; None to leave it out (gone, unparsable, a reservation pod,
        or waiting for the pod grouper)."""
        if is_reservation_pod(obj):
            return None
        ours = self._ours(obj)
        parsed = (self._our_pods if ours else self._other_pods).get(key, obj)
        (self._other_pods if ours else self._our_pods).forget(key)
        if parsed is None:
            self._skipped[key] = f"Pod {key}"
            if ours and waits_for_scheduler(obj) and self._in_shard(obj):
                self._rejected[key] = invalid_pod(self._our_pods.errors.get(key))
            return None
        self._skipped.pop(key, None)
        if ours and self.cache.schedules(parsed):
            self._noticed += notices_of(obj, parsed, self._cluster.class_names)
        request = requests[0] if requests else None
        fact = pod_facts(
            obj,
            request,
            self._evicting.get(key),
            ours=self._ours(obj),
            require_pod_groups=self.require_pod_groups,
        )
        if fact is None:
            return None
        node_name, phase, gpu_groups, terminating = fact
        if node_name is not None and not (obj.get("spec") or {}).get("nodeName"):
            # Binding: its NUMA zones as the binder will write them on it.
            parsed = with_predicted_zones(parsed, request)
        rank = self._rank((*creation_key(obj, key), 1))
        return PodState(
            parsed,
            rank,
            node_name,
            phase,
            gpu_groups,
            terminating,
            created=stamp_at(self.clock, obj, "creationTimestamp"),
            deleted=stamp_at(self.clock, obj, "deletionTimestamp"),
            admitted=annotation_time(self.clock, annotations_of(obj), QUEUE_ADMITTED_ANNOTATION, key),
        )

    def _name_unlabelled_gpus(self, node: str) -> None:
        """Bound shared-GPU pods on `node` that name no GPU group (bound by something else) get one, packed
        as gpupack would, so that their portions are accounted on a definite GPU (as the simulator does)."""
        states = [
            state
            for key in self.informers.pods.index_keys(POD_NODE_INDEX, node)
            if (state := self.cache.pod(key)) is not None and state.node_name == node
        ]
        states.sort(key=lambda state: state.rank)
        nodes = self._cluster.node_models()
        memory = {n.metadata.name: n.metadata.labels.get(c.GPU_MEMORY_LABEL, "") for n in nodes}
        bound = [BoundPod(state.pod, state.node_name, state.gpu_groups) for state in states]
        for index, groups in assign_missing_gpu_groups(bound, memory, fresh_prefix="unlabelled-").items():
            named = replace(states[index], gpu_groups=groups)
            self.cache.upsert_pod(named)
            if named.pod.key in self._our_states:
                self._our_states[named.pod.key] = named

    def _rank(self, sort_key: tuple[float, str, int]) -> float:
        rank, moved = self._ranks.rank(sort_key)
        for _, key, kind in moved:  # their ranks moved to make room: handed to the cache again
            (self._dirty_groups if kind == _GROUP else self._dirty_pods).add(key)
        return rank

    def _update_job_times(self, loop_times: Mapping[str, JobTimes], changed: Iterable[str] | None) -> None:
        """The cache's job times: the loop's own where it has the job, else the PodGroup annotations' with
        the start its running pods show when newer, for the jobs whose entry in any may have changed."""
        cache = self.cache
        started = self._starts.take_changed()
        if changed is None:
            keys = loop_times.keys() | self._group_times.keys() | cache.job_times.keys() | self._starts.jobs()
        else:
            keys = self._times_changed.union(changed, started)
        self._times_changed = set()
        for key in keys:
            times = loop_times.get(key)
            if times is None:
                times = later_start(self._group_times.get(key, _NO_TIMES), self._starts.earliest(key))
            if cache.job_times.get(key, _NO_TIMES) != times:
                cache.set_job_times(key, times)

    # --- what the loop reads -------------------------------------------------------------------------

    def _live_state(self) -> LiveState:
        noticed, self._noticed = tuple(self._noticed), []
        self._last = LiveState(
            self.cache,
            pods=MappingProxyType(self._pod_objects),
            our_pods=MappingProxyType(self._our_states),
            job_of_pod=MappingProxyType(self._job_of_pod),
            pod_groups=MappingProxyType(self._group_objects),
            active_jobs=self._active_pods.keys(),
            bind_requests=MappingProxyType(self._bind_requests),
            job_times=MappingProxyType(self.cache.job_times),
            job_pods=MappingProxyType(self._job_pods),
            changed_jobs=self._changed_jobs,  # a new set each build
            conditioned_groups=self._conditioned_groups,
            rejected=MappingProxyType(self._rejected),
            invalid_groups=MappingProxyType(self._invalid_groups),
            noticed=noticed,
            skipped=tuple(name for names in self._cluster.skipped.values() for name in names)
            + tuple(sorted(self._skipped.values())),
        )
        return self._last


__all__ = [
    "OTHER_SCHEDULER",
    "StateBuilder",
]
