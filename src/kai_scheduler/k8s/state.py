"""The live edge's `ClusterState`: what the informer caches hold, as the scheduling core reads it.

It mirrors the simulator's `SimCluster.state()` (sim/cluster.py) with the cluster's own facts:

* Objects are parsed with the project's models; a pod of ours (and every PodGroup) goes through
  `parse_object`, the same checks as the simulator's input (KAI's admission rules), so that nothing the
  builder cannot handle reaches it. An object that fails is skipped and logged once per version; one bad
  object never stops scheduling. Pods of other schedulers only need to parse (they occupy capacity).
* Each pod's runtime facts: `spec.nodeName`, `status.phase`, the shared GPUs from the `runai-gpu-group`
  label(s), `deletionTimestamp` (terminating). A pod with an outstanding BindRequest (not Failed, for this
  very pod: same uid) counts as bound to the BindRequest's selected node and GPU groups, as KAI's
  scheduler cache does; so does a pod whose BindRequest this process created but the informer has not
  shown yet (`binding`), so that no pod is ever placed twice. Pods this process evicted are terminating
  until the informer catches up (`evicting`). Pipelined pods carry their nominated node (`nominated`).
* GPU reservation pods (label `app=kai-resource-reservation`, created by the binder) are left out
  entirely: the model already accounts each shared GPU, so they must not count again as foreign pods.
* Creation order: pods and PodGroups share one rank space, by `creationTimestamp` then namespace/name
  (a bare pod's implicit group takes the pod's rank); queues are ordered the same way.
* Namespaces' labels (when the informers watch Namespaces, as the scheduler's do) for pod (anti-)affinity's
  namespaceSelector; without them a namespace carries only its `kubernetes.io/metadata.name` label.
* Priority classes: KAI's four (train 50, build-preemptible 75, build 100, inference 125) unless the
  cluster defines a class of the same name; a `globalDefault` class sets the default priority.
* `JobTimes` come from the PodGroup annotations `kai.scheduler/last-start-timestamp` and
  `kai.scheduler/stale-podgroup-timestamp` (RFC 3339), converted to the session clock (`SessionClock`).

The session clock: the core measures time in seconds on one clock (`now`, minimum runtimes, staleness).
Live, that clock is seconds since the scheduler loop started (`SessionClock.start`, a wall-clock instant in
UTC); an RFC 3339 timestamp converts to it by subtracting the start, so times before the start are
negative, and back by adding it. The annotations are what survives a restart; the clock itself does not
need to.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Generic, TypeVar, cast

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.labels import pod_gpu_groups
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import K8sModel, Node, Pod, PodGroup, PriorityClass, Queue, Topology
from kai_scheduler.k8s.client import JsonObject
from kai_scheduler.k8s.informers import InformerSet, object_key, resource_version
from kai_scheduler.model.builder import implicit_pod_group_name
from kai_scheduler.model.shared_gpus import BoundPod, assign_missing_gpu_groups
from kai_scheduler.model.snapshot import ClusterState, JobTimes, PodGroupState, PodState

log = logging.getLogger(__name__)

OTHER_SCHEDULER = "other-scheduler"
_TERMINAL = ("Succeeded", "Failed")
# KAI's GPU reservation pods (binder.py) carry `app=kai-resource-reservation`: utility pods left out of the
# state, as the scheduling model already accounts each shared GPU (and its reservation pod's slot).
RESERVATION_APP = "kai-resource-reservation"

M = TypeVar("M", bound=K8sModel)


class SessionClock:
    """Seconds since `start` (a wall-clock instant, seconds since the epoch; default: now), and RFC 3339
    timestamps to and from that clock. `wall` is the wall clock (tests may pass their own)."""

    def __init__(self, start: float | None = None, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall
        self.start = wall() if start is None else start

    def now(self) -> float:
        return self.wall() - self.start

    def seconds(self, stamp: str | datetime) -> float:
        """An RFC 3339 timestamp (or an aware datetime) on the session clock."""
        moment = parse_rfc3339(stamp) if isinstance(stamp, str) else stamp
        return moment.timestamp() - self.start

    def stamp(self, seconds: float) -> str:
        """A session-clock time as RFC 3339 in UTC, to the second (Go's time.RFC3339)."""
        moment = datetime.fromtimestamp(self.start + seconds, tz=UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Placed:
    """A node and the shared GPUs on it: a pipelined pod's nomination, or a bind not yet seen."""

    node: str
    gpu_groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LiveState:
    """A `ClusterState` and what the loop needs to act on the decisions taken from it."""

    state: ClusterState
    pods: dict[str, JsonObject]  # pod key -> the pod as cached (every pod that parsed)
    job_of_pod: dict[str, str]  # pod key -> job key, for our pods
    pod_groups: dict[str, JsonObject]  # job key -> the PodGroup as cached
    active_jobs: frozenset[str]  # jobs with a pod bound (or binding) and not finished
    bind_requests: dict[str, JsonObject]  # pod key -> its BindRequest (any phase, any incarnation)
    skipped: tuple[str, ...] = ()  # objects left out because they do not validate


class _Parsed(Generic[M]):
    """Parsed models by object key, re-parsed only when the resourceVersion changes."""

    def __init__(self, what: str, parse: Callable[[JsonObject, str], M]) -> None:
        self.what = what
        self.parse = parse
        self.entries: dict[str, tuple[str, M | None]] = {}
        self.warned: set[tuple[str, str]] = set()

    def get(self, key: str, obj: JsonObject) -> M | None:
        version = resource_version(obj)
        entry = self.entries.get(key)
        if entry is not None and entry[0] == version and version:
            return entry[1]
        try:
            model: M | None = self.parse(obj, key)
        except (ManifestError, ValidationError, ValueError, TypeError) as error:
            if (key, version) not in self.warned:
                self.warned.add((key, version))
                log.warning("skipping %s %s (resourceVersion %s): %s", self.what, key, version, error)
            model = None
        self.entries[key] = (version, model)
        return model

    def parse_all(
        self, cache: Mapping[str, JsonObject], label: str, skipped: list[str]
    ) -> list[tuple[str, JsonObject, M]]:
        """Every object of an informer's cache that parses, as (key, object, model), in key order; the
        others are named in `skipped` (`<label> <key>`); entries of vanished objects are forgotten."""
        parsed: list[tuple[str, JsonObject, M]] = []
        for key, obj in sorted(cache.items()):
            model = self.get(key, obj)
            if model is None:
                skipped.append(f"{label} {key}")
            else:
                parsed.append((key, obj, model))
        self.prune(set(cache))
        return parsed

    def prune(self, alive: set[str]) -> list[M]:
        """Forget entries whose object is gone; returns their models."""
        gone = [key for key in self.entries if key not in alive]
        dropped = [model for key in gone if (model := self.entries.pop(key)[1]) is not None]
        self.warned = {item for item in self.warned if item[0] in alive}
        return dropped


def _checked(kind: type[M]) -> Callable[[JsonObject, str], M]:
    def parse(obj: JsonObject, key: str) -> M:
        model = parse_object(obj, f"{kind.__name__} {key}", 1)
        if not isinstance(model, kind):
            raise ValueError(f"expected a {kind.__name__}, got {type(model).__name__}")
        return cast(M, model)

    return parse


def _schema_only(kind: type[M]) -> Callable[[JsonObject, str], M]:
    def parse(obj: JsonObject, key: str) -> M:
        del key
        return kind.model_validate(obj)

    return parse


def _renamed(
    parse: Callable[[JsonObject, str], Pod], name: str, *, always: bool
) -> Callable[[JsonObject, str], Pod]:
    """`parse`, then the pod's schedulerName set to `name` (if `always`, else only if it says ours)."""

    def rename(obj: JsonObject, key: str) -> Pod:
        pod = parse(obj, key)
        current = pod.spec.scheduler_name
        if current != name and (always or current == c.SCHEDULER_NAME):
            pod = pod.model_copy(update={"spec": pod.spec.model_copy(update={"scheduler_name": name})})
        return pod

    return rename


class StateBuilder:
    """Builds `LiveState`s from an `InformerSet` (see the module doc). Keeps parsed models across cycles;
    `on_forget` receives every Pod model that is replaced or gone (for `SnapshotBuilder.forget`)."""

    def __init__(
        self,
        informers: InformerSet,
        clock: SessionClock,
        *,
        scheduler_name: str = c.SCHEDULER_NAME,
        on_forget: Callable[[Pod], None] | None = None,
        require_pod_groups: bool = False,
    ) -> None:
        self.informers = informers
        self.clock = clock
        self.scheduler_name = scheduler_name
        # With a pod grouper running, a pending pod waits until it names its PodGroup (as in KAI): placed
        # on its own before that, a gang member would start alone.
        self.require_pod_groups = require_pod_groups
        self.on_forget = on_forget
        # The snapshot builder knows our pods by the name `kai-scheduler`: ours are presented under that
        # name, and others (even ones that say kai-scheduler: another shard's) under another one.
        self._our_pods = _Parsed("pod", _renamed(_checked(Pod), c.SCHEDULER_NAME, always=True))
        self._other_pods = _Parsed("pod", _renamed(_schema_only(Pod), OTHER_SCHEDULER, always=False))
        self._nodes = _Parsed("node", _schema_only(Node))
        self._queues = _Parsed("queue", _checked(Queue))
        self._groups = _Parsed("podgroup", _checked(PodGroup))
        self._classes = _Parsed("priorityclass", _schema_only(PriorityClass))
        self._topologies = _Parsed("topology", _checked(Topology))
        self._pod_models: dict[str, Pod] = {}

    def _ours(self, obj: JsonObject) -> bool:
        return str((obj.get("spec") or {}).get("schedulerName") or "default-scheduler") == self.scheduler_name

    def _pod_model(self, key: str, obj: JsonObject) -> Pod | None:
        model = (self._our_pods if self._ours(obj) else self._other_pods).get(key, obj)
        if model is None:
            return None
        previous = self._pod_models.get(key)
        if previous is not None and previous is not model and self.on_forget is not None:
            self.on_forget(previous)
        self._pod_models[key] = model
        return model

    def build(
        self,
        *,
        nominated: Mapping[str, Placed] | None = None,
        binding: Mapping[str, tuple[str, Placed]] | None = None,
        evicting: Mapping[str, str] | None = None,
        job_times: Mapping[str, JobTimes] | None = None,
    ) -> LiveState:
        """The state now. `nominated`: pod key -> where it was pipelined last cycle; `binding`: pod key ->
        (pod uid, placement) of BindRequests created but maybe not yet in the cache; `evicting`: pod key ->
        uid of pods evicted but maybe not yet seen terminating; `job_times`: the loop's own bookkeeping, which
        overrides the PodGroup annotations (the cache may not show its latest writes yet)."""
        nominated = nominated or {}
        binding = binding or {}
        evicting = evicting or {}
        informers = self.informers
        skipped: list[str] = []

        # --- cluster-scoped objects ------------------------------------------------------------------
        nodes = [node for _, _, node in self._nodes.parse_all(informers.nodes.cache, "Node", skipped)]
        queues = sorted(
            (
                (self._created(obj, key), queue)
                for key, obj, queue in self._queues.parse_all(informers.queues.cache, "Queue", skipped)
            ),
            key=lambda item: item[0],
        )
        topologies = [
            t for _, _, t in self._topologies.parse_all(informers.topologies.cache, "Topology", skipped)
        ]
        classes = dict(c.BUILTIN_PRIORITY_CLASSES)
        default_priority = c.DEFAULT_PRIORITY
        for _, _, pc in self._classes.parse_all(informers.priority_classes.cache, "PriorityClass", skipped):
            classes[pc.metadata.name] = pc.value
            if pc.global_default:
                default_priority = pc.value

        namespace_labels = _namespace_labels(informers)

        # --- bind requests by pod ----------------------------------------------------------------
        requests: dict[str, JsonObject] = {}
        for obj in informers.bind_requests.cache.values():
            meta = obj.get("metadata") or {}
            pod_name = (obj.get("spec") or {}).get("podName") or meta.get("name")
            requests[f"{meta.get('namespace') or 'default'}/{pod_name}"] = obj

        # --- pod groups --------------------------------------------------------------------------
        ranked: list[tuple[tuple[float, str, int], Pod | PodGroup, str]] = []
        group_objects: dict[str, JsonObject] = {}
        for key, obj in informers.pod_groups.cache.items():
            group = self._groups.get(key, obj)
            if group is None:
                skipped.append(f"PodGroup {key}")
                continue
            group_objects[group.key] = obj
            ranked.append(((*self._created(obj, key), 0), group, key))
        self._groups.prune(set(informers.pod_groups.cache))

        # --- pods --------------------------------------------------------------------------------
        raw_pods: dict[str, JsonObject] = {}
        facts: dict[str, tuple[str | None, str, tuple[str, ...], bool]] = {}
        for key, obj in informers.pods.cache.items():
            if is_reservation_pod(obj):
                continue
            pod = self._pod_model(key, obj)
            if pod is None:
                skipped.append(f"Pod {key}")
                continue
            fact = self._pod_facts(key, obj, requests.get(key), binding.get(key), evicting.get(key))
            if fact is None:
                continue
            raw_pods[key] = obj
            facts[key] = fact
            ranked.append(((*self._created(obj, key), 1), pod, key))
        alive = set(raw_pods)
        for gone_key in [k for k in self._pod_models if k not in informers.pods.cache]:
            forgotten = self._pod_models.pop(gone_key)
            if self.on_forget is not None:
                self.on_forget(forgotten)
        self._our_pods.prune(alive)
        self._other_pods.prune(alive)

        ranked.sort(key=lambda item: item[0])
        pods: list[PodState] = []
        groups: list[PodGroupState] = []
        job_of_pod: dict[str, str] = {}
        active: set[str] = set()
        for rank, (_, model, key) in enumerate(ranked):
            if isinstance(model, PodGroup):
                groups.append(PodGroupState(model, rank))
                continue
            node_name, phase, gpu_groups, terminating = facts[key]
            placed = nominated.get(key) if node_name is None else None
            pods.append(
                PodState(
                    model,
                    rank,
                    node_name,
                    phase,
                    gpu_groups,
                    terminating,
                    placed.node if placed else None,
                    placed.gpu_groups if placed else (),
                )
            )
            if model.spec.scheduler_name == c.SCHEDULER_NAME:
                annotations = model.metadata.annotations
                group_name = annotations.get(c.POD_GROUP_ANNOTATION) or implicit_pod_group_name(model)
                job = f"{model.namespace}/{group_name}"
                job_of_pod[key] = job
                if node_name is not None and phase not in _TERMINAL:
                    active.add(job)
        pods = _assign_missing_gpu_groups(pods, nodes)

        times: dict[str, JobTimes] = {}
        for job, obj in group_objects.items():
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            times[job] = JobTimes(
                self._annotation_time(annotations, c.LAST_START_TIMESTAMP_ANNOTATION, job),
                self._annotation_time(annotations, c.STALE_PODGROUP_TIMESTAMP_ANNOTATION, job),
            )
        times.update(job_times or {})  # what the loop wrote last is newer than what the cache shows
        state = ClusterState(
            nodes=nodes,
            pods=pods,
            pod_groups=groups,
            queues=[queue for _, queue in queues],
            priority_classes=classes,
            default_priority=default_priority,
            job_times={
                job: t for job, t in times.items() if t.last_start is not None or t.stale_since is not None
            },
            topologies=topologies,
            namespace_labels=namespace_labels,
        )
        return LiveState(
            state=state,
            pods=raw_pods,
            job_of_pod=job_of_pod,
            pod_groups=group_objects,
            active_jobs=frozenset(active),
            bind_requests=requests,
            skipped=tuple(skipped),
        )

    # --- pieces ----------------------------------------------------------------------------------

    def _created(self, obj: JsonObject, key: str) -> tuple[float, str]:
        stamp = (obj.get("metadata") or {}).get("creationTimestamp")
        try:
            seconds = parse_rfc3339(str(stamp)).timestamp() if stamp else 0.0
        except ValueError:
            seconds = 0.0
        return (seconds, key)

    def _annotation_time(self, annotations: Mapping[str, str], name: str, job: str) -> float | None:
        raw = annotations.get(name)
        if not raw:
            return None
        try:
            return self.clock.seconds(raw)
        except ValueError:
            log.warning("PodGroup %s: ignoring annotation %s=%r (not RFC 3339)", job, name, raw)
            return None

    def _pod_facts(
        self,
        key: str,
        obj: JsonObject,
        request: JsonObject | None,
        binding: tuple[str, Placed] | None,
        evicting: str | None,
    ) -> tuple[str | None, str, tuple[str, ...], bool] | None:
        """(node, phase, gpu groups, terminating) as the core sees it; None to leave the pod out."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        uid = str(meta.get("uid") or "")
        raw_phase = str((obj.get("status") or {}).get("phase") or "Pending")
        node = spec.get("nodeName") or None
        terminating = bool(meta.get("deletionTimestamp")) or (evicting is not None and evicting == uid)
        groups = pod_gpu_groups(meta.get("labels") or {})
        bound = node is not None and raw_phase not in _TERMINAL
        if node is None and raw_phase not in _TERMINAL:
            placed = outstanding_placement(request, obj)
            if placed is None and binding is not None and binding[0] == uid:
                placed = binding[1]
            if placed is not None:
                node, groups, bound = placed.node, placed.gpu_groups, True
        elif bound and not groups:
            placed = outstanding_placement(request, obj)
            if placed is not None and placed.node == node:
                groups = placed.gpu_groups
        if not bound and spec.get("schedulingGates") and self._ours(obj):
            return None  # gated: not for the scheduler yet (Kubernetes semantics)
        grouped = bool((meta.get("annotations") or {}).get(c.POD_GROUP_ANNOTATION))
        if not bound and self.require_pod_groups and self._ours(obj) and not grouped:
            return None  # not grouped yet: the pod grouper has not annotated it
        if bound:
            return (str(node), "Running", groups, terminating)
        phase = "Pending" if raw_phase in ("Pending", "Unknown") else raw_phase
        return (None, phase, (), terminating)


def _namespace_labels(informers: InformerSet) -> dict[str, dict[str, str]]:
    """Namespace name -> its labels, from the Namespace informer (empty without one)."""
    informer = informers.namespaces
    if informer is None:
        return {}
    labels: dict[str, dict[str, str]] = {}
    for key, obj in informer.cache.items():
        meta = obj.get("metadata") or {}
        raw = meta.get("labels") or {}
        if isinstance(raw, dict):
            labels[str(meta.get("name") or key)] = {str(k): str(v) for k, v in raw.items()}
    return labels


def is_reservation_pod(obj: JsonObject) -> bool:
    """A GPU reservation pod (label `app=kai-resource-reservation`): not part of the ClusterState."""
    return ((obj.get("metadata") or {}).get("labels") or {}).get("app") == RESERVATION_APP


def outstanding_placement(request: JsonObject | None, pod: JsonObject) -> Placed | None:
    """Where a BindRequest puts its pod: unless it Failed or belongs to another incarnation of the pod (see
    `bind_request_is_for`). A Succeeded request counts too: the cache may show it before the bound pod."""
    if request is None or not bind_request_is_for(request, pod):
        return None
    if (request.get("status") or {}).get("phase") == "Failed":
        return None
    spec = request.get("spec") or {}
    node = spec.get("selectedNode")
    if not node:
        return None
    return Placed(str(node), tuple(str(g) for g in spec.get("selectedGPUGroups") or ()))


def bind_request_is_for(request: JsonObject, pod: JsonObject) -> bool:
    """A BindRequest belongs to the pod incarnation its owner reference names; one without an owner
    reference, to any incarnation not created after it."""
    pod_meta = pod.get("metadata") or {}
    meta = request.get("metadata") or {}
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("uid")]
    if owners:
        return any(str(o["uid"]) == str(pod_meta.get("uid") or "") for o in owners)
    made, born = meta.get("creationTimestamp"), pod_meta.get("creationTimestamp")
    if made and born:
        try:
            return parse_rfc3339(str(made)) >= parse_rfc3339(str(born))
        except ValueError:
            return True
    return True


def _assign_missing_gpu_groups(pods: list[PodState], nodes: list[Node]) -> list[PodState]:
    """Bound shared-GPU pods that name no GPU group (bound by something else) get one, packed as gpupack
    would, so that their portions are accounted on a definite GPU (as the simulator does)."""
    memory_of = {n.metadata.name: n.metadata.labels.get(c.GPU_MEMORY_LABEL, "") for n in nodes}
    bound = [BoundPod(p.pod, p.node_name, p.gpu_groups) for p in pods]
    assigned = assign_missing_gpu_groups(bound, memory_of, fresh_prefix="unlabelled-")
    if not assigned:
        return pods
    return [replace(p, gpu_groups=assigned[i]) if i in assigned else p for i, p in enumerate(pods)]


__all__ = [
    "OTHER_SCHEDULER",
    "RESERVATION_APP",
    "LiveState",
    "Placed",
    "SessionClock",
    "StateBuilder",
    "bind_request_is_for",
    "is_reservation_pod",
    "object_key",
    "outstanding_placement",
    "parse_rfc3339",
    "pod_gpu_groups",
]
