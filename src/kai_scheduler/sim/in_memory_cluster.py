"""The in-memory cluster: API objects plus each pod's runtime state, and the effects a real cluster would
apply between scheduling cycles (binds, evictions, completions, arrivals, terminations)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from kai_scheduler.api import constants as c
from kai_scheduler.api.durations import parse_duration
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.api.numa_placement import placement_text
from kai_scheduler.api.objects import (
    AccountedResource,
    ApiObject,
    ConfigMap,
    DeviceClass,
    Namespace,
    Node,
    NodeResourceTopology,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.api.timestamps import seconds_since
from kai_scheduler.controlplane.bookkeeping import scheduler_phase
from kai_scheduler.framework.decisions import Decision, Ungating
from kai_scheduler.model.builder import job_key_of, staleness_grace
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.dra import uses_claims
from kai_scheduler.model.partition import pool_of
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.reservation_annotation import parse_reservation
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.scheduling_backoff import backs_off, with_pool_prefix
from kai_scheduler.model.shared_gpus import BoundPod, assign_missing_gpu_groups, is_shared_gpu_pod
from kai_scheduler.model.snapshot import ClusterState, JobTimes, PodGroupState, PodState
from kai_scheduler.sim.admission_gating import gated_at_creation, without_our_gate
from kai_scheduler.sim.claims import SimClaims, made_claims
from kai_scheduler.sim.storage import SimStorage
from kai_scheduler.sim.workloads import SimWorkloads, Workload

# Objects without a creation timestamp are created just before second 0, in input order.
_BEFORE_START = -1e-9


@dataclass(eq=False, slots=True)
class SimPod:
    pod: Pod
    rank: int
    arrival: float
    duration: float | None
    phase: str = "Pending"
    node: str | None = None
    gpu_groups: tuple[str, ...] = ()
    terminating: bool = False
    deleted: float | None = None  # its deletionTimestamp in the input, on the session clock
    nominated_node: str | None = None
    nominated_gpu_groups: tuple[str, ...] = ()
    scheduled_at: float | None = None
    finish_at: float | None = None
    evictions: int = 0
    # When a controller deleted it before it finished (it ends Failed without a decision): for reports.
    deleted_at: float | None = None
    # Queue admission gating (`admission_gating`): whether the webhook has seen this incarnation of the pod,
    # and when the scheduler removed its gate (session clock).
    gate_checked: bool = False
    admitted: float | None = None
    # `key` and `job_key` of the pod object they were read from: asked for every pod in every pass over
    # the cluster, and made again only when `pod` is replaced (a bound claim, an annotation).
    _keys: tuple[Pod, str, str] | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        keys = self._keys
        return keys[1] if keys is not None and keys[0] is self.pod else self._read_keys()[1]

    @property
    def job_key(self) -> str:
        keys = self._keys
        return keys[2] if keys is not None and keys[0] is self.pod else self._read_keys()[2]

    def _read_keys(self) -> tuple[Pod, str, str]:
        keys = self._keys = (self.pod, self.pod.key, job_key_of(self.pod))
        return keys


class SimCluster:
    """The cluster between cycles. The scheduler's view of it is `cache`, which every change below is
    handed to as a delta; the `SimPod`s keep what only the simulator needs (arrival, duration, when it
    was scheduled and finishes, how often it was evicted)."""

    def __init__(
        self,
        nodes: list[Node],
        queues: list[Queue],
        priorities: Priorities,
        topologies: list[Topology],
        pod_groups: list[tuple[PodGroup, int, float]],  # object, rank, arrival
        pods: list[SimPod],
        dra: SimDra | None = None,
        cache: ClusterCache | None = None,
        storage: SimStorage | None = None,
    ) -> None:
        self.nodes = nodes
        self.queues = queues
        self.priorities = priorities
        self.topologies = topologies
        self.pod_groups = pod_groups
        self.pods = pods
        self.now = 0.0
        # How long a stale gang may wait before eviction (negative: never); its deadline is an event.
        # The scheduler's default, and the PodGroups' own (`spec.stalenessGracePeriod`) by key.
        self.stale_grace = -1.0
        # What an eviction does to a pod that no workload of the input owns (`evictedUnownedPods`): with
        # "recreate" it comes back pending under its name, as the simulate contract says; with "delete" it
        # is gone, as on a cluster, where nothing makes it again.
        self.evicted_unowned = "recreate"
        self.own_stale_grace = {
            pg.key: grace for pg, _, _ in pod_groups if (grace := staleness_grace(pg)) is not None
        }
        # Input objects created before they arrive (a creationTimestamp before the start), by key.
        self.created_before: dict[str, float] = {}
        # When the last cycle said its decisions may change by the clock alone (a minimum runtime ends).
        self.wake_at: float | None = None
        # The scheduler's view; with scheduling shards, a `ShardedCache` that also keeps each shard's.
        self.cache = cache if cache is not None else ClusterCache()
        self.cache.set_nodes(nodes)
        self.cache.set_queues(queues)
        self.cache.set_topologies(topologies)
        self.cache.set_priorities(priorities)
        dra = dra or SimDra()
        self.cache.set_dra(dra.slices, dra.classes)
        self.claims = SimClaims(self.cache, dra.claims)
        self.storage = storage or SimStorage()
        self.storage.hand_to(self.cache)
        for key, made in dra.made.items():
            self.claims.expect(key, made)
        self._by_key = {pod.key: pod for pod in pods}
        self.nodes_by_name = {node.metadata.name: node for node in nodes}
        # Arrivals not admitted yet, latest first (popped from the end).
        self._arrivals: list[tuple[float, int, SimPod | PodGroupState]] = sorted(
            [(pod.arrival, i, pod) for i, pod in enumerate(pods)]
            + [
                (arrival, len(pods) + i, PodGroupState(pg, rank))
                for i, (pg, rank, arrival) in enumerate(pod_groups)
            ],
            reverse=True,  # (by time, then place: no two have the same place)
        )
        # PodGroups with a `schedulingBackoff` (`model.scheduling_backoff`), and the message of the scheduling
        # condition written on those that were unschedulable on their pool, by key.
        self._backing_off = {pg.key: (pg, rank, arrival) for pg, rank, arrival in pod_groups if backs_off(pg)}
        self.conditions: dict[str, str] = {}
        self._finishing: list[tuple[float, int, SimPod]] = []  # (finish time, tie, pod): a heap
        self._nominated: set[SimPod] = set()
        self._terminating = [pod for pod in pods if pod.terminating]
        # The workloads' controllers (none: the input has no workloads), the pods whose phase changed since
        # they last looked, and the next free creation rank for what they make.
        self.workloads: SimWorkloads | None = None
        # For the pods they make later: the claim templates, and the claim names in use (DRA).
        self.claim_templates: dict[str, ResourceClaimTemplate] = {}
        self.claims_taken: set[str] = set()
        self._changed: list[SimPod] = []
        self._evicted: list[SimPod] = []
        self.next_rank = len(pods) + len(pod_groups)
        # The keys of the pending pods handed to the scheduler (`_update`).
        self._pending: set[str] = set()
        # Queue admission gating switched on: the webhook gates pods as they are created (`_update`).
        self.admission_gating = False
        self._queues_by_name = {queue.metadata.name: queue for queue in queues}

    # --- what the scheduler sees ---------------------------------------------------------------------

    def admit_arrivals(self) -> None:
        """Hand the cache every pod and PodGroup that has arrived by now."""
        while self._arrivals and self._arrivals[-1][0] <= self.now:
            _, _, item = self._arrivals.pop()
            if isinstance(item, PodGroupState):
                key = item.pod_group.key
                self.cache.upsert_pod_group(replace(item, created=self.created_at(key, self.now)))
            else:
                if item.pod.spec.resource_claims:
                    self.claims.arrived(item.key)
                self._update(item)
                if item.finish_at is not None:
                    heapq.heappush(self._finishing, (item.finish_at, id(item), item))

    def _update(self, pod: SimPod) -> None:
        # Every change the scheduler sees comes through here, so this is where the waiting pods are counted.
        key = pod.key
        pending = pod.phase == "Pending"
        if pending:
            self._pending.add(key)
        else:
            self._pending.discard(key)
        if self.admission_gating and not pod.gate_checked and pending and pod.node is None:
            pod.pod = gated_at_creation(pod.pod, self._queues_by_name)
            pod.gate_checked = True
        created = self.created_at(key, pod.arrival)
        self.cache.upsert_pod(
            PodState(
                pod.pod,
                pod.rank,
                pod.node,
                pod.phase,
                pod.gpu_groups,
                pod.terminating,
                created=created,
                deleted=pod.deleted,
                admitted=pod.admitted,
            ),
            key,
        )

    def created_at(self, key: str, arrival: float) -> float:
        """When a pod or PodGroup was created (session seconds): when it arrives, unless the input gave it
        an earlier creationTimestamp (where a preemption delay starts)."""
        # (Compared in line, as `min` would: a call of the builtin costs some 1,300 instructions, and every
        # arrival and bind asks this.)
        before = self.created_before.get(key)
        return before if before is not None and before < arrival else arrival

    @property
    def has_pending(self) -> bool:
        """Whether any pod the scheduler sees is pending (waiting, or pipelined onto a node)."""
        return bool(self._pending)

    def state(self) -> ClusterState:
        """The cluster as the scheduler sees it now (only what has arrived), as a `ClusterState`."""
        self.admit_arrivals()
        return self.cache.state()

    def arrived_pods(self) -> list[SimPod]:
        return [p for p in self.pods if p.arrival <= self.now]

    @property
    def last_start(self) -> dict[str, float]:
        return {job: t.last_start for job, t in self.cache.job_times.items() if t.last_start is not None}

    @property
    def stale_since(self) -> dict[str, float]:
        return {job: t.stale_since for job, t in self.cache.job_times.items() if t.stale_since is not None}

    # --- effects ---------------------------------------------------------------------------------

    def apply(self, decisions: Sequence[Decision]) -> None:
        """Carry out a cycle's decisions as a real cluster would, instantly."""
        for pod in self._nominated:
            pod.nominated_node, pod.nominated_gpu_groups = None, ()
        self._nominated.clear()
        pipelined: dict[str, tuple[str, tuple[str, ...]]] = {}
        for decision in decisions:
            pod = self._by_key[decision.pod]
            if decision.type == "bind":
                pod.phase, pod.node, pod.gpu_groups = "Running", decision.node, decision.gpu_groups
                if decision.claims or decision.extended_claim is not None:
                    pod.pod = self.claims.bound(pod.pod, decision.claims, decision.extended_claim)
                if decision.numa_zones:  # as KAI's binder writes the BindRequest's predicted zones
                    predicted = placement_text(decision.numa_zones)
                    pod.pod = _annotated(pod.pod, c.NUMA_PLACEMENT_PREDICTED_ANNOTATION, predicted)
                if pod.pod.spec.volumes:
                    self.storage.bound(pod.pod, self.nodes_by_name[decision.node], self.cache)
                pod.nominated_node, pod.nominated_gpu_groups = None, ()
                pod.scheduled_at = self.now
                pod.finish_at = None if pod.duration is None else self.now + pod.duration
                self._changed.append(pod)
                if pod.finish_at is not None:
                    heapq.heappush(self._finishing, (pod.finish_at, id(pod), pod))
            elif decision.type == "pipeline":
                pod.nominated_node, pod.nominated_gpu_groups = decision.node, decision.gpu_groups
                pipelined[pod.key] = (decision.node, decision.gpu_groups)
                self._nominated.add(pod)
                continue
            else:
                # Terminated, and pending under its name until the controllers look (`run_controllers`):
                # a workload's controller replaces it or makes it again; one no workload owns is made again
                # or stays deleted (`evicted_unowned`). A pod pipelined earlier in the cycle and then
                # evicted loses that nomination too.
                pipelined.pop(pod.key, None)
                self._nominated.discard(pod)
                if pod.phase == "Running":  # not one already recreated (moved, then taken again)
                    pod.evictions += 1
                    self._evicted.append(pod)
                pod.phase, pod.node, pod.gpu_groups = "Pending", None, ()
                pod.nominated_node, pod.nominated_gpu_groups = None, ()
                pod.scheduled_at, pod.finish_at = None, None
                pod.gate_checked, pod.admitted = False, None  # made again: the webhook sees it anew
                if uses_claims(pod.pod):
                    pod.pod = self.claims.released(pod.pod)
                if c.NUMA_PLACEMENT_PREDICTED_ANNOTATION in pod.pod.metadata.annotations:
                    pod.pod = _annotated(pod.pod, c.NUMA_PLACEMENT_PREDICTED_ANNOTATION, None)  # a new pod
            self._update(pod)
        self.cache.nominate(pipelined)

    def ungate(self, ungates: Sequence[Ungating]) -> None:
        """The scheduler's patches for the `ungate` action's decisions: our gate off (only ours), the
        admission stamped; each pod is schedulable from the next cycle."""
        for ungating in ungates:
            for key in ungating.pods:
                pod = self._by_key.get(key)
                if pod is None:
                    continue
                pod.pod = without_our_gate(pod.pod)
                pod.admitted = self.now
                self._update(pod)

    def nominate(self, pipelined: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        """Pods pipelined before this simulation began (pod key -> node, shared GPUs), as if its first
        cycle followed the one that pipelined them: a look-ahead from a state with nominations."""
        held = {}
        for key, (node, groups) in pipelined.items():
            pod = self._by_key.get(key)
            if pod is None or pod.phase != "Pending" or pod.node is not None:
                continue
            pod.nominated_node, pod.nominated_gpu_groups = node, groups
            self._nominated.add(pod)
            held[key] = (node, groups)
        self.cache.nominate(held)

    def write_conditions(self, unschedulable: Mapping[str, str]) -> None:
        """KAI's status updater after a cycle, as far as `schedulingBackoff` reads it: a PodGroup with a
        backoff that ends the cycle unschedulable with no pod placed gets its `UnschedulableOnNodePool`
        condition on its pool, and so is left out of the cycles that follow."""
        if not self._backing_off:
            return
        due = [key for key in unschedulable if key in self._backing_off and key not in self.conditions]
        if not due:
            return
        placed = {
            pod.job_key
            for pod in self.arrived_pods()
            if pod.job_key in unschedulable and (pod.node is not None or pod.nominated_node is not None)
        }
        label_key = self.cache.pool_label_key
        for key in due:
            if key in placed:
                continue  # KAI writes no condition on a job with allocated pods
            group, rank, arrival = self._backing_off[key]
            self.conditions[key] = with_pool_prefix(group, unschedulable[key], label_key)
            pool = pool_of(group.metadata.labels, label_key)
            self.cache.upsert_pod_group(PodGroupState(group, rank, pool, self.created_at(key, arrival)))

    def remove_terminated(self) -> None:
        """Pods that were terminating when the cycle ran are gone for good."""
        gone = [p for p in self._terminating if p.arrival <= self.now]
        if not gone:
            return
        self._terminating = [p for p in self._terminating if p.arrival > self.now]
        for pod in gone:
            if uses_claims(pod.pod):
                pod.pod = self.claims.released(pod.pod, gone=True)
            self.cache.remove_pod(pod.key)
            self._pending.discard(pod.key)
            del self._by_key[pod.key]
        gone_ids = {id(pod) for pod in gone}
        self.pods = [p for p in self.pods if id(p) not in gone_ids]

    def complete_due(self) -> None:
        while self._finishing and self._finishing[0][0] <= self.now + 1e-9:
            finish_at, _, pod = heapq.heappop(self._finishing)
            if pod.phase == "Running" and pod.finish_at == finish_at:
                pod.phase, pod.finish_at = "Succeeded", None
                if uses_claims(pod.pod):
                    pod.pod = self.claims.released(pod.pod)
                self._update(pod)
                self._changed.append(pod)

    def run_controllers(self) -> None:
        """The workloads' controllers react to what happened since they last looked (binds, completions,
        evictions) and to the clock: new pods and PodGroups arrive now, deleted pods end."""
        workloads = self.workloads
        changed, self._changed = self._changed, []
        evicted, self._evicted = dict.fromkeys(self._evicted), []  # a pod moved, then taken, is there twice
        for pod in evicted:
            if self._gone_when_evicted(pod.pod):
                # Deleted by the eviction, and not made again under its name: it stays in the record as
                # Failed (a workload's controller makes a new pod in its place).
                pod.phase = "Failed"
                pod.nominated_node, pod.nominated_gpu_groups = None, ()  # a move's pipeline names it
                self._nominated.discard(pod)
                if uses_claims(pod.pod):
                    pod.pod = self.claims.released(pod.pod, gone=True)  # its own claims go with it
                self._update(pod)
            changed.append(pod)
        if workloads is None:
            return
        made = workloads.react(self.now, [(pod.pod, pod.phase) for pod in changed])
        # Deletions first: a pod made again under its name (a StatefulSet's) replaces the one deleted.
        for key in made.deleted:
            self._delete(key)
        for group in made.pod_groups:
            self.pod_groups.append((group, self.next_rank, self.now))
            grace = staleness_grace(group)
            if grace is not None:
                self.own_stale_grace[group.key] = grace
            self._arrivals.append((self.now, -1, PodGroupState(group, self.next_rank)))
            self.next_rank += 1
        for new in made.pods:
            if new.spec.resource_claims:
                # Kubernetes' resourceclaim controller makes the pod's claims from their templates.
                new, claims = made_claims(new, self.claim_templates, self.claims_taken)
                if claims:
                    self.claims.expect(new.key, claims)
            sim_pod = _sim_pod(new, self.next_rank, self.now)
            self.next_rank += 1
            ended = self._by_key.get(sim_pod.key)
            if ended is not None:
                # Made again under the name of one that ended (a StatefulSet's ordinal): the new one is
                # the record now.
                self.pods = [p for p in self.pods if p is not ended]
            self.pods.append(sim_pod)
            self._by_key[sim_pod.key] = sim_pod
            self._arrivals.append((self.now, -1, sim_pod))

    def _gone_when_evicted(self, pod: Pod) -> bool:
        """Whether an evicted pod stays deleted: its workload's controller makes a new pod in its place, or
        no workload owns it and the simulation deletes such pods (`evicted_unowned`)."""
        workloads = self.workloads
        if workloads is not None and workloads.owns(pod):
            return not workloads.replaced_by_name(pod)
        return self.evicted_unowned == "delete"

    def _delete(self, key: str) -> None:
        """A controller deleted the pod: it leaves the scheduler's view, and stays in the record as it
        ended (Failed if it had not finished)."""
        pod = self._by_key.get(key)
        if pod is None or pod.phase in ("Succeeded", "Failed"):
            return
        if uses_claims(pod.pod):
            pod.pod = self.claims.released(pod.pod, gone=True)
        pod.phase, pod.finish_at, pod.deleted_at = "Failed", None, self.now
        pod.nominated_node, pod.nominated_gpu_groups = None, ()
        self._nominated.discard(pod)
        self._update(pod)

    def next_event_after(self, time: float) -> float | None:
        """When something next arrives, completes or falls due (a stale gang's grace period, the end of a
        minimum runtime), after `time`."""
        times = [item[0] for item in self._arrivals[-1:]]
        finish = self._next_finish(time)
        if finish is not None:
            times.append(finish)
        if self.wake_at is not None:
            times.append(self.wake_at)
        if self.workloads is not None:
            controllers = self.workloads.next_event_after(time)
            if controllers is not None:
                times.append(controllers)
        later = [t for t in times if t > time + 1e-9]
        for job, since in self.stale_since.items():
            grace = self.own_stale_grace.get(job, self.stale_grace)
            if grace >= 0:
                # A stale gang's deadline counts even when it is already due: the next cycle evicts it.
                later.append(max(since + grace, time))
        return min(later) if later else None

    def _next_finish(self, time: float) -> float | None:
        """The earliest time after `time` at which a running pod finishes."""
        heap = self._finishing
        while heap and heap[0][2].finish_at != heap[0][0]:
            heapq.heappop(heap)  # evicted or finished since it was pushed
        if not heap:
            return None
        if heap[0][0] > time + 1e-9:
            return heap[0][0]
        return min((t for t, _, pod in heap if pod.finish_at == t and t > time + 1e-9), default=None)

    def has_future_events(self) -> bool:
        return self.next_event_after(self.now) is not None


@dataclass(frozen=True, slots=True)
class SimDra:
    """The DRA objects of the input, and the claims made for pods from templates (by pod key)."""

    slices: Sequence[ResourceSlice] = ()
    classes: Sequence[DeviceClass] = ()
    claims: Sequence[ResourceClaim] = ()
    made: dict[str, list[ResourceClaim]] = field(default_factory=dict)


def build_cluster(
    loaded: Sequence[ApiObject | Workload], start: datetime, cache: ClusterCache | None = None
) -> SimCluster:
    """Turn loaded objects (in input order) into the simulated cluster at second 0 (its scheduler's view:
    `cache`, by default a new `ClusterCache`); workloads there at second 0 become their pods first."""
    workloads = SimWorkloads(start) if any(isinstance(o, Workload) for o in loaded) else None
    objects = (
        workloads.initial(loaded)
        if workloads is not None
        else [o for o in loaded if not isinstance(o, Workload)]
    )
    nodes = [o for o in objects if isinstance(o, Node)]
    queues = [o for o in objects if isinstance(o, Queue)]
    topologies = [o for o in objects if isinstance(o, Topology)]
    priorities = Priorities.of(o for o in objects if isinstance(o, PriorityClass))
    # The pods and PodGroups whose creationTimestamp the input gives: when they were created, by key (found
    # as they are ranked, while each object is at hand: a second pass over 290,000 pods cost more).
    created_before: dict[str, float] = {}

    def created(obj: ApiObject, arrival: float, position: int) -> tuple[float, int]:
        """When `obj`, at `position` in the input, is created, and its position: what it is ranked by."""
        stamp = obj.metadata.creation_timestamp
        seconds = (stamp - start).total_seconds() if stamp is not None else _BEFORE_START
        return (max(seconds, arrival) if arrival > 0 else seconds, position)

    def ranked(obj: PodGroup | Pod, arrival: float, position: int) -> tuple[float, int]:
        rank = created(obj, arrival, position)
        if obj.metadata.creation_timestamp is not None:
            created_before[obj.key] = rank[0]
        return rank

    # Older queues win fair-share ties: order them by creation time, then by input order.
    queue_positions = {id(o): i for i, o in enumerate(objects) if isinstance(o, Queue)}
    queues.sort(key=lambda queue: created(queue, 0.0, queue_positions[id(queue)]))
    group_arrivals: dict[str, float] = {}
    ranked_groups = []
    for position, o in enumerate(objects):
        if isinstance(o, PodGroup):
            arrival = _annotation_seconds(o.metadata.annotations, c.SIM_ARRIVAL_ANNOTATION)
            group_arrivals[o.key] = arrival
            ranked_groups.append((ranked(o, arrival, position), o, arrival))
    ranked_pods = []
    for position, o in enumerate(objects):
        if isinstance(o, Pod):
            group = o.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
            own = o.metadata.annotations.get(c.SIM_ARRIVAL_ANNOTATION)
            arrival = (
                parse_duration(own) if own is not None else group_arrivals.get(f"{o.namespace}/{group}", 0.0)
            )
            ranked_pods.append((ranked(o, arrival, position), o, arrival))
    # One rank space for pods and pod groups: a bare pod's implicit group takes the pod's rank.
    everything = sorted([key for key, _, _ in ranked_groups] + [key for key, _, _ in ranked_pods])
    rank_of = {key: i for i, key in enumerate(everything)}
    claims = [o for o in objects if isinstance(o, ResourceClaim)]
    templates = {o.key: o for o in objects if isinstance(o, ResourceClaimTemplate)}
    taken = {claim.key for claim in claims}
    made: dict[str, list[ResourceClaim]] = {}
    pods = []
    for key, pod, arrival in ranked_pods:
        if pod.spec.resource_claims:
            pod, made[pod.key] = made_claims(pod, templates, taken)
        pods.append(_sim_pod(pod, rank_of[key], arrival))
        if pod.metadata.deletion_timestamp is not None:
            pods[-1].deleted = (pod.metadata.deletion_timestamp - start).total_seconds()
    _name_unlabelled_gpus(pods, nodes)
    cluster = SimCluster(
        cache=cache,
        nodes=nodes,
        queues=queues,
        priorities=priorities,
        topologies=topologies,
        pod_groups=[(pg, rank_of[key], arrival) for key, pg, arrival in ranked_groups],
        pods=pods,
        dra=SimDra(
            slices=[o for o in objects if isinstance(o, ResourceSlice)],
            classes=[o for o in objects if isinstance(o, DeviceClass)],
            claims=claims,
            made={key: claims for key, claims in made.items() if claims},
        ),
        storage=SimStorage(
            config_maps=[o for o in objects if isinstance(o, ConfigMap)],
            claims=[o for o in objects if isinstance(o, PersistentVolumeClaim)],
            volumes=[o for o in objects if isinstance(o, PersistentVolume)],
            classes=[o for o in objects if isinstance(o, StorageClass)],
        ),
    )
    cluster.created_before = created_before
    for _, pod_group, _ in ranked_groups:
        # KAI's bookkeeping on a PodGroup, as a live cluster's (or a snapshot of one) carries it.
        annotations = pod_group.metadata.annotations
        times = JobTimes(
            seconds_since(annotations.get(c.LAST_START_TIMESTAMP_ANNOTATION), start),
            seconds_since(annotations.get(c.STALE_PODGROUP_TIMESTAMP_ANNOTATION), start),
            seconds_since(annotations.get(c.LAST_EVICTION_TIMESTAMP_ANNOTATION), start),
            _reservation(annotations.get(c.RESERVATION_ANNOTATION), start),
        )
        cluster.cache.set_job_times(pod_group.key, times)
    cluster.cache.set_disruption_budgets([o for o in objects if isinstance(o, PodDisruptionBudget)])
    cluster.cache.set_node_topologies([o for o in objects if isinstance(o, NodeResourceTopology)])
    cluster.cache.set_accounted_resources([o for o in objects if isinstance(o, AccountedResource)])
    # Namespaces given in the input carry their labels to namespaceSelectors, as live mode's informer does.
    namespaces = {o.metadata.name: o.metadata.labels for o in objects if isinstance(o, Namespace)}
    if namespaces:
        cluster.cache.set_namespace_labels(namespaces)
    cluster.workloads = workloads
    cluster.claim_templates, cluster.claims_taken = templates, taken
    return cluster


def _annotated(pod: Pod, key: str, value: str | None) -> Pod:
    """The pod with the annotation set (None: removed)."""
    annotations = {k: v for k, v in pod.metadata.annotations.items() if k != key}
    if value is not None:
        annotations[key] = value
    return pod.model_copy(update={"metadata": pod.metadata.model_copy(update={"annotations": annotations})})


def _reservation(text: str | None, start: datetime) -> Reservation | None:
    """A PodGroup's `kai.scheduler/reservation` on the simulated clock; None when absent, or not one (the
    loader refuses such input with its place: this is the look-ahead's copy, which the export wrote)."""
    if text is None:
        return None
    try:
        return parse_reservation(text, start)
    except ValueError:
        return None


def _annotation_seconds(annotations: dict[str, str], name: str) -> float:
    raw = annotations.get(name)
    return parse_duration(raw) if raw is not None else 0.0


def _sim_pod(pod: Pod, rank: int, arrival: float) -> SimPod:
    duration_text = pod.metadata.annotations.get(c.SIM_DURATION_ANNOTATION)
    duration = parse_duration(duration_text) if duration_text is not None else None
    node, phase = scheduler_phase(pod.spec.node_name, pod.status.phase)
    sim_pod = SimPod(
        pod=pod,
        rank=rank,
        arrival=arrival,
        duration=duration,
        phase=phase,
        node=node,
        terminating=pod.metadata.deletion_timestamp is not None,
    )
    if node is not None:
        sim_pod.gpu_groups = pod_gpu_groups(pod.metadata.labels)
        sim_pod.finish_at = None if duration is None else arrival + duration
    return sim_pod


def _name_unlabelled_gpus(pods: list[SimPod], nodes: list[Node]) -> None:
    """Bound fractional pods that name no shared GPU (`runai-gpu-group`) get one (`model.shared_gpus`)."""
    # Only bound pods that ask for part of a GPU hold a portion of one (of 290,000 pods at 20,000 nodes,
    # often none): the others are neither named a group nor count in one.
    shared = [i for i, p in enumerate(pods) if p.node is not None and is_shared_gpu_pod(p.pod)]
    if not shared:
        return
    memory_of = {n.metadata.name: n.metadata.labels.get(c.GPU_MEMORY_LABEL, "") for n in nodes}
    bound = [BoundPod(pods[i].pod, pods[i].node, pods[i].gpu_groups) for i in shared]
    for index, groups in assign_missing_gpu_groups(bound, memory_of).items():
        pods[shared[index]].gpu_groups = groups
