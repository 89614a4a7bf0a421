"""Workloads in the simulator: Jobs, Deployments, PyTorchJobs, RayJobs, ... become pods as their
controllers make them (`kai_scheduler.workloads`), grouped by the same pod grouper as live mode
(`controlplane.podgrouper`), and the controllers keep acting in simulated time: a Job makes its next pod when
one succeeds, a ReplicaSet replaces an evicted pod, a CronJob fires on its schedule.

A workload arrives at its creation time (or `simulation.kai.scheduler/arrival`, as pods do); those there
at second 0 are expanded before the run, in input order, so their pods rank among the input's pods as
if a cluster had made them then. `simulation.kai.scheduler/duration` on a pod template is each pod's run
time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.durations import parse_duration
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import ApiObject, ObjectMeta, Pod, PodGroup
from kai_scheduler.api.strict import Notice
from kai_scheduler.controlplane.podgrouper import (
    DroppedInput,
    GroupingError,
    plan_pod_group,
    pod_group_manifest,
    skips_pod_grouper,
)
from kai_scheduler.workloads import WorkloadError, controller_for, is_workload
from kai_scheduler.workloads.objects import phase_of, ref
from kai_scheduler.workloads.runtime import Changes, Runtime


@dataclass(frozen=True, eq=False)
class Workload:
    """A workload object of the input (a kind `kai_scheduler.workloads` runs), as written."""

    manifest: Mapping[str, Any]
    metadata: ObjectMeta
    # What the pod grouper made its PodGroups without (found by the dry run at load time), as KAI does.
    dropped: tuple[DroppedInput, ...] = ()

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind"))

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.metadata.name)

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.metadata.name}"

    def dropped_notices(self) -> list[Notice]:
        """A warning for each input its PodGroups were made without; one located in the workload itself
        names its field, one on a pod its controller made names the pod too."""
        return [
            Notice(d.field, d.message)
            if d.object_ref == self.ref
            else Notice(d.field, f"{d.message} (on {d.object_ref})")
            for d in self.dropped
        ]

    def has_label(self, key: str) -> bool:
        """Whether the workload or any pod template in it carries the label `key` (its pods or PodGroups
        may then carry it: the node-pool label puts them in a scheduling shard)."""
        return _labels_anywhere(self.manifest, key)

    def arrival(self, start: datetime) -> float:
        """Seconds after `start` at which it is created."""
        own = self.metadata.annotations.get(c.SIM_ARRIVAL_ANNOTATION)
        seconds = parse_duration(own) if own is not None else 0.0
        stamp = self.metadata.creation_timestamp
        created = (stamp - start).total_seconds() if stamp is not None else 0.0
        return max(seconds, created)


def _labels_anywhere(value: Any, key: str) -> bool:
    if isinstance(value, Mapping):
        labels = value.get("labels")
        if isinstance(labels, Mapping) and key in labels:
            return True
        return any(_labels_anywhere(item, key) for item in value.values())
    if isinstance(value, list):
        return any(_labels_anywhere(item, key) for item in value)
    return False


def is_workload_document(doc: Any) -> bool:
    return isinstance(doc, dict) and is_workload(doc)


def parse_workload(doc: dict[str, Any], source: str, index: int, item: int | None = None) -> Workload:
    """Read and check a workload document: its metadata, and a dry run of its controllers and the pod
    grouper at its creation, so that anything wrong is reported here, located, on one line."""

    def error(message: str, object_ref: str | None = None, field: str | None = None) -> ManifestError:
        return ManifestError(
            source, message, document=index, item=item, object_ref=object_ref or ref(doc), field=field
        )

    raw_meta = doc.get("metadata")
    if not isinstance(raw_meta, dict) or not raw_meta.get("name"):
        raise error("is missing", field="metadata.name")
    try:
        metadata = ObjectMeta.model_validate(raw_meta)
    except ValueError as exc:
        raise error(f"invalid metadata: {str(exc).splitlines()[0]}", field="metadata") from None
    workload = Workload(doc, metadata)
    try:
        workload = replace(workload, dropped=_dry_run(workload, source))
    except WorkloadError as exc:
        raise error(exc.message, exc.object_ref or None, exc.field) from None
    except GroupingError as exc:
        raise error(f"pod grouper: {exc}") from None
    except ManifestError as exc:
        # The pod's field is in the template the pod came from; its name says which one.
        at = f" at {exc.field}" if exc.field else ""
        raise error(f"makes an invalid {exc.object_ref or 'pod'}{at}: {exc.message}") from None
    return workload


# A dry run's clock (any time will do: only CronJobs read it, and they are run to their next firing).
_DRY_RUN_START = datetime(2026, 1, 1, tzinfo=UTC)
# Stages of a workload that wait for earlier pods to run: a StatefulSet's next ordinal, workers after their
# LWS leader, a RayJob's submitter after its cluster, an MPI launcher after its workers, the next
# replicated job of an in-order JobSet. A dry run goes through this many.
_DRY_RUN_STAGES = 16


def _dry_run(workload: Workload, source: str) -> tuple[DroppedInput, ...]:
    """Everything the workload's controllers would make, as if each pod ran as soon as it was made and
    each CronJob fired: raises what the simulation would raise at that point, and returns what the pod
    grouper made the PodGroups without (each once)."""
    runtime, groups, now = Runtime(), set[str](), _DRY_RUN_START
    dropped = dict.fromkeys(expand(runtime, workload, now, source, groups).dropped)
    for _ in range(_DRY_RUN_STAGES):
        pending = [
            (uid, "Running")
            for uid, obj in runtime.objects.items()
            if obj.get("kind") == "Pod" and phase_of(obj) == "Pending"
        ]
        when = runtime.next_time(now)
        if not pending and when is None:
            break
        dropped.update(
            dict.fromkeys(_made(runtime, runtime.set_pod_phase(pending, now), source, groups).dropped)
        )
        if when is not None:
            now = when
            dropped.update(dict.fromkeys(_made(runtime, runtime.due(now), source, groups).dropped))
    return tuple(dropped)


@dataclass
class Made:
    """What the controllers did in one step, as the simulator's objects."""

    pod_groups: list[PodGroup] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # pod keys
    dropped: list[DroppedInput] = field(default_factory=list)  # what the pod grouper passed over


def expand(
    runtime: Runtime, workload: Workload, now: datetime, source: str, groups: set[str] | None = None
) -> Made:
    """Create `workload` in `runtime` at `now` and group the pods its controllers make (`groups`: the
    PodGroups that exist already, by key)."""
    return _made(runtime, runtime.apply(workload.manifest, now), source, set() if groups is None else groups)


def _made(runtime: Runtime, changes: Changes, source: str, groups: set[str]) -> Made:
    made = Made()
    for manifest in changes.pods_created():
        owners = runtime.owners(manifest)
        if skips_pod_grouper(manifest) or any(skips_pod_grouper(owner) for owner in owners):
            # Left alone by the pod grouper: it joins the external PodGroup its template names, if any.
            made.pods.append(_pod(manifest, source))
            continue
        plan = plan_pod_group(manifest, owners)
        made.dropped += plan.dropped
        meta = manifest["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}), **plan.pod_annotations()}
        meta["labels"] = {**(meta.get("labels") or {}), **plan.pod_labels()}
        group_key = f"{plan.namespace}/{plan.name}"
        if group_key not in groups:
            groups.add(group_key)
            group = parse_object(pod_group_manifest(plan), source, 0)
            assert isinstance(group, PodGroup)
            made.pod_groups.append(group)
        made.pods.append(_pod(manifest, source))
    made.deleted = [f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in changes.pods_deleted()]
    return made


def _pod(manifest: Mapping[str, Any], source: str) -> Pod:
    # Strict, as the simulator's own pods: a typo in a pod template is refused where it is written.
    pod = parse_object(_without_status(manifest), source, 0, strict=True)
    assert isinstance(pod, Pod)
    return pod


def _without_status(manifest: Mapping[str, Any]) -> dict[str, Any]:
    # A new pod is pending, its phase the simulator's to keep; and it ranks by when the simulator made it.
    meta = {key: value for key, value in manifest["metadata"].items() if key != "creationTimestamp"}
    return {**{key: value for key, value in manifest.items() if key != "status"}, "metadata": meta}


class SimWorkloads:
    """The workloads of a run and their controllers, on the simulated clock (seconds after `start`)."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.runtime = Runtime()
        self._groups: set[str] = set()
        self._waiting: list[tuple[float, int, Workload]] = []  # latest first
        self._pods: set[str] = set()  # uids of the pods the controllers made

    def initial(self, objects: Sequence[ApiObject | Workload]) -> list[ApiObject]:
        """The input with each workload there at second 0 replaced by its PodGroups and pods (in its
        place, so that they rank there); later workloads wait for their arrival."""
        out: list[ApiObject] = []
        for i, obj in enumerate(objects):
            if not isinstance(obj, Workload):
                out.append(obj)
                continue
            arrival = obj.arrival(self.start)
            if arrival > 0:
                self._waiting.append((arrival, i, obj))
                continue
            made = self._track(expand(self.runtime, obj, self.start, "workload", self._groups), [])
            out += [*made.pod_groups, *made.pods]
        self._waiting.sort(key=lambda item: item[:2], reverse=True)
        return out

    def arrive(self, until: float) -> Made:
        """Create every workload that has arrived by `until` (seconds)."""
        made = Made()
        while self._waiting and self._waiting[-1][0] <= until:
            arrival, _, workload = self._waiting.pop()
            at = self._at(arrival)
            made = _joined(
                made, self._track(expand(self.runtime, workload, at, "workload", self._groups), [])
            )
        return made

    def owns(self, pod: Pod) -> bool:
        return pod.metadata.uid in self._pods

    def replaced_by_name(self, pod: Pod) -> bool:
        """Whether the pod's controller makes a lost pod again under its own name (StatefulSets, Kubeflow
        jobs) rather than a new pod in its place (ReplicaSets, Jobs, Ray)."""
        for reference in pod.metadata.owner_references:
            if reference.controller:
                owner = self.runtime.objects.get(reference.uid)
                controller = controller_for(owner) if owner is not None else None
                return controller is not None and controller.replaces_by_name
        return True

    def react(self, now: float, phases: Iterable[tuple[Pod, str]]) -> Made:
        """Controllers see the pods' new phases, and timed ones the clock, at `now`. What they make that a
        cluster would refuse stops the run with one line (the dry run at load time catches most of it)."""
        try:
            return self._react(now, phases)
        except WorkloadError as exc:
            raise ManifestError("simulation", f"at {now:g}s: {exc}") from None
        except GroupingError as exc:
            raise ManifestError("simulation", f"at {now:g}s: pod grouper: {exc}") from None

    def _react(self, now: float, phases: Iterable[tuple[Pod, str]]) -> Made:
        moment = self._at(now)
        made = self.arrive(now)
        updates = [(pod.metadata.uid, phase) for pod, phase in phases if self.owns(pod)]
        if updates:
            made = _joined(made, self._changes(self.runtime.set_pod_phase(updates, moment)))
        return _joined(made, self._changes(self.runtime.due(moment)))

    def next_event_after(self, time: float) -> float | None:
        times = [self._waiting[-1][0]] if self._waiting else []
        when = self.runtime.next_time(self._at(time))
        if when is not None:
            times.append((when - self.start).total_seconds())
        later = [t for t in times if t > time + 1e-9]
        return min(later) if later else None

    def _changes(self, changes: Changes) -> Made:
        return self._track(_made(self.runtime, changes, "workload", self._groups), changes.pods_deleted())

    def _track(self, made: Made, deleted: Sequence[Mapping[str, Any]]) -> Made:
        for group in made.pod_groups:
            self._groups.add(group.key)
        self._pods.update(pod.metadata.uid for pod in made.pods)
        self._pods.difference_update(str(m["metadata"].get("uid")) for m in deleted)
        return made

    def _at(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)


def _joined(first: Made, second: Made) -> Made:
    return Made(
        first.pod_groups + second.pod_groups, first.pods + second.pods, first.deleted + second.deleted
    )
