"""Input checked as strictly as a cluster checks it, and warnings where valid input probably says what
its author did not mean.

* `unknown_field`: a field the object's schema does not have is an error, as the API server's strict field
  validation (`kubectl apply --validate=strict`) refuses it, with a "did you mean" when a known field is
  close. Without it a typo is silently dropped: `minMembers: 3` left a gang of one, `qouta: 8` a quota of 0.
* `notices`: what a cluster accepts but that changes the answer unnoticed: a label or annotation key one
  edit away from one of KAI's (`gpu-fractoin`, `kai.scheduler/queeu`: a pod on no GPU, in the default
  queue) or under KAI's prefix but read by no component (`kai.scheduler/preemtion-delay`, `api.kai_keys`),
  and a Queue resource field left out (KAI reads every one as 0, and a limit of 0 blocks the
  resource).

Pure (no I/O): the simulator's loader calls both (through `manifests.parse_object`, and on each object it
loads); the live edge can call them on what it reads.

The schema of each object is the model the scheduler reads it with (`objects.py`, and for KAI's kinds the
full CRD models of `crd_models.py`), plus the fields that Kubernetes (1.34) or KAI define and the
scheduler ignores, listed below per model. Inside a field the scheduler does not read (probes) or reads
only a little of (a pod's `volumes`, `env`, `envFrom`, `volumeMounts`, `ephemeralContainers`: tuples of
partial models, which the walk does not enter) nothing is checked: those parts are not modelled whole
here, and a valid manifest must never be refused for them. Maps with free keys (labels, resource lists,
opaque driver parameters) are not fields.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from kai_scheduler.api import constants as c
from kai_scheduler.api import crd_models as crd
from kai_scheduler.api import objects as o
from kai_scheduler.api.kai_keys import KNOWN_KAI_KEYS, unknown_kai_key

# Fields Kubernetes or KAI define that the models leave out because scheduling never reads them. Each
# list is the rest of the real type's fields (Kubernetes 1.34 `k8s.io/api`, KAI's `pkg/apis`).
_OBJECT_META = (
    "generateName",
    "selfLink",
    "resourceVersion",
    "deletionGracePeriodSeconds",
    "finalizers",
    "managedFields",
)
IGNORED_FIELDS: Mapping[type[BaseModel], tuple[str, ...]] = {
    o.ObjectMeta: _OBJECT_META,
    o.OwnerReference: ("blockOwnerDeletion",),
    o.PodDisruptionBudgetSpec: ("unhealthyPodEvictionPolicy",),
    o.PodDisruptionBudgetStatus: (
        "disruptedPods",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
        "conditions",
    ),
    o.PodAffinityTerm: ("matchLabelKeys", "mismatchLabelKeys"),
    o.Taint: ("timeAdded",),
    o.NodeSpec: ("podCIDR", "podCIDRs", "providerID", "configSource", "externalID"),
    o.NodeCondition: ("lastHeartbeatTime", "lastTransitionTime", "reason", "message"),
    o.NodeStatus: (
        "phase",
        "addresses",
        "daemonEndpoints",
        "nodeInfo",
        "images",
        "volumesInUse",
        "volumesAttached",
        "config",
        "runtimeHandlers",
        "features",
    ),
    o.ResourceRequirements: ("claims",),
    o.Container: (
        "command",
        "args",
        "workingDir",
        "resizePolicy",
        "restartPolicyRules",
        "volumeDevices",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "lifecycle",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "imagePullPolicy",
        "securityContext",
        "stdin",
        "stdinOnce",
        "tty",
    ),
    o.PodSpec: (
        "restartPolicy",
        "terminationGracePeriodSeconds",
        "activeDeadlineSeconds",
        "dnsPolicy",
        "serviceAccountName",
        "serviceAccount",
        "automountServiceAccountToken",
        "hostPID",
        "hostIPC",
        "shareProcessNamespace",
        "securityContext",
        "imagePullSecrets",
        "hostname",
        "hostnameOverride",
        "subdomain",
        "hostAliases",
        "dnsConfig",
        "readinessGates",
        "runtimeClassName",
        "enableServiceLinks",
        "preemptionPolicy",
        "topologySpreadConstraints",
        "setHostnameAsFQDN",
        "os",
        "hostUsers",
        "resources",
    ),
    o.PodStatus: (
        "observedGeneration",
        "conditions",
        "message",
        "reason",
        "nominatedNodeName",
        "hostIP",
        "hostIPs",
        "podIP",
        "podIPs",
        "startTime",
        "initContainerStatuses",
        "containerStatuses",
        "qosClass",
        "ephemeralContainerStatuses",
        "resize",
    ),
    o.PriorityClass: ("description", "preemptionPolicy"),
    o.Namespace: ("spec", "status"),
    # Dynamic Resource Allocation (resource.k8s.io/v1).
    o.DeviceCapacity: ("requestPolicy",),
    o.Device: (
        "consumesCounters",
        "taints",
        "bindsToNode",
        "bindingConditions",
        "bindingFailureConditions",
        "allowMultipleAllocations",
    ),
    o.ResourceSliceSpec: ("sharedCounters",),
    o.ExactDeviceRequest: ("tolerations", "capacity"),
    o.DeviceSubRequest: ("tolerations", "capacity"),
    o.DeviceConstraint: ("distinctAttribute",),
    o.DeviceRequestAllocationResult: (
        "adminAccess",
        "tolerations",
        "bindingConditions",
        "bindingFailureConditions",
        "shareID",
        "consumedCapacity",
    ),
    o.AllocationResult: ("allocationTimestamp",),
    o.ResourceClaimStatus: ("devices",),
    # A claim template's metadata is a whole ObjectMeta.
    o.ClaimTemplateMeta: (
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "ownerReferences",
        *_OBJECT_META,
    ),
    # ConfigMaps and storage (v1, storage.k8s.io/v1): the ConfigMap and volume-binding predicates read
    # names, classes, capacities, claim references and node affinity only.
    o.ConfigMap: ("data", "binaryData", "immutable"),
    o.PersistentVolumeClaim: ("status",),
    o.PersistentVolumeClaimSpec: (
        "selector",
        "volumeMode",
        "dataSource",
        "dataSourceRef",
        "volumeAttributesClassName",
    ),
    o.PersistentVolume: ("status",),
    o.PersistentVolumeSpec: (
        "persistentVolumeReclaimPolicy",
        "mountOptions",
        "volumeMode",
        "volumeAttributesClassName",
        # The volume source, one of:
        "awsElasticBlockStore",
        "azureDisk",
        "azureFile",
        "cephfs",
        "cinder",
        "csi",
        "fc",
        "flexVolume",
        "flocker",
        "gcePersistentDisk",
        "glusterfs",
        "hostPath",
        "iscsi",
        "local",
        "nfs",
        "photonPersistentDisk",
        "portworxVolume",
        "quobyte",
        "rbd",
        "scaleIO",
        "storageos",
        "vsphereVolume",
    ),
    o.ObjectReference: ("kind", "apiVersion", "resourceVersion", "fieldPath"),
    o.StorageClass: ("parameters", "reclaimPolicy", "mountOptions", "allowVolumeExpansion"),
    # KAI's status types, where the CRD models word them differently (queue_types.go, podgroup_types.go).
    crd.Condition: ("lastProbeTime",),
    crd.QueueDetails: (
        "queueRequestedResources",
        "queueDeservedResources",
        "queueAllocatedResources",
        "queueAllocatedNonPreemptibleResources",
        "queueResourceLimits",
        "podGroupRequestedResources",
        "podGroupRequestedNonPreemptibleResources",
    ),
}

# The schema a kind is checked against, where it is more than the model the scheduler reads it with.
_FULL_MODELS: Mapping[type[BaseModel], type[BaseModel]] = {
    o.Queue: crd.QueueObject,
    o.PodGroup: crd.PodGroupObject,
}


@dataclass(frozen=True, slots=True)
class UnknownField:
    """A field the schema does not have: `path` is the manifest path of the field itself."""

    path: str
    name: str
    suggestion: str | None

    @property
    def message(self) -> str:
        hint = f'; did you mean "{self.suggestion}"?' if self.suggestion else ""
        return f'unknown field "{self.name}"{hint}'


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a model allows: its field names, and for fields that hold models, how to step into them."""

    known: frozenset[str]
    children: Mapping[str, tuple[str, _Shape]]  # field -> ("one" | "list" | "map", the model's shape)


def unknown_field(model: type[BaseModel], doc: Any) -> UnknownField | None:
    """The first field of `doc` (a raw manifest read as `model`) that the kind's schema does not have, in
    document order; None when every field is known. Values of the wrong type are left to the schema."""
    shape = _shape(_FULL_MODELS.get(model, model))
    # Almost every document is clean: a check that builds no path strings first, the walk that names the
    # field only for the rest.
    return None if _is_clean(shape, doc) else _walk(shape, doc, "")


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to a misspelt `word`, if one is close enough to be what was meant."""
    # Sorted: a set iterates in another order each run, and a tie must not pick differently.
    candidates = sorted(candidates)
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.75)
    if close:
        return close[0]
    # Case alone (`nodename` for `nodeName`) is always a typo.
    lowered = {candidate.lower(): candidate for candidate in candidates}
    return lowered.get(word.lower())


def _is_clean(shape: _Shape, doc: Any) -> bool:
    if not isinstance(doc, dict):
        return True
    if not shape.known.issuperset(doc):
        return False
    for key, (how, sub) in shape.children.items():
        value = doc.get(key)
        if value is None:
            continue
        if how == "one":
            if not _is_clean(sub, value):
                return False
        elif how == "list":
            if isinstance(value, list) and not all(_is_clean(sub, item) for item in value):
                return False
        elif isinstance(value, dict) and not all(_is_clean(sub, entry) for entry in value.values()):
            return False
    return True


def _walk(shape: _Shape, doc: Any, path: str) -> UnknownField | None:
    if not isinstance(doc, dict):
        return None
    known, children = shape.known, shape.children
    for key, value in doc.items():
        if key not in known:
            name = str(key)
            return UnknownField(_join(path, name), name, did_you_mean(name, known))
        child = children.get(key)
        if child is None or value is None:
            continue
        how, sub = child
        where = _join(path, key)
        if how == "one":
            found = _walk(sub, value, where)
        elif how == "list":
            found = _walk_list(sub, value, where)
        else:
            found = _walk_map(sub, value, where)
        if found is not None:
            return found
    return None


def _walk_list(shape: _Shape, items: Any, path: str) -> UnknownField | None:
    if not isinstance(items, list):
        return None
    for index, item in enumerate(items):
        found = _walk(shape, item, f"{path}[{index}]")
        if found is not None:
            return found
    return None


def _walk_map(shape: _Shape, entries: Any, path: str) -> UnknownField | None:
    if not isinstance(entries, dict):
        return None
    for name, entry in entries.items():
        found = _walk(shape, entry, f"{path}.{name}")
        if found is not None:
            return found
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@cache
def _shape(model: type[BaseModel]) -> _Shape:
    # The models nest without cycles, so each shape is built from its children's, once (cached).
    known = set(IGNORED_FIELDS.get(model, ()))
    children: dict[str, tuple[str, _Shape]] = {}
    for name, info in model.model_fields.items():
        alias = info.alias or name
        known.add(alias)
        child = _model_in(info.annotation)
        if child is not None:
            children[alias] = (child[0], _shape(child[1]))
    return _Shape(frozenset(known), children)


def _model_in(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """How a field holds a model: ("one", M) for M or M | None, ("list", M) for list[M], ("map", M) for
    dict[str, M]; None for scalars and free-form values."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _model_in(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        options = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _model_in(options[0]) if len(options) == 1 else None
    if origin is list:
        inner = _model_in(get_args(annotation)[0])
        return ("list", inner[1]) if inner is not None and inner[0] == "one" else None
    if origin is dict:
        inner = _model_in(get_args(annotation)[1])
        return ("map", inner[1]) if inner is not None and inner[0] == "one" else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return ("one", annotation)
    return None


# --- warnings -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notice:
    """Something valid that probably does not mean what its author meant; `path` names the field."""

    path: str
    message: str


KAI_KEYS: frozenset[str] = frozenset(
    {
        c.QUEUE_LABEL,
        c.POD_GROUP_ANNOTATION,
        c.SUBGROUP_LABEL,
        c.PREEMPTIBILITY_LABEL,
        c.TASK_PRIORITY_LABEL,
        c.GPU_FRACTION_ANNOTATION,
        c.GPU_MEMORY_ANNOTATION,
        c.GPU_FRACTION_NUM_DEVICES_ANNOTATION,
        c.GPU_FRACTION_CONTAINER_ANNOTATION,
        c.GPU_GROUP_LABEL,
        c.RECEIVED_RESOURCE_TYPE_ANNOTATION,
        c.LAST_START_TIMESTAMP_ANNOTATION,
        c.STALE_PODGROUP_TIMESTAMP_ANNOTATION,
        c.ESTIMATED_START_ANNOTATION,
        c.TOPOLOGY_ANNOTATION,
        c.TOPOLOGY_REQUIRED_ANNOTATION,
        c.TOPOLOGY_PREFERRED_ANNOTATION,
        c.NODE_POOL_LABEL,
        c.GPU_MEMORY_LABEL,
        c.MIG_STRATEGY_LABEL,
        c.MIG_ENABLED_LABEL,
        c.SIM_ARRIVAL_ANNOTATION,
        c.SIM_DURATION_ANNOTATION,
    }
    | KNOWN_KAI_KEYS
)
"""Label and annotation keys KAI (or the simulator) reads; a key one edit away from one is a warning.
(`mps` is left out: at three letters, every short key would be "one edit away".)"""

_QUEUE_RESOURCES = ("gpu", "cpu", "memory")


def notices(obj: o.ApiObject) -> list[Notice]:
    """The warnings about one object, in field order."""
    found = near_miss_keys(obj.metadata)
    if isinstance(obj, o.Queue):
        found += omitted_queue_fields(obj)
    return found


def near_miss_keys(metadata: o.ObjectMeta) -> list[Notice]:
    """Label and annotation keys one edit (a letter added, dropped, changed, or two swapped) away from a
    key KAI reads, or under KAI's prefix `kai.scheduler/` and read by none of its components: the cluster
    takes them, and KAI never sees them."""
    return _near_misses("metadata", metadata.labels, metadata.annotations)


def _near_misses(path: str, labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> list[Notice]:
    # Nearly every key was seen before and is fine (a set lookup, no call): this runs for every object.
    if _FINE_KEYS.issuperset(labels) and _FINE_KEYS.issuperset(annotations):
        return []
    found = []
    for section, keys in (("labels", labels), ("annotations", annotations)):
        for key in keys:
            meant = _near_kai_key(str(key)) or unknown_kai_key(str(key))
            if meant is None:
                _FINE_KEYS.add(key)
            else:
                found.append(
                    Notice(
                        f"{path}.{section}.{key}",
                        f'"{key}" is not a key KAI reads; did you mean "{meant}"?',
                    )
                )
    return found


def near_miss_keys_in(manifest: Mapping[str, Any], path: str = "") -> list[Notice]:
    """`near_miss_keys` for every `metadata` in a raw manifest (a workload's own and its pod templates'),
    with the full path (`spec.template.metadata.annotations.gpu-fractoin`)."""
    found: list[Notice] = []
    for key, value in manifest.items():
        where = _join(path, str(key))
        if key == "metadata" and isinstance(value, Mapping):
            labels, annotations = value.get("labels"), value.get("annotations")
            found += _near_misses(
                where,
                labels if isinstance(labels, Mapping) else {},
                annotations if isinstance(annotations, Mapping) else {},
            )
        elif isinstance(value, Mapping):
            found += near_miss_keys_in(value, where)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, Mapping):
                    found += near_miss_keys_in(item, f"{where}[{index}]")
    return found


def omitted_queue_fields(queue: o.Queue) -> list[Notice]:
    """A Queue's resource fields left out, where that changes what KAI does: KAI's CRD has no defaults, so
    it reads a missing number as 0 (`pkg/apis/scheduling/v2/resources.go`), and a limit of 0 lets the
    queue use none of that resource, an overQuotaWeight of 0 gives it nothing above its quota. (A missing
    quota is 0 as well, which is also what a reader expects; no warning.)"""
    resources = queue.spec.resources
    given = resources.model_fields_set
    found = []
    for name in _QUEUE_RESOURCES:
        path = f"spec.resources.{name}"
        if name not in given:
            found.append(
                Notice(
                    path,
                    f"not set: KAI reads quota, limit and overQuotaWeight 0, and a limit of 0 blocks "
                    f"{name} for this queue (write limit: -1 for no limit)",
                )
            )
            continue
        resource: o.QueueResource = getattr(resources, name)
        fields = resource.model_fields_set
        if "limit" not in fields:
            found.append(
                Notice(
                    f"{path}.limit",
                    f"not set: KAI reads 0, which blocks {name} for this queue (write -1 for no limit)",
                )
            )
        if "over_quota_weight" not in fields and not o.is_unlimited(resource.quota):
            found.append(
                Notice(
                    f"{path}.overQuotaWeight",
                    f"not set: KAI reads 0, so the queue gets no {name} above its quota "
                    "(write 1 to share what others leave idle)",
                )
            )
    return found


def missing_priority_class(obj: o.Pod | o.PodGroup, classes: Collection[str]) -> Notice | None:
    """A pod or PodGroup naming a PriorityClass that is not among `classes` (the cluster's); None when it
    exists or it names none. The API server's Priority admission refuses such a pod (`no PriorityClass
    with name ... was found`); a PodGroup is accepted, and KAI gives it the default priority."""
    name = obj.spec.priority_class_name
    if not name or name in classes:
        return None
    meant = did_you_mean(name, classes)
    hint = f'; did you mean "{meant}"?' if meant else f" (there are: {', '.join(sorted(classes))})"
    if isinstance(obj, o.PodGroup):
        hint += "; KAI gives the job the default priority"
    return Notice("spec.priorityClassName", f'no PriorityClass with name "{name}" was found{hint}')


# Keys found not to be near misses, so each is examined once: thousands of objects carry the same few keys.
# (Bounded by the distinct keys of the input.)
_FINE_KEYS: set[str] = set(KAI_KEYS)


def _near_kai_key(key: str) -> str | None:
    """The KAI key `key` is one edit away from (None for KAI's keys themselves and for the rest)."""
    if key in KAI_KEYS:
        return None
    return next((known for known in sorted(KAI_KEYS) if _one_edit_apart(key, known)), None)


def _one_edit_apart(a: str, b: str) -> bool:
    """True when one insertion, deletion, substitution or swap of neighbours turns `a` into `b` (a != b)."""
    if abs(len(a) - len(b)) > 1:
        return False
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    if len(a) == len(b):
        rest_a, rest_b = a[start + 1 :], b[start + 1 :]
        if rest_a == rest_b:  # one substitution
            return True
        swapped = start + 1 < len(a) and a[start] == b[start + 1] and a[start + 1] == b[start]
        return swapped and a[start + 2 :] == b[start + 2 :]
    if len(a) > len(b):
        a, b = b, a
    return a[start:] == b[start + 1 :]  # one letter inserted into the shorter


__all__ = [
    "IGNORED_FIELDS",
    "KAI_KEYS",
    "Notice",
    "UnknownField",
    "did_you_mean",
    "missing_priority_class",
    "near_miss_keys",
    "near_miss_keys_in",
    "notices",
    "omitted_queue_fields",
    "unknown_field",
]
