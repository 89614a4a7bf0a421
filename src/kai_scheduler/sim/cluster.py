"""The in-memory cluster: API objects plus each pod's runtime state, and the effects a real cluster would
apply between scheduling cycles (binds, evictions, completions, arrivals, terminations)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kai_scheduler.api import constants as c
from kai_scheduler.api.durations import parse_duration
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.api.objects import ApiObject, Node, Pod, PodGroup, PriorityClass, Queue, Topology
from kai_scheduler.framework.decisions import Decision
from kai_scheduler.model.builder import implicit_pod_group_name
from kai_scheduler.model.shared_gpus import BoundPod, assign_missing_gpu_groups
from kai_scheduler.model.snapshot import ClusterState, JobTimes, PodGroupState, PodState

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
    nominated_node: str | None = None
    nominated_gpu_groups: tuple[str, ...] = ()
    scheduled_at: float | None = None
    finish_at: float | None = None
    evictions: int = 0

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def job_key(self) -> str:
        name = self.pod.metadata.annotations.get(c.POD_GROUP_ANNOTATION) or implicit_pod_group_name(self.pod)
        return f"{self.pod.namespace}/{name}"


@dataclass(eq=False)
class SimCluster:
    nodes: list[Node]
    queues: list[Queue]
    priority_classes: dict[str, int]
    default_priority: int
    topologies: list[Topology]
    pod_groups: list[tuple[PodGroup, int, float]]  # object, rank, arrival
    pods: list[SimPod] = field(default_factory=list)
    now: float = 0.0
    # What a real cluster keeps on PodGroups across cycles, by job key.
    last_start: dict[str, float] = field(default_factory=dict)
    stale_since: dict[str, float] = field(default_factory=dict)
    # How long a stale gang may wait before eviction (negative: never); its deadline is an event.
    stale_grace: float = -1.0
    # When the last cycle said its decisions may change by the clock alone (a minimum runtime ends).
    wake_at: float | None = None

    def state(self) -> ClusterState:
        """The cluster as the scheduler sees it now: only what has arrived."""
        arrived = [p for p in self.pods if p.arrival <= self.now]
        return ClusterState(
            nodes=self.nodes,
            pods=[
                PodState(
                    p.pod,
                    p.rank,
                    p.node,
                    p.phase,
                    p.gpu_groups,
                    p.terminating,
                    p.nominated_node,
                    p.nominated_gpu_groups,
                )
                for p in arrived
            ],
            pod_groups=[
                PodGroupState(pg, rank) for pg, rank, arrival in self.pod_groups if arrival <= self.now
            ],
            queues=self.queues,
            priority_classes=self.priority_classes,
            default_priority=self.default_priority,
            job_times={
                key: JobTimes(self.last_start.get(key), self.stale_since.get(key))
                for key in self.last_start.keys() | self.stale_since.keys()
            },
            topologies=self.topologies,
        )

    def arrived_pods(self) -> list[SimPod]:
        return [p for p in self.pods if p.arrival <= self.now]

    # --- effects ---------------------------------------------------------------------------------

    def remember_stale(self, updates: dict[str, float | None]) -> None:
        for job, since in updates.items():
            if since is None:
                self.stale_since.pop(job, None)
            else:
                self.stale_since[job] = since

    def running_jobs(self) -> set[str]:
        return {p.job_key for p in self.pods if p.phase == "Running"}

    def stamp_starts(self, running_before: set[str]) -> None:
        """A job that went from no running pod to some has (re)started now: min-runtime counts from here."""
        running_now = self.running_jobs()
        for job in running_now - running_before:
            self.last_start[job] = self.now
        for job in set(self.last_start) - running_now:
            del self.last_start[job]

    def apply(self, decisions: Sequence[Decision]) -> None:
        """Carry out a cycle's decisions as a real cluster would, instantly."""
        by_key = {p.key: p for p in self.pods}
        # A pipeline promises resources for the next cycle only.
        for pod in self.pods:
            pod.nominated_node, pod.nominated_gpu_groups = None, ()
        for decision in decisions:
            pod = by_key[decision.pod]
            if decision.type == "bind":
                pod.phase, pod.node, pod.gpu_groups = "Running", decision.node, decision.gpu_groups
                pod.nominated_node, pod.nominated_gpu_groups = None, ()
                pod.scheduled_at = self.now
                pod.finish_at = None if pod.duration is None else self.now + pod.duration
            elif decision.type == "pipeline":
                pod.nominated_node, pod.nominated_gpu_groups = decision.node, decision.gpu_groups
            else:
                # Terminated, and recreated by its workload controller as a pending pod of the same name.
                pod.phase, pod.node, pod.gpu_groups = "Pending", None, ()
                pod.nominated_node, pod.nominated_gpu_groups = None, ()
                pod.scheduled_at, pod.finish_at = None, None
                pod.evictions += 1

    def remove_terminated(self) -> None:
        """Pods that were terminating when the cycle ran are gone for good."""
        self.pods = [p for p in self.pods if not (p.terminating and p.arrival <= self.now)]

    def complete_due(self) -> None:
        for pod in self.pods:
            if pod.phase == "Running" and pod.finish_at is not None and pod.finish_at <= self.now + 1e-9:
                pod.phase, pod.finish_at = "Succeeded", None

    def next_event_after(self, time: float) -> float | None:
        """When something next arrives, completes or falls due (a stale gang's grace period, the end of a
        minimum runtime), after `time`."""
        times = [p.arrival for p in self.pods if p.arrival > time]
        times += [arrival for _, _, arrival in self.pod_groups if arrival > time]
        times += [p.finish_at for p in self.pods if p.phase == "Running" and p.finish_at is not None]
        if self.wake_at is not None:
            times.append(self.wake_at)
        later = [t for t in times if t > time + 1e-9]
        if self.stale_grace >= 0:
            # A stale gang's deadline counts even when it is already due: the next cycle evicts it.
            later += [max(since + self.stale_grace, time) for since in self.stale_since.values()]
        return min(later) if later else None

    def has_future_events(self) -> bool:
        return self.next_event_after(self.now) is not None


def build_cluster(objects: Sequence[ApiObject], start: datetime) -> SimCluster:
    """Turn loaded objects (in input order) into the simulated cluster at second 0."""
    nodes = [o for o in objects if isinstance(o, Node)]
    queues = [o for o in objects if isinstance(o, Queue)]
    topologies = [o for o in objects if isinstance(o, Topology)]
    classes = dict(c.BUILTIN_PRIORITY_CLASSES)
    default_priority = c.DEFAULT_PRIORITY
    for o in objects:
        if isinstance(o, PriorityClass):
            classes[o.metadata.name] = o.value
            if o.global_default:
                default_priority = o.value
    order = {id(o): i for i, o in enumerate(objects)}

    def created(obj: ApiObject, arrival: float) -> tuple[float, int]:
        stamp = obj.metadata.creation_timestamp
        seconds = (stamp - start).total_seconds() if stamp is not None else _BEFORE_START
        return (max(seconds, arrival) if arrival > 0 else seconds, order[id(obj)])

    # Older queues win fair-share ties: order them by creation time, then by input order.
    queues.sort(key=lambda queue: created(queue, 0.0))
    group_arrivals: dict[str, float] = {}
    ranked_groups = []
    for o in objects:
        if isinstance(o, PodGroup):
            arrival = _annotation_seconds(o.metadata.annotations, c.SIM_ARRIVAL_ANNOTATION)
            group_arrivals[o.key] = arrival
            ranked_groups.append((created(o, arrival), o, arrival))
    ranked_pods = []
    for o in objects:
        if isinstance(o, Pod):
            group = o.metadata.annotations.get(c.POD_GROUP_ANNOTATION)
            own = o.metadata.annotations.get(c.SIM_ARRIVAL_ANNOTATION)
            arrival = (
                parse_duration(own) if own is not None else group_arrivals.get(f"{o.namespace}/{group}", 0.0)
            )
            ranked_pods.append((created(o, arrival), o, arrival))
    # One rank space for pods and pod groups: a bare pod's implicit group takes the pod's rank.
    everything = sorted([key for key, _, _ in ranked_groups] + [key for key, _, _ in ranked_pods])
    rank_of = {key: i for i, key in enumerate(everything)}
    cluster = SimCluster(
        nodes=nodes,
        queues=queues,
        priority_classes=classes,
        default_priority=default_priority,
        topologies=topologies,
        pod_groups=[(pg, rank_of[key], arrival) for key, pg, arrival in ranked_groups],
    )
    for key, pod, arrival in ranked_pods:
        cluster.pods.append(_sim_pod(pod, rank_of[key], arrival))
    for _, pod_group, _ in ranked_groups:
        # KAI's bookkeeping on a PodGroup, as a live cluster's (or a snapshot of one) carries it.
        annotations = pod_group.metadata.annotations
        last_start = _annotation_time(annotations, c.LAST_START_TIMESTAMP_ANNOTATION, start)
        stale_since = _annotation_time(annotations, c.STALE_PODGROUP_TIMESTAMP_ANNOTATION, start)
        if last_start is not None:
            cluster.last_start[pod_group.key] = last_start
        if stale_since is not None:
            cluster.stale_since[pod_group.key] = stale_since
    _name_unlabelled_gpus(cluster)
    return cluster


def _annotation_time(annotations: dict[str, str], name: str, start: datetime) -> float | None:
    """An RFC 3339 annotation in simulated seconds (before the start: negative); None when absent or not
    a time (as KAI ignores such a value)."""
    raw = annotations.get(name)
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - start).total_seconds()


def _annotation_seconds(annotations: dict[str, str], name: str) -> float:
    raw = annotations.get(name)
    return parse_duration(raw) if raw is not None else 0.0


def _sim_pod(pod: Pod, rank: int, arrival: float) -> SimPod:
    duration_text = pod.metadata.annotations.get(c.SIM_DURATION_ANNOTATION)
    duration = parse_duration(duration_text) if duration_text is not None else None
    phase = pod.status.phase or "Pending"
    # Bound to a node and not finished: it holds its resources there (Unknown included, as Kubernetes).
    bound = pod.spec.node_name is not None and phase not in ("Succeeded", "Failed")
    sim_pod = SimPod(
        pod=pod,
        rank=rank,
        arrival=arrival,
        duration=duration,
        phase="Running" if bound else ("Pending" if phase in ("Pending", "Unknown") else phase),
        node=pod.spec.node_name if bound else None,
        terminating=pod.metadata.deletion_timestamp is not None,
    )
    if bound:
        sim_pod.gpu_groups = pod_gpu_groups(pod.metadata.labels)
        sim_pod.finish_at = None if duration is None else arrival + duration
    return sim_pod


def _name_unlabelled_gpus(cluster: SimCluster) -> None:
    """Bound fractional pods that name no shared GPU (`runai-gpu-group`) get one (`model.shared_gpus`)."""
    memory_of = {n.metadata.name: n.metadata.labels.get(c.GPU_MEMORY_LABEL, "") for n in cluster.nodes}
    bound = [BoundPod(p.pod, p.node, p.gpu_groups) for p in cluster.pods]
    for index, groups in assign_missing_gpu_groups(bound, memory_of).items():
        cluster.pods[index].gpu_groups = groups
