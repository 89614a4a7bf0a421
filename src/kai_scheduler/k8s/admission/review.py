"""KAI's admission webhooks' review logic: AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out.

The webhooks, on the paths the chart registers:

| Path | Function | What it does |
|---|---|---|
| `/validate--v1-pod` | `review_pod_validation` | KAI's GPU-sharing rules for this scheduler's pods |
| `/mutate--v1-pod` | `review_pod_mutation` | GPU pods' `runtimeClassName`; the shared-GPU env |
| `/validate-scheduling-run-ai-v2-queue` | `review_queue_validation` | `spec.resources`; the Queue rules |
| `/validate-scheduling-run-ai-v2alpha2-podgroup` | `review_podgroup_validation` | the sub-group rules |

Also `/validate-scheduling-run-ai-v1alpha1-accountedresource` (`review_accounted_resource_validation`): the
rules of KAI's AccountedResource design that its schema cannot say.

The rules are the simulator's own (`kai_scheduler.api.manifests`: `check_gpu_sharing`, `check_queue`,
`check_sub_groups`, after the same schema), so a manifest that `kai-scheduler simulate` refuses is refused
by a cluster too, with the same field path and words. A denial is HTTP-level success with `allowed: false`
and `status {code: 400, message}`, the message one line that starts with the field
(`metadata.annotations.gpu-fraction: must be between 0 and 1 ...`, `api.manifests.field_message`, as live
mode's pod conditions say it). The Queue webhook's `spec.resources` requirement is
`check_queue_has_resources`, which the simulator's input checks apply too.

Each `review_*` function takes the decoded JSON body and never raises: a malformed review (not a mapping,
no `request.uid`, an object of the wrong kind, ...) is answered with a denial that says what is wrong.

The mutation of a GPU-sharing pod's environment is `gpu_sharing.py`; `server.py` (`WebhookServer`) serves
the reviews over TLS.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.accounted_resources import SourceProblem, check_accounted_resource
from kai_scheduler.api.gpu_request import SHARED_GPU_ANNOTATIONS
from kai_scheduler.api.manifests import (
    InvalidField,
    check_gpu_sharing,
    check_queue,
    check_queue_has_resources,
    check_sub_groups,
    check_topology,
    check_topology_update,
    describe_value,
    field_message,
    pod_group_warnings,
    short_repr,
    validate_schema,
)
from kai_scheduler.api.objects import AccountedResource, Pod, PodGroup, Queue, Topology
from kai_scheduler.k8s.admission.gpu_sharing import gpu_sharing_patch, uses_gpus
from kai_scheduler.k8s.admission.queue_gate import OptIn, queue_gate_patch
from kai_scheduler.k8s.runtime.client import api_version

log = logging.getLogger(__name__)

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"

MUTATE_POD_PATH: Final = "/mutate--v1-pod"
VALIDATE_POD_PATH: Final = "/validate--v1-pod"
VALIDATE_QUEUE_PATH: Final = "/validate-scheduling-run-ai-v2-queue"
VALIDATE_PODGROUP_PATH: Final = "/validate-scheduling-run-ai-v2alpha2-podgroup"
VALIDATE_TOPOLOGY_PATH: Final = "/validate-kai-scheduler-v1alpha1-topology"  # KAI v0.17's path
VALIDATE_ACCOUNTED_RESOURCE_PATH: Final = "/validate-scheduling-run-ai-v1alpha1-accountedresource"

DEFAULT_GPU_RUNTIME_CLASS: Final = "nvidia"
DENIED_CODE: Final = 400

_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
_CHECKED_OPERATIONS = frozenset({"CREATE", "UPDATE"})  # DELETE and CONNECT carry no new object
_DEFAULT_SCHEDULER = "default-scheduler"  # what the API server puts in spec.schedulerName when absent
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")

Review = dict[str, Any]
"""An AdmissionReview, as decoded JSON."""


# --- reviews --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Kind:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"


_POD = _Kind("", "v1", "Pod")
_QUEUE = _Kind("scheduling.run.ai", "v2", "Queue")
_PODGROUP = _Kind("scheduling.run.ai", "v2alpha2", "PodGroup")
_TOPOLOGY = _Kind("kai.scheduler", "v1alpha1", "Topology")
_ACCOUNTED_RESOURCE = _Kind("scheduling.run.ai", "v1alpha1", "AccountedResource")


class _Malformed(Exception):
    """The review itself is broken (not the object it carries)."""


@dataclass(frozen=True, slots=True)
class _Request:
    uid: str
    operation: str
    name: str
    namespace: str
    object: dict[str, Any] | None  # None for DELETE and CONNECT
    old_object: dict[str, Any] | None = None  # an UPDATE's object as it was


def review_pod_validation(
    review: Any, *, scheduler_name: str = c.SCHEDULER_NAME, gpu_sharing_enabled: bool = True
) -> Review:
    """Allow or deny a Pod by KAI's GPU-sharing rules (pods of other schedulers are allowed unchecked).

    With `gpu_sharing_enabled=False` (KAI's `global.gpuSharing: false`) any `gpu-fraction` or `gpu-memory`
    annotation is refused as well."""
    return _guarded(
        review,
        _POD,
        partial(_validate_pod, scheduler_name=scheduler_name, gpu_sharing_enabled=gpu_sharing_enabled),
    )


def review_pod_mutation(
    review: Any,
    *,
    gpu_runtime_class: str = DEFAULT_GPU_RUNTIME_CLASS,
    scheduler_name: str = c.SCHEDULER_NAME,
    queue_opt_in: OptIn | None = None,
) -> Review:
    """Allow a new Pod of this scheduler, with a JSONPatch that

    * sets `spec.runtimeClassName: <gpu_runtime_class>` when it is a GPU pod (whole GPUs, a GPU fraction
      or GPU memory, MIG instances) and has none (an empty `gpu_runtime_class` turns this off);
    * for a GPU-sharing pod (`gpu-fraction` or `gpu-memory`), points the target container's environment
      at the shared-GPU ConfigMaps (see the module doc and `shared_gpu_config_maps`), idempotently: a pod
      that was mutated already keeps its prefix and gets no second copy of an entry.

    * with queue admission gating switched on (`queue_opt_in`: whether a queue opts in), adds the
      `kai.scheduler/queue-admission` scheduling gate to a pod whose queue opts in or does not exist
      (`queue_gate.py`).

    Denied: a `gpu-fraction-container-name` that names no container of `spec.containers`, or a
    `runai/shared-gpu-configmap` that cannot prefix a ConfigMap name."""
    return _guarded(
        review,
        _POD,
        partial(
            _mutate_pod,
            gpu_runtime_class=gpu_runtime_class,
            scheduler_name=scheduler_name,
            queue_opt_in=queue_opt_in,
        ),
    )


def review_queue_validation(review: Any) -> Review:
    """Allow or deny a Queue: `spec.resources` must be given, and the simulator's Queue rules hold (not its
    own parent, non-negative minimum runtimes)."""
    return _guarded(review, _QUEUE, _validate_queue)


def review_podgroup_validation(review: Any) -> Review:
    """Allow or deny a PodGroup: sub-group names unique, every parent an existing sub-group, no cycles, and
    minimums as KAI's webhook wants them (some refused on create only; KAI's warnings passed on)."""
    return _guarded(review, _PODGROUP, _validate_podgroup)


def review_topology_validation(review: Any) -> Review:
    """Allow or deny a Topology: its schema, unique node labels (the hostname only as the last), KAI
    v0.17's alias rules, and on update the same node labels in the same order (aliases may change)."""
    return _guarded(review, _TOPOLOGY, _validate_topology)


def review_accounted_resource_validation(review: Any) -> Review:
    """Allow or deny an AccountedResource: its schema, and the rules KAI's AccountedResource design leaves
    to its webhook (one source kind a source, a quantity or match only where the source can use it, units
    that are units: `api.accounted_resources`)."""
    return _guarded(review, _ACCOUNTED_RESOURCE, _validate_accounted_resource)


def allowed_response(
    uid: str, *, patch: list[dict[str, Any]] | None = None, warnings: list[str] | None = None
) -> Review:
    """An AdmissionReview that allows the request, with an optional JSONPatch and warnings."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if warnings:
        response["warnings"] = warnings
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def denied_response(uid: str, message: str, *, warnings: list[str] | None = None) -> Review:
    """An AdmissionReview that denies the request with `message` (folded to one line), code 400."""
    response: dict[str, Any] = {
        "uid": uid,
        "allowed": False,
        "status": {
            "status": "Failure",
            "reason": "BadRequest",
            "code": DENIED_CODE,
            "message": _one_line(message),
        },
    }
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def _guarded(review: Any, kind: _Kind, decide: Callable[[_Request], Review]) -> Review:
    """Parse the review and hand the request to `decide`; whatever goes wrong comes back as a denial."""
    uid = _uid_of(review)
    try:
        request = _parse_review(review, kind)
        if request.object is None:
            return allowed_response(request.uid)
        return decide(request)
    except _Malformed as problem:
        return denied_response(uid, f"malformed AdmissionReview: {problem}")
    except InvalidField as problem:
        return denied_response(uid, _field_message(problem))
    except Exception as exc:  # a bug here must not turn into a 500 that blocks every pod
        log.exception("admission review for %s failed", kind)
        return denied_response(uid, f"internal error reviewing the {kind.kind}: {type(exc).__name__}: {exc}")


def _uid_of(review: Any) -> str:
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _parse_review(review: Any, kind: _Kind) -> _Request:
    if not isinstance(review, dict):
        raise _Malformed(f"expected a JSON object, got {describe_value(review)}")
    api_version, review_kind = review.get("apiVersion"), review.get("kind")
    if review_kind != REVIEW_KIND:
        raise _Malformed(f"kind: expected {REVIEW_KIND!r}, got {short_repr(review_kind)}")
    if api_version != REVIEW_API_VERSION:
        raise _Malformed(
            f"apiVersion: expected {REVIEW_API_VERSION!r} (the only version this webhook speaks), "
            f"got {short_repr(api_version)}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise _Malformed(f"request: expected a mapping, got {describe_value(request)}")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise _Malformed(f"request.uid: expected a non-empty string, got {short_repr(uid)}")
    operation = request.get("operation")
    if operation not in _OPERATIONS:
        known = ", ".join(sorted(_OPERATIONS))
        raise _Malformed(f"request.operation: expected one of {known}, got {short_repr(operation)}")
    _check_request_kind(request.get("kind"), kind)
    name = request.get("name")
    namespace = request.get("namespace")
    name = name if isinstance(name, str) else ""
    namespace = namespace if isinstance(namespace, str) else ""
    if operation not in _CHECKED_OPERATIONS:
        return _Request(uid, operation, name, namespace, None)
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise _Malformed(f"request.object: expected the {kind.kind} as a mapping, got {describe_value(obj)}")
    obj_kind, obj_version = obj.get("kind", kind.kind), obj.get("apiVersion", kind.api_version)
    if obj_kind != kind.kind or obj_version != kind.api_version:
        shown = " ".join(v if isinstance(v, str) else short_repr(v) for v in (obj_version, obj_kind))
        raise _Malformed(f"request.object: this webhook reviews {kind}, got {shown}")
    old = request.get("oldObject") if operation == "UPDATE" else None
    return _Request(uid, operation, name, namespace, obj, old if isinstance(old, dict) else None)


def _check_request_kind(value: Any, kind: _Kind) -> None:
    """`request.kind` ({group, version, kind}) must be the webhook's kind; it may be absent."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _Malformed(f"request.kind: expected a mapping, got {describe_value(value)}")
    got = (value.get("group", ""), value.get("version"), value.get("kind"))
    if got != (kind.group, kind.version, kind.kind):
        group, version, name = (v if isinstance(v, str) else short_repr(v) for v in got)
        shown = api_version(group, version)
        raise _Malformed(f"request.kind: this webhook reviews {kind}, got {shown} {name}")


def _named(request: _Request, obj: dict[str, Any]) -> dict[str, Any]:
    """The object with the name the schema needs: pods created from `generateName` arrive without one."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or (isinstance(metadata.get("name"), str) and metadata["name"]):
        return obj  # fine as it is, or the schema will name what is wrong with metadata
    generated = metadata.get("generateName")
    name = request.name or (generated if isinstance(generated, str) and generated else "") or "unnamed"
    return {**obj, "metadata": {**metadata, "name": name}}


def _field_message(problem: InvalidField) -> str:
    return field_message(problem.field, problem.message)


# Pods.


def _is_for_scheduler(obj: Mapping[str, Any], scheduler_name: str) -> bool:
    spec = obj.get("spec")
    name = spec.get("schedulerName", _DEFAULT_SCHEDULER) if isinstance(spec, dict) else _DEFAULT_SCHEDULER
    return bool(name == scheduler_name)


def _validate_pod(request: _Request, *, scheduler_name: str, gpu_sharing_enabled: bool) -> Review:
    obj = request.object
    assert obj is not None
    if not _is_for_scheduler(obj, scheduler_name):
        return allowed_response(request.uid)
    pod = validate_schema(Pod, _pod_sharing_view(_named(request, obj)))
    check_gpu_sharing(pod)
    if not gpu_sharing_enabled:
        for key in SHARED_GPU_ANNOTATIONS:
            if key in pod.metadata.annotations:
                raise InvalidField(
                    f"metadata.annotations.{key}",
                    "GPU sharing is disabled in this cluster; request whole GPUs with nvidia.com/gpu",
                )
    return allowed_response(request.uid)


def _pod_sharing_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of a pod the GPU-sharing rules read (metadata, containers' resources), at their own paths.

    Only these go through the schema: the API server has validated the rest, and a field the project's
    model does not know the way the API server does must not make the webhook refuse a valid pod."""
    view: dict[str, Any] = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
    metadata = obj.get("metadata")
    view["metadata"] = (
        {key: metadata[key] for key in ("name", "namespace", "annotations") if key in metadata}
        if isinstance(metadata, dict)
        else metadata
    )
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        if spec is not None:
            view["spec"] = spec
        return view
    view["spec"] = {
        key: [_container_view(container) for container in spec[key]]
        if isinstance(spec[key], list)
        else spec[key]
        for key in ("containers", "initContainers")
        if key in spec
    }
    return view


def _container_view(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    return {key: container[key] for key in ("name", "resources") if key in container}


def _mutate_pod(
    request: _Request, *, gpu_runtime_class: str, scheduler_name: str, queue_opt_in: OptIn | None
) -> Review:
    obj = request.object
    assert obj is not None
    spec = obj.get("spec")
    if (
        request.operation != "CREATE"  # runtimeClassName and a container's env cannot change afterwards
        or not isinstance(spec, dict)
        or not _is_for_scheduler(obj, scheduler_name)
    ):
        return allowed_response(request.uid)
    patch: list[dict[str, Any]] = []
    if gpu_runtime_class and not spec.get("runtimeClassName") and uses_gpus(obj, spec):
        # `add` also replaces a null or empty runtimeClassName.
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": gpu_runtime_class})
    patch.extend(gpu_sharing_patch(obj, spec))
    if queue_opt_in is not None:
        patch.extend(queue_gate_patch(obj, spec, queue_opt_in))
    return allowed_response(request.uid, patch=patch)


# Queues and PodGroups.


def _validate_queue(request: _Request) -> Review:
    obj = request.object
    assert obj is not None
    check_queue_has_resources(obj)
    check_queue(validate_schema(Queue, _named(request, obj)))
    return allowed_response(request.uid)


def _validate_podgroup(request: _Request) -> Review:
    obj = request.object
    assert obj is not None
    group = validate_schema(PodGroup, _named(request, obj))
    update = request.operation == "UPDATE"
    # KAI's webhook answers its warnings whether it admits the PodGroup or not.
    warnings = [field_message(field, text) for field, text in pod_group_warnings(group, update=update)]
    try:
        check_sub_groups(group, update=update)
    except InvalidField as problem:
        return denied_response(request.uid, _field_message(problem), warnings=warnings)
    return allowed_response(request.uid, warnings=warnings)


def _validate_topology(request: _Request) -> Review:
    obj = request.object
    assert obj is not None
    topology = validate_schema(Topology, _named(request, obj))
    check_topology(topology)
    if request.old_object is not None:
        check_topology_update(validate_schema(Topology, _named(request, request.old_object)), topology)
    return allowed_response(request.uid)


def _validate_accounted_resource(request: _Request) -> Review:
    obj = request.object
    assert obj is not None
    try:
        check_accounted_resource(validate_schema(AccountedResource, _named(request, obj)))
    except SourceProblem as problem:
        return denied_response(request.uid, field_message(problem.field, problem.message))
    return allowed_response(request.uid)


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


# --- TLS ------------------------------------------------------------------------------------------


# --- the HTTPS server -----------------------------------------------------------------------------


Reviewer = Callable[[Any], Review]


__all__ = [
    "DEFAULT_GPU_RUNTIME_CLASS",
    "DENIED_CODE",
    "MUTATE_POD_PATH",
    "REVIEW_API_VERSION",
    "VALIDATE_ACCOUNTED_RESOURCE_PATH",
    "VALIDATE_PODGROUP_PATH",
    "VALIDATE_POD_PATH",
    "VALIDATE_QUEUE_PATH",
    "VALIDATE_TOPOLOGY_PATH",
    "Review",
    "Reviewer",
    "allowed_response",
    "denied_response",
    "review_accounted_resource_validation",
    "review_pod_mutation",
    "review_pod_validation",
    "review_podgroup_validation",
    "review_queue_validation",
    "review_topology_validation",
]
