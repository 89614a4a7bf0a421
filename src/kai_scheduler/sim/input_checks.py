"""Checks of the simulator's input as a whole, after every object loaded on its own (`loader.py`): what the
API server refuses across objects, and what the run should say about input that a cluster accepts but that
probably does not mean what its author meant.

The rules themselves are `kai_scheduler.api.strict`'s (pure, shared with the live edge); this module
locates them in the input files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kai_scheduler.api import constants as c
from kai_scheduler.api.manifests import pod_group_warnings
from kai_scheduler.api.objects import Pod, PodGroup, PriorityClass
from kai_scheduler.api.strict import missing_priority_class
from kai_scheduler.model.reservation_annotation import parse_reservation
from kai_scheduler.sim.skipped import SkippedObject, skipped_warnings
from kai_scheduler.sim.workloads import Workload

if TYPE_CHECKING:
    from kai_scheduler.sim.loader import LoadedObject

_ANY_ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


def check_references(loaded: Sequence[LoadedObject]) -> None:
    """Raises ManifestError for the first pod that names a PriorityClass neither the input nor the
    deployment (KAI's four shipped classes) defines: the API server refuses such a pod."""
    classes = _priority_classes(loaded)
    for entry in loaded:
        if isinstance(entry.obj, Pod) and entry.obj.spec.priority_class_name:
            problem = missing_priority_class(entry.obj, classes)
            if problem is not None:
                raise entry.error(problem.message, problem.path)


def check_reservations(loaded: Sequence[LoadedObject]) -> None:
    """Raises ManifestError for the first PodGroup whose `kai.scheduler/reservation` is not a reservation
    (`model.reservation_annotation`); the clock's origin does not matter to whether it is one."""
    for entry in loaded:
        if isinstance(entry.obj, PodGroup):
            text = entry.obj.metadata.annotations.get(c.RESERVATION_ANNOTATION)
            if text is None:
                continue
            try:
                parse_reservation(text, _ANY_ORIGIN)
            except ValueError as problem:
                raise entry.error(str(problem), f"metadata.annotations.{c.RESERVATION_ANNOTATION}") from None


def warnings(loaded: Sequence[LoadedObject], skipped: Sequence[SkippedObject] = ()) -> list[str]:
    """One line per warning, located as errors are (`file: document 3 at line 41 (Pod a/b): field: ...`):
    each object's own (found by the loader: keys one edit away from KAI's or unknown under its prefix,
    Queue fields left out that change the answer), KAI's PodGroup webhook warnings (a minSubGroup above
    the number of sub-groups), PodGroups naming a PriorityClass that does not exist,
    how many pods were left to other schedulers, and the `skipped` objects of kinds the scheduler does not
    model (with the pods that wait for them)."""
    lines = skipped_warnings(skipped, [entry.obj for entry in loaded]) + [
        str(entry.error(notice.message, notice.path)) for entry in loaded for notice in entry.notices
    ]
    classes = _priority_classes(loaded)
    for entry in loaded:
        if isinstance(entry.obj, PodGroup):
            # What KAI's PodGroup webhook admits with a warning (a minSubGroup above the children).
            lines += [str(entry.error(text, path)) for path, text in pod_group_warnings(entry.obj)]
        if isinstance(entry.obj, PodGroup) and entry.obj.spec.priority_class_name:
            problem = missing_priority_class(entry.obj, classes)
            if problem is not None:
                lines.append(str(entry.error(problem.message, problem.path)))
    other = other_scheduler_pods(loaded)
    if other:
        first = other[0]
        names = Counter(entry.obj.spec.scheduler_name for entry in other if isinstance(entry.obj, Pod))
        by_name = ", ".join(f"{name}: {count}" for name, count in sorted(names.items()))
        lines.append(
            f"unbound pods left to other schedulers, never placed here: {len(other)} ({by_name}); the first "
            f"is {first.ref} in {first.location} (only schedulerName: {c.SCHEDULER_NAME} is "
            "scheduled; a pod without schedulerName is default-scheduler's)"
        )
    for entry in loaded:
        if isinstance(entry.obj, Workload):
            for path, scheduler in _template_schedulers(entry.obj.manifest, ""):
                if scheduler != c.SCHEDULER_NAME:
                    message = (
                        "not set: the pods made from this template are default-scheduler's"
                        if scheduler is None
                        else f"{scheduler!r}: the pods made from this template are left to that scheduler"
                    )
                    lines.append(
                        str(entry.error(f"{message}, never placed here", f"{path}.spec.schedulerName"))
                    )
    return lines


def _template_schedulers(value: Any, path: str) -> Iterator[tuple[str, str | None]]:
    """Every pod template in a workload's manifest (a mapping whose `spec` lists `containers`, wherever
    the kind keeps it: `spec.template`, `spec.replicatedJobs[0].template.spec.template`, ...), with the
    schedulerName it gives its pods (None: none)."""
    if isinstance(value, Mapping):
        spec = value.get("spec")
        if path and isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
            name = spec.get("schedulerName")
            yield path, name if isinstance(name, str) else None
            return
        for key, item in value.items():
            yield from _template_schedulers(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _template_schedulers(item, f"{path}[{index}]")


def _priority_classes(loaded: Sequence[LoadedObject]) -> set[str]:
    classes = set(c.BUILTIN_PRIORITY_CLASSES)
    classes.update(entry.obj.metadata.name for entry in loaded if isinstance(entry.obj, PriorityClass))
    return classes


def other_scheduler_pods(loaded: Sequence[LoadedObject]) -> list[LoadedObject]:
    """Pods for another scheduler that no node holds: a cluster would leave them to that scheduler, so the
    simulation never places them. (Bound ones are part of the cluster: they hold their node's resources.)"""
    found = []
    for entry in loaded:
        obj = entry.obj
        if isinstance(obj, Pod) and obj.spec.scheduler_name != c.SCHEDULER_NAME and not obj.spec.node_name:
            found.append(entry)
    return found
