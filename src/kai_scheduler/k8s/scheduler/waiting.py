"""Why a pod waits, in the words its `PodScheduled=False` condition and its Warning event carry
(`Waiting`: a reason from `api.reasons.POD_REASONS` and a message that names the field and the value).

Two kinds of waiting pods:

* Pods the scheduler cannot take at all (`rejected`): the pod breaks KAI's admission rules (the same rules,
  from the same module, as the admission webhook and the simulator's input: `api.manifests.parse_object`),
  so it never reaches the cluster state: `InvalidPod`, with the webhook's own denial
  (`metadata.annotations.gpu-fraction: must be between 0 and 1 (exclusive), got '1.5'; ...`). A cluster
  with the webhook installed refuses such pods; one without it (or with the webhook installed after the
  pods) holds them, and they would otherwise wait without a word. (A pod whose PriorityClass was deleted
  after it was admitted is scheduled at the default priority, as KAI does, with a Warning: `notices`.)
* Pods of a job the cycle found unschedulable (`job_waiting`): the core's reason, with the field named
  where the job cannot be built from what the user wrote: its PodGroup does not exist
  (`PodGroupNotFound`) or breaks the admission rules (`InvalidPodGroup`), its queue does not exist
  (`QueueDoesNotExist`); otherwise kube-scheduler's and KAI's `Unschedulable` with the core's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kai_scheduler.api import constants as c
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import field_message
from kai_scheduler.api.reasons import (
    INVALID_POD,
    INVALID_POD_GROUP,
    POD_GROUP_NOT_FOUND,
    POD_UNSCHEDULABLE,
    QUEUE_DOES_NOT_EXIST,
    code_of,
)
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.runtime.objects import annotations_of, labels_of, metadata_of
from kai_scheduler.k8s.scheduler.live_state import TERMINAL_PHASES

_QUEUE_PREFIX = f"{QUEUE_DOES_NOT_EXIST}: "


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why a pod waits: its PodScheduled condition's (and its Warning event's) reason and message."""

    reason: str
    message: str


def waits_for_scheduler(obj: JsonObject) -> bool:
    """A pod the scheduler would place: not bound, not finished, not being deleted, not gated."""
    spec = obj.get("spec") or {}
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    return not (
        spec.get("nodeName")
        or phase in TERMINAL_PHASES
        or metadata_of(obj).get("deletionTimestamp")
        or spec.get("schedulingGates")
    )


def problem_text(error: Exception | None) -> str:
    """A parse failure as one line, its field first (as the admission webhook denies it)."""
    if isinstance(error, ManifestError):
        return field_message(error.field, error.message)
    return str(error) if error is not None else "the object cannot be read"


def invalid_pod(error: Exception | None) -> Waiting:
    return Waiting(INVALID_POD, problem_text(error))


def job_waiting(
    job: str,
    message: str,
    pod: JsonObject | None,
    pod_groups: Mapping[str, JsonObject],
    invalid_groups: Mapping[str, str],
) -> Waiting:
    """Why the pods of `job` wait, given the core's `message` for it and one of its pods (`pod`)."""
    problem = invalid_groups.get(job)
    if problem is not None:
        return Waiting(INVALID_POD_GROUP, f"PodGroup {job} is refused: {problem}")
    named = annotations_of(pod).get(c.POD_GROUP_ANNOTATION) if pod is not None else None
    if named and job not in pod_groups:
        return Waiting(
            POD_GROUP_NOT_FOUND, field_message(f"metadata.annotations.{c.POD_GROUP_ANNOTATION}", message)
        )
    if code_of(message) == QUEUE_DOES_NOT_EXIST:
        text = message.removeprefix(_QUEUE_PREFIX)
        if job in pod_groups:
            return Waiting(QUEUE_DOES_NOT_EXIST, f"PodGroup {job} spec.queue: {text}")
        label = f"metadata.labels.{c.QUEUE_LABEL}"
        if pod is not None and c.QUEUE_LABEL not in labels_of(pod):
            label += " (not set: the default queue)"
        return Waiting(QUEUE_DOES_NOT_EXIST, f"{label}: {text}")
    return Waiting(POD_UNSCHEDULABLE, message)


__all__ = [
    "Waiting",
    "invalid_pod",
    "job_waiting",
    "problem_text",
    "waits_for_scheduler",
]
