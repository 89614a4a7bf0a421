"""What the simulator warns about, said live: objects a cluster accepts but that probably do not mean what
their authors meant (`api.strict`, the simulator's own checks), each as a Warning event on the object, once
per object and message.

* `MisspelledKey` (Pod, PodGroup, Queue): a label or annotation key one edit away from one KAI reads
  (`gpu-fractoin`: the pod would run on no GPU), or under KAI's prefix and read by none of its components
  (`kai.scheduler/preemtion-delay`), with the key meant;
* `PriorityClassNotFound` (Pod, PodGroup): `spec.priorityClassName` names no PriorityClass (a pod's was
  deleted after the pod was admitted; KAI gives the pod or the job the default priority);
* `FieldNotSet` (Queue): a resource, its `limit` or its `overQuotaWeight` left out (KAI reads 0, and a
  limit of 0 blocks the resource);
* `InvalidPodGroup`, `InvalidQueue`: the object breaks KAI's admission rules, so the scheduler leaves it
  out (the problem, its field first; a PodGroup's pods say so too).

The state builder finds them as it reads each object (`Noticed`), the loop hands them to `NoticeEvents`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Iterable
from dataclasses import dataclass

from kai_scheduler.api import objects as o
from kai_scheduler.api.manifests import field_message
from kai_scheduler.api.reasons import PRIORITY_CLASS_NOT_FOUND
from kai_scheduler.api.strict import missing_priority_class, near_miss_keys, omitted_queue_fields
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.objects import metadata_of
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects

MISSPELLED_KEY = "MisspelledKey"
FIELD_NOT_SET = "FieldNotSet"


@dataclass(frozen=True, slots=True)
class Noticed:
    """A Warning to record on `obj`."""

    obj: JsonObject
    reason: str
    message: str


def notices_of(obj: JsonObject, model: o.ApiObject, classes: Collection[str]) -> list[Noticed]:
    """The warnings about one object the scheduler reads (`classes`: the cluster's PriorityClasses)."""
    found = [
        Noticed(obj, MISSPELLED_KEY, field_message(n.path, n.message)) for n in near_miss_keys(model.metadata)
    ]
    if isinstance(model, o.Pod | o.PodGroup) and model.spec.priority_class_name:
        problem = missing_priority_class(model, classes)
        if problem is not None:
            # A pod was admitted while its class existed (the API server refuses one naming none): KAI
            # schedules it at the default priority, as it does a PodGroup's job.
            message = problem.message
            if isinstance(model, o.Pod):
                message += "; KAI schedules the pod at the default priority"
            found.append(Noticed(obj, PRIORITY_CLASS_NOT_FOUND, field_message(problem.path, message)))
    elif isinstance(model, o.Queue):
        found += [
            Noticed(obj, FIELD_NOT_SET, field_message(n.path, n.message)) for n in omitted_queue_fields(model)
        ]
    return found


class NoticeEvents:
    """Records each notice once per object (by uid) and message; forgets an object once it is gone."""

    def __init__(self, effects: Effects, informers: InformerSet) -> None:
        self.effects = effects
        self.said: dict[str, set[str]] = {}  # object uid -> messages recorded
        for informer in (informers.pods, informers.pod_groups, informers.queues):
            informer.add_handler(on_delete=self._forget)

    def _forget(self, obj: JsonObject) -> None:
        self.said.pop(str(metadata_of(obj).get("uid") or ""), None)

    def calls(self, noticed: Iterable[Noticed], report: CycleReport) -> list[Awaitable[None]]:
        if not self.effects.record_events:
            return []
        calls: list[Awaitable[None]] = []
        for notice in noticed:
            meta = metadata_of(notice.obj)
            said = self.said.setdefault(str(meta.get("uid") or ""), set())
            if notice.message in said:
                continue
            said.add(notice.message)
            call = self.effects.event(notice.obj, "Warning", notice.reason, notice.message)
            calls.append(self.effects.limited(call, report, f"event on {meta.get('name')}"))
        return calls


__all__ = ["FIELD_NOT_SET", "MISSPELLED_KEY", "NoticeEvents", "Noticed", "notices_of"]
