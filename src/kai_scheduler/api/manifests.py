"""From one parsed YAML document to a typed, validated API object (pure: no file I/O).

Two layers of checks run here. The schema (the pydantic models in `objects.py`) rejects what the API server
would: wrong types, missing names, bad quantities; with `strict` (the simulator's input) also fields the kind
does not have, as strict field validation does (`strict.py`), and a Queue without resources, as KAI's webhook
does. The semantic checks reject what KAI's admission webhooks
and the API server's own validation would: a `gpu-fraction` of 1.5, a GPU fraction together with a whole-GPU
request, a PodGroup whose subGroups form a cycle. Catching both at load time means the simulator never runs
a workload that a real cluster would refuse, and every error names the file, document and field.

This module owns those rules for every caller. The admission webhooks (`kai_scheduler.k8s.admission`)
apply them to live objects: they call `validate_schema` and the rule sets `check_gpu_sharing` (pods),
`check_queue_has_resources` and `check_queue` (Queues) and `check_sub_groups` (PodGroups), which raise
`InvalidField`, so a manifest the simulator refuses is one a cluster refuses too. Live mode's scheduler
reads every pod of its own and every PodGroup with `parse_object`, so that in a cluster without the
webhook, what the webhook would have refused waits with the webhook's words on it (`field_message`;
`k8s/scheduler/waiting.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from kai_scheduler.api import constants as c
from kai_scheduler.api.accounted_resources import SourceProblem, check_accounted_resource
from kai_scheduler.api.cel import CelUnsupported, compile_selector
from kai_scheduler.api.durations import parse_duration
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.gpu_request import InvalidGpuRequest, read_shared_gpu_request
from kai_scheduler.api.objects import (
    AccountedResource,
    ApiObject,
    ConfigMap,
    Container,
    DeviceClass,
    DeviceSelector,
    K8sModel,
    Namespace,
    Node,
    NodeResourceTopology,
    ObjectMeta,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceList,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.api.podgroup_rules import Severity, min_findings
from kai_scheduler.api.quantity import format_quantity
from kai_scheduler.api.shared_parts import SharedParts
from kai_scheduler.api.strict import unknown_field
from kai_scheduler.api.topology_rules import alias_problem, update_problem

SUPPORTED_KINDS: Mapping[tuple[str, str], type[ApiObject]] = {
    ("v1", "Node"): Node,
    ("v1", "Pod"): Pod,
    ("scheduling.run.ai/v2", "Queue"): Queue,
    ("scheduling.run.ai/v2alpha2", "PodGroup"): PodGroup,
    ("scheduling.k8s.io/v1", "PriorityClass"): PriorityClass,
    ("kai.scheduler/v1alpha1", "Topology"): Topology,
    ("resource.k8s.io/v1", "ResourceClaim"): ResourceClaim,
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ResourceClaimTemplate,
    ("resource.k8s.io/v1", "ResourceSlice"): ResourceSlice,
    ("resource.k8s.io/v1", "DeviceClass"): DeviceClass,
    ("v1", "ConfigMap"): ConfigMap,
    ("v1", "PersistentVolumeClaim"): PersistentVolumeClaim,
    ("v1", "PersistentVolume"): PersistentVolume,
    ("storage.k8s.io/v1", "StorageClass"): StorageClass,
    ("policy/v1", "PodDisruptionBudget"): PodDisruptionBudget,
    ("v1", "Namespace"): Namespace,
    ("topology.node.k8s.io/v1alpha2", "NodeResourceTopology"): NodeResourceTopology,
    ("scheduling.run.ai/v1alpha1", "AccountedResource"): AccountedResource,
}
"""(apiVersion, kind) -> model, for every kind the simulator reads."""

_NAMESPACED_KINDS = frozenset(
    {
        "Pod",
        "PodGroup",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ConfigMap",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
    }
)
_EXPECTED_KINDS = ", ".join(f"{version} {kind}" for version, kind in SUPPORTED_KINDS)

# Go's strconv is stricter than Python's int()/float() (no `1_000`, no `nan`); mirror it.
_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_PERCENT = re.compile(r"\d+%", re.ASCII)

_SIMULATION_DURATIONS = (c.SIM_ARRIVAL_ANNOTATION, c.SIM_DURATION_ANNOTATION)
_MAX_SHOWN_INPUT = 60

_Model = TypeVar("_Model", bound=K8sModel)


class InvalidField(Exception):
    """A problem found at `field` (a dotted path inside the object, None for the object as a whole).

    `parse_object` turns it into a ManifestError with the file and document; the admission webhooks into a
    denial."""

    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --- public API ---------------------------------------------------------------------------------


def parse_object(
    doc: Any,
    source: str,
    index: int,
    item: int | None = None,
    *,
    strict: bool = False,
    shared: SharedParts | None = None,
    shape: object = None,
) -> ApiObject:
    """Validate one document (index = its 1-based position in `source`; item = position in a `kind: List`).

    Raises ManifestError, never anything else, for any input a real cluster would reject. `strict` also
    refuses fields the kind does not have (`strict.unknown_field`), as `kubectl apply --validate=strict`
    does: the simulator's input is checked so; what live mode reads from the API server is not (yet).
    `shared`: the parts other documents of the same input repeat, validated once (`shared_parts`);
    `shape`: the same object for documents of the same keys and nesting whose scalars alone differ
    (`sim.yaml_templates`), whose fields `strict` then checks once per kind.
    """
    try:
        if not isinstance(doc, dict):
            raise InvalidField(
                None, f"expected a mapping with apiVersion and kind, got {describe_value(doc)}"
            )
        model = _model_for(doc)
        if strict and (shared is None or not shared.fields_known(shape, model)):
            unknown = unknown_field(model, doc)
            if unknown is not None:
                raise InvalidField(unknown.path, unknown.message)
            if shared is not None:
                shared.note_fields_known(shape, model)
        obj = validate_schema(model, doc if shared is None else shared.substitute(model, doc))
        if strict and isinstance(obj, Queue):
            check_queue_has_resources(doc)
        _check_object(obj, shared)
        return obj
    except InvalidField as problem:
        raise ManifestError(
            source,
            problem.message,
            document=index,
            item=item,
            object_ref=_raw_ref(doc),
            field=problem.field,
        ) from None


def field_message(field: str | None, message: str) -> str:
    """A problem on one line, its field first (`metadata.annotations.gpu-fraction: must be between ...`): how
    the admission webhooks deny an object and how live mode says why it cannot take one."""
    return f"{field}: {message}" if field else message


def validate_schema(model: type[_Model], doc: Any) -> _Model:
    """`doc` as a `model`; a schema error raises InvalidField at the manifest path of its first problem."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise _from_validation_error(exc) from None


def object_ref(obj: ApiObject) -> str:
    """How messages name an object: `Pod default/a-0` for namespaced kinds, `Queue team-a` otherwise."""
    kind, namespace, name = object_key(obj)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def object_key(obj: ApiObject) -> tuple[str, str, str]:
    """Identity of an object in a cluster: (kind, namespace or "" when cluster-scoped, name)."""
    namespace = (obj.metadata.namespace or "default") if obj.kind in _NAMESPACED_KINDS else ""
    return obj.kind, namespace, obj.metadata.name


# --- dispatch and schema errors -----------------------------------------------------------------


def _model_for(doc: dict[Any, Any]) -> type[ApiObject]:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind is None:
        raise InvalidField("kind", f"required field is missing; expected one of: {_EXPECTED_KINDS}")
    if not isinstance(kind, str):
        raise InvalidField("kind", f"expected a string, got {short_repr(kind)}")
    if api_version is not None and not isinstance(api_version, str):
        raise InvalidField("apiVersion", f"expected a string, got {short_repr(api_version)}")
    model = SUPPORTED_KINDS.get((api_version or "", kind))
    if model is not None:
        return model
    versions = [version for version, known in SUPPORTED_KINDS if known == kind]
    if not versions and api_version is None:
        raise InvalidField("apiVersion", f"required field is missing (kind {kind})")
    if not versions:
        raise InvalidField(
            None, f"unsupported kind {api_version or ''} {kind}; expected one of: {_EXPECTED_KINDS}"
        )
    if api_version is None:
        raise InvalidField("apiVersion", f"required field is missing; {kind} is {versions[0]}")
    raise InvalidField(
        "apiVersion", f"unsupported apiVersion {api_version} for kind {kind}; expected {versions[0]}"
    )


# What a Queue's numbers count (KAI's Queue: plain numbers, no Kubernetes quantities).
_QUEUE_UNITS: Mapping[str, str] = {"gpu": "GPUs", "cpu": "millicores", "memory": "MB (10^6 bytes)"}


def _from_validation_error(exc: ValidationError) -> InvalidField:
    """The first schema error, with the manifest path (`spec.containers[0].resources.requests.cpu`)."""
    error = exc.errors(include_url=False)[0]
    message = _describe(error)
    loc = error["loc"]
    if (
        len(loc) == 4
        and loc[:2] == ("spec", "resources")
        and loc[2] in _QUEUE_UNITS
        and error["type"] != "missing"
    ):
        # A Queue's `16Gi` or `4000m`: say what the number is in.
        message += (
            f"; a queue's {loc[2]} {loc[3]} is a plain number of {_QUEUE_UNITS[str(loc[2])]}, -1: unlimited"
        )
    return InvalidField(_format_loc(loc) or None, message)


def _format_loc(loc: tuple[int | str, ...]) -> str:
    """`('spec', 'containers', 0, 'name')` -> `spec.containers[0].name`; keys with dots stay readable."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _describe(error: ErrorDetails) -> str:
    """A user's wording for a pydantic error: no class names, and the offending value shown."""
    kind, value = error["type"], error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])  # our own validators' messages (quantities) are already worded
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"expected a mapping, got {describe_value(value)}"
    if kind == "list_type":
        return f"expected a list, got {describe_value(value)}"
    if kind == "string_type" and isinstance(value, bool | int | float):
        # YAML turns unquoted `0.5`, `5` or `true` into numbers and booleans; Kubernetes wants strings.
        return f'expected a string, got {short_repr(value)} (quote it: "{_yaml_text(value)}")'
    message = error["msg"]
    return f"{message[:1].lower()}{message[1:]}, got {short_repr(value)}"


def _raw_ref(doc: Any) -> str | None:
    """Name the object from the raw document, so even an invalid object is named in its error."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return None
    kind: str = doc["kind"]
    metadata = doc.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        return kind
    if kind not in _NAMESPACED_KINDS:
        return f"{kind} {name}"
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return f"{kind} {namespace if isinstance(namespace, str) and namespace else 'default'}/{name}"


def describe_value(value: Any) -> str:
    """How a wrong value reads in a one-line error: its kind for containers, else a short repr."""
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return short_repr(value)


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN_INPUT else text[: _MAX_SHOWN_INPUT - 3] + "..."


def _yaml_text(value: bool | int | float) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- semantic checks ----------------------------------------------------------------------------


def _check_object(obj: ApiObject, shared: SharedParts | None = None) -> None:
    _check_simulation_annotations(obj.metadata)
    if isinstance(obj, Pod):
        _check_pod(obj, shared)
    elif isinstance(obj, Node):
        _check_resource_list("status.allocatable", obj.status.allocatable)
        _check_resource_list("status.capacity", obj.status.capacity)
    elif isinstance(obj, Queue):
        check_queue(obj)
    elif isinstance(obj, PodGroup):
        check_sub_groups(obj)
    elif isinstance(obj, Topology):
        check_topology(obj)
    elif isinstance(obj, ResourceClaim):
        check_claim_spec("spec", obj.spec)
    elif isinstance(obj, ResourceClaimTemplate):
        check_claim_spec("spec.spec", obj.spec.spec)
    elif isinstance(obj, ResourceSlice):
        _check_resource_slice(obj)
    elif isinstance(obj, DeviceClass):
        check_selectors("spec.selectors", obj.spec.selectors)
    elif isinstance(obj, PodDisruptionBudget):
        _check_disruption_budget(obj)
    elif isinstance(obj, AccountedResource):
        try:
            check_accounted_resource(obj)
        except SourceProblem as problem:
            raise InvalidField(problem.field, problem.message) from None


def _check_disruption_budget(budget: PodDisruptionBudget) -> None:
    spec = budget.spec
    if spec.min_available is not None and spec.max_unavailable is not None:
        raise InvalidField("spec", "minAvailable and maxUnavailable cannot be both set")
    for field, value in (("minAvailable", spec.min_available), ("maxUnavailable", spec.max_unavailable)):
        if isinstance(value, str) and not _PERCENT.fullmatch(value):
            raise InvalidField(f"spec.{field}", f"must be a count or a percentage ('50%'), got {value!r}")
        if isinstance(value, int) and value < 0:
            raise InvalidField(f"spec.{field}", f"must not be negative, got {value}")


def _check_simulation_annotations(metadata: ObjectMeta) -> None:
    for key in _SIMULATION_DURATIONS:
        text = metadata.annotations.get(key)
        if text is not None:
            _check_non_negative_duration(f"metadata.annotations.{key}", text)


def _check_non_negative_duration(field: str, text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise InvalidField(field, str(exc)) from None
    if seconds < 0:
        raise InvalidField(field, f"must not be negative, got {text!r}")


# Pods.


def _check_pod(pod: Pod, shared: SharedParts | None = None) -> None:
    priority = pod.metadata.labels.get(c.TASK_PRIORITY_LABEL)
    if priority is not None and not _INTEGER.fullmatch(priority):
        raise InvalidField(
            f"metadata.labels.{c.TASK_PRIORITY_LABEL}", f"must be an integer, got {priority!r}"
        )
    if pod.metadata.annotations:  # the GPU-sharing rules are all about annotations; most pods have none
        check_gpu_sharing(pod)
    for path, container in _containers(pod):
        # A container shared with other pods (`shared_parts`) passes for each as it did for the first.
        if shared is not None and shared.checked(container):
            continue
        _check_resource_list(f"{path}.resources.requests", container.resources.requests)
        _check_resource_list(f"{path}.resources.limits", container.resources.limits)
        _check_requests_within_limits(path, container)
        if shared is not None:
            shared.note_checked(container)
    _check_resource_list("spec.overhead", pod.spec.overhead)
    if pod.spec.resource_claims:
        _check_pod_claims(pod)


def _containers(pod: Pod) -> Iterator[tuple[str, Container]]:
    for index, container in enumerate(pod.spec.containers):
        yield f"spec.containers[{index}]", container
    for index, container in enumerate(pod.spec.init_containers):
        yield f"spec.initContainers[{index}]", container


def check_gpu_sharing(pod: Pod) -> None:
    """The GPU-sharing annotations, as KAI's admission webhook checks them; raises InvalidField.

    KAI's rules: the request itself as `api.gpu_request.read_shared_gpu_request` reads it (`gpu-fraction`
    in (0, 1), `gpu-memory` a positive integer (MiB), not both, `gpu-fraction-num-devices` only with one of
    them); `mps: "true"` only with one of them; neither together with an `nvidia.com/gpu` request or
    limit."""
    annotations = pod.metadata.annotations
    try:
        request = read_shared_gpu_request(annotations)
    except InvalidGpuRequest as error:
        raise InvalidField(error.field, error.message) from None
    if request is None:
        if annotations.get(c.MPS_ANNOTATION) == "true":
            raise InvalidField(
                f"metadata.annotations.{c.MPS_ANNOTATION}",
                f"requires a {c.GPU_FRACTION_ANNOTATION} or {c.GPU_MEMORY_ANNOTATION} annotation",
            )
        return
    _check_no_whole_gpus(pod, c.GPU_FRACTION_ANNOTATION if not request.by_memory else c.GPU_MEMORY_ANNOTATION)


def _check_no_whole_gpus(pod: Pod, annotation: str) -> None:
    """A pod asks for whole GPUs or a share of one, never both."""
    for path, container in _containers(pod):
        for section, resources in (
            ("requests", container.resources.requests),
            ("limits", container.resources.limits),
        ):
            if c.GPU_RESOURCE in resources:
                raise InvalidField(
                    f"{path}.resources.{section}.{c.GPU_RESOURCE}",
                    f"cannot be combined with the {annotation} annotation; ask for whole GPUs or for a share",
                )


class _UniqueNames:
    """A list the API server keys by name (claims, requests, devices, subGroups, levels): a name seen
    again is refused at its second place, naming the first."""

    def __init__(self, list_field: str, what: str = "name") -> None:
        self._list_field = list_field
        self._what = what
        self._first: dict[str, int] = {}

    def add(self, index: int, name: str, field: str) -> None:
        if name in self._first:
            also = f"{self._list_field}[{self._first[name]}]"
            raise InvalidField(field, f"duplicate {self._what} {name!r} (also {also})")
        self._first[name] = index

    def __contains__(self, name: object) -> bool:
        return name in self._first


def _check_pod_claims(pod: Pod) -> None:
    """The API server's rules for `spec.resourceClaims`: unique names, each naming a claim or a template."""
    seen = _UniqueNames("spec.resourceClaims")
    for index, claim in enumerate(pod.spec.resource_claims):
        field = f"spec.resourceClaims[{index}]"
        seen.add(index, claim.name, f"{field}.name")
        if (claim.resource_claim_name is None) == (claim.resource_claim_template_name is None):
            raise InvalidField(
                field, "exactly one of resourceClaimName and resourceClaimTemplateName must be set"
            )


# Dynamic Resource Allocation: what the API server checks, and CEL selectors the scheduler can read.


def check_claim_spec(path: str, spec: ResourceClaimSpec) -> None:
    """A ResourceClaim's (or template's) device requests: unique names, each with exactly one of `exactly`
    and `firstAvailable`, selectors the scheduler can evaluate; constraints and configs name existing
    requests. Raises InvalidField."""
    devices = spec.devices
    names = _UniqueNames(f"{path}.devices.requests")
    for index, request in enumerate(devices.requests):
        field = f"{path}.devices.requests[{index}]"
        names.add(index, request.name, f"{field}.name")
        if (request.exactly is None) == (not request.first_available):
            raise InvalidField(field, "exactly one of exactly and firstAvailable must be set")
        if request.exactly is not None:
            check_selectors(f"{field}.exactly.selectors", request.exactly.selectors)
        for sub_index, sub in enumerate(request.first_available):
            check_selectors(f"{field}.firstAvailable[{sub_index}].selectors", sub.selectors)
    sections: tuple[tuple[str, list[list[str]]], ...] = (
        ("constraints", [entry.requests for entry in devices.constraints]),
        ("config", [entry.requests for entry in devices.config]),
    )
    for section, entries in sections:
        for index, requests in enumerate(entries):
            for name in requests:
                if name.split("/", 1)[0] not in names:
                    raise InvalidField(
                        f"{path}.devices.{section}[{index}].requests", f"no request named {name!r}"
                    )


def check_selectors(path: str, selectors: list[DeviceSelector]) -> None:
    """Every CEL selector compiles in the DRA CEL environment (`api/cel.py`)."""
    for index, selector in enumerate(selectors):
        if selector.cel is None:
            raise InvalidField(f"{path}[{index}]", "a selector needs cel.expression")
        try:
            compile_selector(selector.cel.expression)
        except CelUnsupported as error:
            raise InvalidField(
                f"{path}[{index}].cel.expression", f"unsupported CEL expression: {error}"
            ) from None


def _check_resource_slice(slice_: ResourceSlice) -> None:
    spec = slice_.spec
    chosen = [
        name
        for name, value in (
            ("nodeName", spec.node_name),
            ("nodeSelector", spec.node_selector),
            ("allNodes", spec.all_nodes or None),
            ("perDeviceNodeSelection", spec.per_device_node_selection or None),
        )
        if value is not None
    ]
    if len(chosen) != 1:
        raise InvalidField(
            "spec",
            "exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection must be set"
            + (f", got {', '.join(chosen)}" if chosen else ""),
        )
    names = _UniqueNames("spec.devices", "device name")
    for index, device in enumerate(spec.devices):
        field = f"spec.devices[{index}]"
        names.add(index, device.name, f"{field}.name")
        own = [v for v in (device.node_name, device.node_selector, device.all_nodes or None) if v is not None]
        if spec.per_device_node_selection and len(own) != 1:
            raise InvalidField(
                field, "with perDeviceNodeSelection, exactly one of nodeName, nodeSelector, allNodes"
            )
        if not spec.per_device_node_selection and own:
            raise InvalidField(field, "a device names its nodes only with the slice's perDeviceNodeSelection")
        for name, attribute in device.attributes.items():
            values = [attribute.int_value, attribute.bool_value, attribute.string, attribute.version]
            if sum(value is not None for value in values) != 1:
                raise InvalidField(
                    f"{field}.attributes.{name}", "exactly one of int, bool, string and version must be set"
                )


# Resources.


def _is_extended(resource: str) -> bool:
    """Extended resources (`nvidia.com/gpu`, `nvidia.com/mig-1g.5gb`) are counted in whole units."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def _check_resource_list(path: str, resources: ResourceList) -> None:
    # Numerator and denominator tests instead of Fraction comparisons: this runs for every pod loaded.
    for name, amount in resources.items():
        if amount.numerator < 0:
            raise InvalidField(f"{path}.{name}", f"must not be negative, got {format_quantity(amount)}")
        if amount.denominator != 1 and _is_extended(name):
            hint = (
                f"; for part of a GPU use the {c.GPU_FRACTION_ANNOTATION} annotation"
                if name == c.GPU_RESOURCE
                else ""
            )
            raise InvalidField(
                f"{path}.{name}", f"must be a whole number, got {format_quantity(amount)}{hint}"
            )


def _check_requests_within_limits(path: str, container: Container) -> None:
    """The API server's rule: requests never exceed limits, and extended resources cannot be overcommitted."""
    limits = container.resources.limits
    if not limits:
        return
    for name, request in container.resources.requests.items():
        limit = limits.get(name)
        if limit is None or request == limit:
            continue
        field = f"{path}.resources.requests.{name}"
        shown = f"{format_quantity(request)} vs limit {format_quantity(limit)}"
        if _is_extended(name):
            raise InvalidField(field, f"must equal the limit for an extended resource ({shown})")
        if request > limit:
            raise InvalidField(field, f"must not exceed the limit ({shown})")


# Queues, PodGroups, Topologies.


def check_queue_has_resources(doc: Any) -> None:
    """KAI's Queue webhook (`queue_webhook.go`, on by default) refuses a Queue without `spec.resources`
    (the raw document: the model would default them). Raises InvalidField."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if spec is None or (isinstance(spec, dict) and spec.get("resources") is None):
        raise InvalidField(
            "spec.resources",
            "required field is missing (KAI refuses a Queue without it); give the queue's gpu, cpu and "
            "memory quota and limit",
        )


def check_queue(queue: Queue) -> None:
    """A queue is not its own parent; its minimum runtimes are non-negative durations. Raises InvalidField."""
    if queue.spec.parent_queue and queue.spec.parent_queue == queue.metadata.name:
        raise InvalidField("spec.parentQueue", f"a queue cannot be its own parent ({queue.metadata.name!r})")
    for field, value in (
        ("spec.preemptMinRuntime", queue.spec.preempt_min_runtime),
        ("spec.reclaimMinRuntime", queue.spec.reclaim_min_runtime),
    ):
        if value is not None:
            _check_non_negative_duration(field, value)
    # KAI's AccountedResource design: a queue names each resource at most once.
    refs = _UniqueNames("spec.accountedResources", "resourceRef")
    for index, entry in enumerate(queue.spec.accounted_resources):
        refs.add(index, entry.resource_ref, f"spec.accountedResources[{index}].resourceRef")


def check_sub_groups(group: PodGroup, *, update: bool = False) -> None:
    """Sub-gangs form a forest (unique names, parents that exist, no cycles) and state their minimums as
    KAI's webhook requires (`podgroup_rules`; `update`: as for a change to an existing PodGroup, which
    lets a mid-level minMember pass). Raises InvalidField; what KAI only warns of is `pod_group_warnings`."""
    findings = min_findings(group.spec)
    if findings and findings[0].field == "spec.minSubGroup" and findings[0].severity is Severity.STRUCTURAL:
        raise InvalidField(findings[0].field, findings[0].message)
    _check_sub_group_graph(group)
    refused = [finding for finding in findings if finding.refused(update=update)]
    if refused:
        raise InvalidField(refused[0].field, "; ".join(finding.message for finding in refused))


def pod_group_warnings(group: PodGroup, *, update: bool = False) -> list[tuple[str, str]]:
    """(field, message) of what KAI's PodGroup webhook admits with a warning."""
    return [(f.field, f.message) for f in min_findings(group.spec) if not f.refused(update=update)]


def _check_sub_group_graph(group: PodGroup) -> None:
    subs = group.spec.sub_groups
    names = _UniqueNames("spec.subGroups", "subGroup name")
    for index, sub in enumerate(subs):
        names.add(index, sub.name, f"spec.subGroups[{index}].name")
    for index, sub in enumerate(subs):
        if sub.parent and sub.parent not in names:
            raise InvalidField(
                f"spec.subGroups[{index}].parent", f"no subGroup named {sub.parent!r} in this PodGroup"
            )
    parent_of = {sub.name: sub.parent for sub in subs if sub.parent}
    for index, sub in enumerate(subs):
        chain = [sub.name]
        while (parent := parent_of.get(chain[-1])) is not None:
            if parent == sub.name:
                raise InvalidField(
                    f"spec.subGroups[{index}].parent",
                    f"subGroup parents form a cycle: {' -> '.join([*chain, parent])}",
                )
            if parent in chain:
                break  # a cycle further up, reported at one of its own members
            chain.append(parent)


def check_topology(topology: Topology) -> None:
    """A Topology's levels: unique node labels, the hostname only as the last, and KAI's alias rules
    (`topology_rules`). Raises InvalidField."""
    levels = topology.spec.levels
    labels = _UniqueNames("spec.levels", "level")
    for index, level in enumerate(levels):
        label, field = level.node_label, f"spec.levels[{index}].nodeLabel"
        labels.add(index, label, field)
        if label == c.HOSTNAME_LABEL and index != len(levels) - 1:
            raise InvalidField(field, f"{c.HOSTNAME_LABEL} can only be the last (narrowest) level")
    problem = alias_problem(levels)
    if problem is not None:
        raise InvalidField("spec.levels", problem)


def check_topology_update(old: Topology, new: Topology) -> None:
    """A change to a Topology: its node labels stay as they were (its aliases may change)."""
    problem = update_problem(old.spec.levels, new.spec.levels)
    if problem is not None:
        raise InvalidField("spec.levels", problem)
