"""A `ClusterState` as manifests that `kai-scheduler simulate` loads unchanged: the cluster exactly as a
scheduling cycle saw it, to replay that cycle (or a what-if) offline. Live mode serves it on
`/get-snapshot` (k8s/plugin_server.py); this module is pure.

`export_state(state, origin=..., now=...)` returns the items of a `kind: List`, written by the API models
themselves (camelCase, fields left at their defaults omitted), following the simulate contract:

* Pods: each `PodState`'s pod with `spec.nodeName` = the node it holds (a pod that live mode counts as
  bound because its BindRequest is outstanding gets that node), `status.phase` = its phase, its shared GPUs
  as `runai-gpu-group` (plus `runai-gpu-group/<i>` when several, as the binder writes them), and
  `metadata.deletionTimestamp` when it is terminating (its own, else the snapshot time). Pods of other
  schedulers are written as the state holds them. The simulation-only `arrival` annotation is dropped:
  everything in the state has arrived.
* PodGroups carry the state's `JobTimes` as KAI's annotations `kai.scheduler/last-start-timestamp` and
  `kai.scheduler/stale-podgroup-timestamp` (RFC 3339), and a job's reservation as
  `kai.scheduler/reservation` (`model.reservation_annotation`), which the simulator reads back on the same
  clock.
* PriorityClasses: every class of the state except KAI's built-in four at their usual values, and the
  class that sets the default priority (`globalDefault`) when it is not the usual one.
* Queues, Nodes and Topologies as they are; DRA's DeviceClasses, ResourceSlices and ResourceClaims too,
  claims with their allocation and `reservedFor` (a claim that live mode sees allocated through an
  outstanding BindRequest carries that allocation). Pods keep `status.resourceClaimStatuses`, so a
  replay finds each template's claim instead of making a new one.
* Creation order: pods and PodGroups share one rank space (a bare pod's implicit PodGroup takes the pod's
  rank), queues have their own order. Both are kept: the items are written in that order, and creation
  timestamps are made non-decreasing along it (an object older than its predecessor, or without a
  timestamp, takes its predecessor's), so that the simulator's rule (creation time, then input order)
  gives back the same order. Real timestamps stay as they are wherever they are already in order.

Times on the session clock (seconds since `origin`, a wall-clock instant) become RFC 3339 instants;
`now` is the cycle's time on that clock. Replaying with `kai-scheduler simulate --start <origin + now>`
puts simulated second 0 at the cycle's moment, so every time keeps its distance to it.

Not in the snapshot (the simulate contract has no input for them): a pod's nomination from a pipeline in
the cycle before (the replay treats it as plain pending), `JobTimes` of jobs without a PodGroup object
(bare pods when no pod grouper runs), time-based fairness usage history (`queue_usage`), and namespaces'
labels (`namespace_labels`: a replay's namespaceSelectors see each namespace's name label only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

from kai_scheduler.api import constants as c
from kai_scheduler.api.labels import gpu_group_labels, is_gpu_group_label
from kai_scheduler.api.objects import ApiObject, K8sModel, ObjectMeta, Pod, PodGroup, PriorityClass
from kai_scheduler.api.timestamps import format_rfc3339
from kai_scheduler.model.reservation_annotation import format_reservation
from kai_scheduler.model.snapshot import ClusterState, JobTimes, PodGroupState, PodState

JsonDict = dict[str, Any]
M = TypeVar("M", bound=ApiObject)

# The name given to a class made up to carry a default priority that no class of the state has.
DEFAULT_PRIORITY_CLASS = "kai-snapshot-default-priority"


def export_state(state: ClusterState, *, origin: datetime, now: float) -> list[JsonDict]:
    """The state's objects as manifests (see the module doc), in the order a `kind: List` should hold
    them: PriorityClasses, Topologies, Queues, Nodes, DRA objects, storage objects, ConfigMaps and
    PodDisruptionBudgets, then
    PodGroups and Pods by creation rank."""
    return [dump(obj) for obj in export_objects(state, origin=origin, now=now)]


def export_objects(state: ClusterState, *, origin: datetime, now: float) -> list[ApiObject]:
    """What `export_state` writes, as the API models themselves (in the same order): for a caller that
    hands them to the simulator without a round trip through manifests (the start-time look-ahead)."""
    at = session_instant(origin, now)
    items: list[ApiObject] = [*_priority_classes(state)]
    items += state.topologies
    items += _in_creation_order(list(state.queues))
    items += state.nodes
    items += [*state.device_classes, *state.resource_slices, *state.resource_claims]
    items += [*state.storage_classes, *state.persistent_volumes, *state.persistent_volume_claims]
    items += state.config_maps
    items += state.disruption_budgets
    items += state.node_topologies
    ranked: list[tuple[float, int, PodGroupState | PodState]] = [
        (group.rank, 0, group) for group in state.pod_groups
    ]
    ranked += [(pod.rank, 1, pod) for pod in state.pods]
    ranked.sort(key=lambda item: (item[0], item[1]))
    objects: list[Pod | PodGroup] = []
    for _, _, entry in ranked:
        if isinstance(entry, PodGroupState):
            objects.append(_pod_group(entry.pod_group, state.job_times.get(entry.pod_group.key), origin))
        else:
            objects.append(_pod(entry, at))
    items += _in_creation_order(objects)
    return items


def manifest_list(items: Sequence[JsonDict]) -> JsonDict:
    """Items as one `kind: List` document."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def session_instant(origin: datetime, seconds: float) -> datetime:
    """A session-clock time (seconds since `origin`) as an instant in UTC."""
    return (origin + timedelta(seconds=seconds)).astimezone(UTC)


def rfc3339(moment: datetime) -> str:
    """An instant in UTC as RFC 3339 (`2026-01-01T00:00:00Z`, with microseconds when it has some)."""
    return format_rfc3339(moment, "microseconds_if_any")


def dump(obj: K8sModel) -> JsonDict:
    """One object as a manifest: apiVersion and kind first, then the fields that differ from their
    defaults, with quantities and times written as Kubernetes writes them."""
    data = _plain(obj.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True))
    head = {"apiVersion": getattr(obj, "api_version", None), "kind": getattr(obj, "kind", None)}
    return {**{k: v for k, v in head.items() if v is not None}, **data}


# --- objects -------------------------------------------------------------------------------------


def _pod(entry: PodState, at: datetime) -> Pod:
    pod = entry.pod
    meta = pod.metadata
    labels = {name: value for name, value in meta.labels.items() if not is_gpu_group_label(name)}
    if entry.node_name is not None:
        labels.update(gpu_group_labels(entry.gpu_groups))
    annotations = {k: v for k, v in meta.annotations.items() if k != c.SIM_ARRIVAL_ANNOTATION}
    deletion = (meta.deletion_timestamp or at) if entry.terminating else None
    metadata = meta.model_copy(
        update={"labels": labels, "annotations": annotations, "deletion_timestamp": deletion}
    )
    spec = pod.spec.model_copy(update={"node_name": entry.node_name})
    status = pod.status.model_copy(update={"phase": entry.phase})
    return pod.model_copy(update={"metadata": metadata, "spec": spec, "status": status})


_JOB_TIME_ANNOTATIONS = (
    c.SIM_ARRIVAL_ANNOTATION,
    c.LAST_START_TIMESTAMP_ANNOTATION,
    c.STALE_PODGROUP_TIMESTAMP_ANNOTATION,
    c.RESERVATION_ANNOTATION,
)


def _pod_group(group: PodGroup, times: JobTimes | None, origin: datetime) -> PodGroup:
    meta = group.metadata
    annotations = {k: v for k, v in meta.annotations.items() if k not in _JOB_TIME_ANNOTATIONS}
    if times is not None and times.last_start is not None:
        annotations[c.LAST_START_TIMESTAMP_ANNOTATION] = rfc3339(session_instant(origin, times.last_start))
    if times is not None and times.stale_since is not None:
        annotations[c.STALE_PODGROUP_TIMESTAMP_ANNOTATION] = rfc3339(
            session_instant(origin, times.stale_since)
        )
    if times is not None and times.reservation is not None:
        annotations[c.RESERVATION_ANNOTATION] = format_reservation(times.reservation, origin)
    return group.model_copy(update={"metadata": meta.model_copy(update={"annotations": annotations})})


def _priority_classes(state: ClusterState) -> list[PriorityClass]:
    default_class = None
    if state.default_priority != c.DEFAULT_PRIORITY:
        default_class = next(
            (name for name, value in state.priority_classes.items() if value == state.default_priority),
            DEFAULT_PRIORITY_CLASS,
        )
    classes: Mapping[str, int] = state.priority_classes
    if default_class is not None and default_class not in classes:
        classes = {**classes, default_class: state.default_priority}
    out = []
    for name, value in classes.items():
        is_default = name == default_class
        if c.BUILTIN_PRIORITY_CLASSES.get(name) == value and not is_default:
            continue  # the simulator has it already
        out.append(PriorityClass(metadata=ObjectMeta(name=name), value=value, global_default=is_default))
    return out


def _in_creation_order(objects: Sequence[M]) -> list[M]:
    """`objects` (in creation order) with creation timestamps that never decrease along the sequence:
    a missing or earlier timestamp takes the previous one's; leading objects without one take the first
    timestamp. No timestamp at all: left as they are (input order decides)."""
    stamps = [obj.metadata.creation_timestamp for obj in objects]
    first = next((stamp for stamp in stamps if stamp is not None), None)
    if first is None:
        return list(objects)
    out: list[M] = []
    previous = first
    for obj, stamp in zip(objects, stamps, strict=True):
        fixed = previous if stamp is None or stamp < previous else stamp
        previous = fixed
        if fixed != stamp:
            metadata = obj.metadata.model_copy(update={"creation_timestamp": fixed})
            out.append(cast(M, obj.model_copy(update={"metadata": metadata})))
        else:
            out.append(obj)
    return out


# --- values --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Model dump values as YAML/JSON scalars (quantities are strings already; times as RFC 3339)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, datetime):
        return rfc3339(value)
    return value


__all__ = [
    "DEFAULT_PRIORITY_CLASS",
    "dump",
    "export_objects",
    "export_state",
    "manifest_list",
    "rfc3339",
    "session_instant",
]
