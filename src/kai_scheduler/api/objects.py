"""The Kubernetes and KAI objects the scheduler reads, as typed, validated models.

Each model mirrors the part of the real object's structure that scheduling needs, with the real
camelCase field names, so a validation error's location is the manifest's own path
(`spec.containers[0].resources.requests.cpu`). Fields the scheduler does not read are ignored, so
any manifest written for a real cluster loads unchanged.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer
from pydantic.alias_generators import to_camel

from kai_scheduler.api.durations import parse_go_duration
from kai_scheduler.api.quantity import parse_quantity, quantity_text

Quantity = Annotated[
    Fraction, BeforeValidator(parse_quantity), PlainSerializer(quantity_text, return_type=str)
]
"""A Kubernetes quantity (`500m`, `1Gi`, `2e3`), held exactly; dumped as Kubernetes writes it (`500m`)."""

ResourceList = dict[str, Quantity]


class K8sModel(BaseModel):
    """Base of every model: camelCase names, unknown fields ignored, immutable once loaded."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        arbitrary_types_allowed=True,
        defer_build=True,
    )


# --- metadata -----------------------------------------------------------------------------------


class OwnerReference(K8sModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False


class ObjectMeta(K8sModel):
    name: str = Field(min_length=1)
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    owner_references: list[OwnerReference] = Field(default_factory=list)
    generation: int = 0


# --- selectors, affinity, taints ----------------------------------------------------------------

NodeSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
LabelSelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class NodeSelectorRequirement(K8sModel):
    key: str
    operator: NodeSelectorOperator
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(K8sModel):
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class NodeSelector(K8sModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(default_factory=list)


class PreferredSchedulingTerm(K8sModel):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )


class LabelSelectorRequirement(K8sModel):
    key: str
    operator: LabelSelectorOperator
    values: list[str] = Field(default_factory=list)


class LabelSelector(K8sModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class PodAffinityTerm(K8sModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: str = Field(min_length=1)


class WeightedPodAffinityTerm(K8sModel):
    weight: int = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list
    )


class Affinity(K8sModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(K8sModel):
    key: str
    value: str = ""
    effect: TaintEffect


class Toleration(K8sModel):
    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None


# --- Node ---------------------------------------------------------------------------------------


class NodeSpec(K8sModel):
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: bool = False


class NodeCondition(K8sModel):
    type: str = ""
    status: str = ""


class NodeStatus(K8sModel):
    allocatable: ResourceList = Field(default_factory=dict)
    capacity: ResourceList = Field(default_factory=dict)
    conditions: list[NodeCondition] = Field(default_factory=list)

    @property
    def ready(self) -> bool:
        """A node is ready unless its `Ready` condition says otherwise (a manifest without conditions, as
        simulator input usually is, describes a ready node)."""
        return all(c.status == "True" for c in self.conditions if c.type == "Ready")


class Node(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


# --- Pod ----------------------------------------------------------------------------------------


class ResourceRequirements(K8sModel):
    requests: ResourceList = Field(default_factory=dict)
    limits: ResourceList = Field(default_factory=dict)

    def effective_requests(self) -> dict[str, Fraction]:
        """Requests, with limits standing in for the resources that have no request (as Kubernetes does)."""
        merged = dict(self.limits)
        merged.update(self.requests)
        return merged


class ContainerPort(K8sModel):
    """A port a container exposes; one with a `hostPort` also takes that port on the node (Kubernetes'
    NodePorts filter keeps two pods off a node where their host ports would clash)."""

    container_port: int = Field(default=0, ge=0, le=65535)
    host_port: int = Field(default=0, ge=0, le=65535)  # 0: none
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: str = Field(default="", alias="hostIP")
    name: str = ""


class ConfigMapRef(K8sModel):
    """A ConfigMap a pod reads (a volume, a projected source, `envFrom` or an env var's `configMapKeyRef`);
    one that is not `optional` must exist for the pod to be scheduled (KAI's ConfigMap predicate)."""

    name: str = ""
    optional: bool | None = None


class EnvVarSource(K8sModel):
    config_map_key_ref: ConfigMapRef | None = None


class EnvVar(K8sModel):
    name: str = ""
    value_from: EnvVarSource | None = None


class EnvFromSource(K8sModel):
    config_map_ref: ConfigMapRef | None = None


class VolumeMount(K8sModel):
    name: str = ""


class Container(K8sModel):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = Field(default_factory=list)
    # `Always` on an init container makes it a sidecar: it keeps running beside the main containers.
    restart_policy: str | None = None
    # Tuples: the empty one is shared, and most of the many pods a cluster holds have none of these.
    env: tuple[EnvVar, ...] = ()
    env_from: tuple[EnvFromSource, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()


class PersistentVolumeClaimVolumeSource(K8sModel):
    claim_name: str = Field(min_length=1)
    read_only: bool = False


class VolumeProjection(K8sModel):
    config_map: ConfigMapRef | None = None


class ProjectedVolumeSource(K8sModel):
    sources: list[VolumeProjection] = Field(default_factory=list)


class Volume(K8sModel):
    """A pod volume, as far as scheduling reads it: the ConfigMaps it needs and the claim it mounts."""

    name: str = ""
    config_map: ConfigMapRef | None = None
    projected: ProjectedVolumeSource | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None


class PodSchedulingGate(K8sModel):
    name: str = ""


PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


class PodResourceClaim(K8sModel):
    """A claim the pod uses (DRA): an existing ResourceClaim by name (shared), or one made for the pod from
    a ResourceClaimTemplate (by Kubernetes' resourceclaim controller; its name is then in the pod's
    `status.resourceClaimStatuses`). Exactly one of the two is set (checked in `manifests.py`)."""

    name: str = Field(min_length=1)
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(K8sModel):
    scheduler_name: str = "default-scheduler"
    node_name: str | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ResourceList = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    # A pod with gates is not scheduled until they are all removed (KAI's "Gated" status).
    scheduling_gates: list[PodSchedulingGate] = Field(default_factory=list)
    # On the node's network, every container port is a host port (the API server defaults `hostPort`).
    host_network: bool = False
    resource_claims: list[PodResourceClaim] = Field(default_factory=list)
    volumes: tuple[Volume, ...] = ()
    ephemeral_containers: tuple[Container, ...] = ()


class PodResourceClaimStatus(K8sModel):
    """The ResourceClaim made for one of the pod's template claims (`name`: the pod's claim name)."""

    name: str = Field(min_length=1)
    resource_claim_name: str | None = None


class ContainerExtendedResourceRequest(K8sModel):
    """Which request of a pod's extended-resource claim serves a container's extended resource (KEP-5004)."""

    container_name: str = Field(min_length=1)
    resource_name: str = Field(min_length=1)
    request_name: str = Field(min_length=1)


class PodExtendedResourceClaimStatus(K8sModel):
    """The claim a binder made for a pod's DRA-backed extended resources, and its container mappings."""

    resource_claim_name: str = Field(min_length=1)
    request_mappings: list[ContainerExtendedResourceRequest] = Field(default_factory=list)


class PodStatus(K8sModel):
    phase: PodPhase | None = None
    resource_claim_statuses: list[PodResourceClaimStatus] = Field(default_factory=list)
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None


class Namespaced(K8sModel):
    """An object that lives in a namespace (`default` when the manifest names none)."""

    metadata: ObjectMeta

    @property
    def namespace(self) -> str:
        return namespace_of(self.metadata)

    @property
    def key(self) -> str:
        # `metadata` read once, and no `namespace` property asked: every read of a model's attribute goes
        # through the hook pydantic's `__getattr__` puts on its class (a few hundred instructions, a
        # property's own reads included), and this is asked of every pod.
        metadata = self.metadata
        return f"{namespace_of(metadata)}/{metadata.name}"


def namespace_of(metadata: ObjectMeta) -> str:
    """The namespace of the object with this `metadata` (`Namespaced.namespace`, for a caller that holds
    the metadata already)."""
    return metadata.namespace or "default"


class Pod(Namespaced):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    def resource_requests(self) -> dict[str, Fraction]:
        """What the pod needs on its node, by the Kubernetes rule: the main containers plus the sidecars
        (init containers with `restartPolicy: Always`), or, if larger, any init container together with
        the sidecars started before it; plus the pod overhead."""
        sidecars: dict[str, Fraction] = {}
        init_peak: dict[str, Fraction] = {}
        for container in self.spec.init_containers:
            requests = container.resources.effective_requests()
            if container.restart_policy == "Always":
                _add_into(sidecars, requests)
                _max_into(init_peak, sidecars)
            else:
                running = dict(sidecars)
                _add_into(running, requests)
                _max_into(init_peak, running)
        total: dict[str, Fraction] = dict(sidecars)
        for container in self.spec.containers:
            _add_into(total, container.resources.effective_requests())
        _max_into(total, init_peak)
        _add_into(total, self.spec.overhead)
        return total


def _add_into(total: dict[str, Fraction], amounts: dict[str, Fraction]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, Fraction(0)) + amount


def _max_into(total: dict[str, Fraction], amounts: dict[str, Fraction]) -> None:
    for name, amount in amounts.items():
        if amount > total.get(name, Fraction(0)):
            total[name] = amount


# --- Queue (scheduling.run.ai/v2) ---------------------------------------------------------------


class QueueResource(K8sModel):
    """One resource of a queue. `-1` is unlimited; a limit of 0 allows nothing. A field left out is 0: a
    limit left out blocks the resource."""

    # KAI's CRD has no defaults (`pkg/apis/scheduling/v2/resources.go`): it reads a field left out as 0.
    # `strict.omitted_queue_fields` warns where that changes the answer.
    quota: float = 0.0
    limit: float = 0.0
    over_quota_weight: float = 0.0


def is_unlimited(amount: float) -> bool:
    """Whether a queue's quota or limit (or a number derived from one) is unlimited. KAI writes -1; every
    negative amount reads so here, so one rule holds wherever a queue's amounts are read."""
    return amount < 0


class QueueResources(K8sModel):
    gpu: QueueResource = Field(default_factory=QueueResource)
    cpu: QueueResource = Field(default_factory=QueueResource)
    memory: QueueResource = Field(default_factory=QueueResource)


class QueueAccountedResource(K8sModel):
    """A limit on one `AccountedResource` (KAI's phase-1 design): -1 is unlimited."""

    resource_ref: str = Field(min_length=1, description="The name of a cluster-scoped AccountedResource.")
    limit: Quantity = Field(description="The most the queue (with its subtree) may hold; -1 is unlimited.")


class QueueSpec(K8sModel):
    display_name: str = ""
    parent_queue: str = ""
    priority: int | None = None
    resources: QueueResources = Field(default_factory=QueueResources)
    preempt_min_runtime: str | None = None
    reclaim_min_runtime: str | None = None
    # Additive to `resources`: both limits hold where both apply.
    accounted_resources: list[QueueAccountedResource] = Field(default_factory=list)
    # Queue admission gating's per-queue opt-in (`api.admission_gate`): its pods wait at the gate until
    # the queue's quota admits them, when the feature is switched on cluster-wide.
    admission_gating: bool | None = None


class Queue(K8sModel):
    api_version: Literal["scheduling.run.ai/v2"] = "scheduling.run.ai/v2"
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta
    spec: QueueSpec = Field(default_factory=QueueSpec)


# --- AccountedResource (scheduling.run.ai/v1alpha1) ---------------------------------------------
# KAI's phase-1 design (docs/developer/designs/accounted-resource-api.md): how to recognise and count one
# logical resource that queues may limit (`QueueSpec.accounted_resources`). The whole API of the design, so
# that an object written for KAI loads unchanged; `accounted_resources.py` has the webhook's rules.


class AccountedResourceDefaults(K8sModel):
    limit: Quantity | None = Field(
        default=None,
        description="A queue's limit when it names no limit of its own; -1 (unset) is unlimited.",
    )


class DRASource(K8sModel):
    device_class_name: str = Field(min_length=1, description="The DRA DeviceClass whose devices count.")


class PodAnnotationSource(K8sModel):
    key: str = Field(min_length=1, description="The pod annotation holding the amount.")
    unit: str = Field(default="", description="The amount's unit (Mi, Gi, percent, ...); none: a number.")


class DRAAttributeValue(K8sModel):
    """One of a device attribute's typed values (as resource.k8s.io writes them)."""

    string: str | None = None
    # `int` and `bool` in the API: named so here to keep the builtins usable in the class.
    integer: int | None = Field(default=None, alias="int")
    boolean: bool | None = Field(default=None, alias="bool")
    version: str | None = None


class DRAMatch(K8sModel):
    device_attributes: dict[str, DRAAttributeValue] = Field(default_factory=dict)


class AccountedResourceMatch(K8sModel):
    node_labels: dict[str, str] = Field(
        default_factory=dict, description="The source counts only on nodes with all of these labels."
    )
    dra: DRAMatch | None = None


class DRASelectedCapacityQuantity(K8sModel):
    capacity_name: str = Field(min_length=1)


class DRAOpaqueConfigFieldQuantity(K8sModel):
    driver: str = Field(min_length=1)
    path: str = Field(min_length=1)
    unit: str = ""


class DRAQuantitySource(K8sModel):
    selected_capacity: DRASelectedCapacityQuantity | None = None
    opaque_config_field: DRAOpaqueConfigFieldQuantity | None = None


class PodAnnotationQuantitySource(K8sModel):
    unit: str = ""


class AccountedResourceQuantity(K8sModel):
    dra: DRAQuantitySource | None = None
    pod_annotation: PodAnnotationQuantitySource | None = None


class AccountedResourceSource(K8sModel):
    """Exactly one of `resourceName`, `dra` and `podAnnotation`; `match` says where it applies."""

    resource_name: str | None = Field(
        default=None,
        min_length=1,
        description="A pod resource request (nvidia.com/gpu, vpc.amazonaws.com/efa).",
    )
    dra: DRASource | None = None
    pod_annotation: PodAnnotationSource | None = None
    match: AccountedResourceMatch | None = None
    quantity: AccountedResourceQuantity | None = None


class AccountedResourceSpec(K8sModel):
    defaults: AccountedResourceDefaults | None = None
    sources: list[AccountedResourceSource] = Field(min_length=1)


class AccountedResource(K8sModel):
    api_version: Literal["scheduling.run.ai/v1alpha1"] = "scheduling.run.ai/v1alpha1"
    kind: Literal["AccountedResource"] = "AccountedResource"
    metadata: ObjectMeta
    spec: AccountedResourceSpec


# --- PodGroup (scheduling.run.ai/v2alpha2) ------------------------------------------------------


class TopologyConstraint(K8sModel):
    topology: str = ""
    required_topology_level: str = ""
    preferred_topology_level: str = ""


_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class SubGroup(K8sModel):
    name: str = Field(min_length=1, pattern=_DNS_LABEL)
    # A leaf's gang size (0: every pod elastic); admission requires it on a leaf and refuses it on a
    # sub-group with children. Unset, the scheduler reads 0 (KAI v0.15).
    min_member: int | None = Field(default=None, ge=0)
    # How many direct children must be satisfied (0: the whole subtree is optional); unset, all of them.
    # Only on a sub-group with children.
    min_sub_group: int | None = Field(default=None, ge=0)
    parent: Annotated[str, Field(pattern=_DNS_LABEL)] | None = None
    topology_constraint: TopologyConstraint | None = None


def _go_duration(text: str) -> str:
    parse_go_duration(text)  # a metav1.Duration: KAI cannot read the PodGroup otherwise
    return text


class PodGroupSpec(K8sModel):
    # Unset, the scheduler reads 1 for a PodGroup without sub-groups (KAI v0.15 made it a pointer).
    min_member: int | None = Field(default=None, ge=1)
    # How many direct sub-groups must be satisfied; unset, all of them (not together with minMember).
    min_sub_group: int | None = Field(default=None, ge=1)
    queue: str = ""
    priority_class_name: str = ""
    preemptibility: Literal["", "preemptible", "non-preemptible"] = ""
    topology_constraint: TopologyConstraint | None = None
    sub_groups: list[SubGroup] = Field(default_factory=list)
    mark_unschedulable: bool | None = None
    scheduling_backoff: int | None = None
    # KAI v0.17: how long the job must wait, from its creation or last eviction, before it may evict others.
    preemption_delay: Annotated[str, AfterValidator(_go_duration)] | None = None
    # KAI v0.17: how long a gang may run below its minMember before it is evicted (negative: never);
    # unset, the scheduler's default.
    staleness_grace_period: Annotated[str, AfterValidator(_go_duration)] | None = None

    @property
    def gang_min_member(self) -> int:
        """The minMember the scheduler reads: unset is 1 (KAI's default pod set)."""
        return 1 if self.min_member is None else self.min_member


class PodGroup(Namespaced):
    api_version: Literal["scheduling.run.ai/v2alpha2"] = "scheduling.run.ai/v2alpha2"
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)


# --- PriorityClass (scheduling.k8s.io/v1) -------------------------------------------------------


class PriorityClass(K8sModel):
    api_version: Literal["scheduling.k8s.io/v1"] = "scheduling.k8s.io/v1"
    kind: Literal["PriorityClass"] = "PriorityClass"
    metadata: ObjectMeta
    value: int
    global_default: bool = False


# --- Namespace (v1) ------------------------------------------------------------------------------


class Namespace(K8sModel):
    """Only its labels matter here: pod (anti-)affinity's namespaceSelector is matched against them."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta


# --- Topology (kai.scheduler/v1alpha1) ----------------------------------------------------------


# A label key (an optional DNS-subdomain prefix and "/", then a name), as KAI v0.17's Topology CRD has it.
LABEL_KEY_PATTERN: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


class TopologyLevel(K8sModel):
    node_label: str = Field(min_length=1)
    # A name workloads may give instead of the node label (KAI v0.17, #1788): unique in the Topology, no
    # level's node label; it may be edited, the node labels may not (`api.manifests.check_topology_update`).
    alias: str | None = Field(default=None, min_length=1, max_length=316, pattern=LABEL_KEY_PATTERN)


class TopologySpec(K8sModel):
    levels: list[TopologyLevel] = Field(min_length=1, max_length=16)


class Topology(K8sModel):
    api_version: Literal["kai.scheduler/v1alpha1"] = "kai.scheduler/v1alpha1"
    kind: Literal["Topology"] = "Topology"
    metadata: ObjectMeta
    spec: TopologySpec


# --- Dynamic Resource Allocation (resource.k8s.io/v1) --------------------------------------------
#
# Devices are published per driver in ResourceSlices, selected through DeviceClasses and asked for in
# ResourceClaims (directly, or made per pod from ResourceClaimTemplates). Selectors are CEL expressions
# (`api/cel.py` evaluates them as Kubernetes does). Opaque driver parameters pass through untouched.

DRA_API_VERSION: Final = "resource.k8s.io/v1"


class DeviceAttribute(K8sModel):
    """One typed attribute value of a device: exactly one of int, bool, string and version."""

    int_value: int | None = Field(default=None, alias="int")
    bool_value: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None


class DeviceCapacity(K8sModel):
    value: Quantity


class Device(K8sModel):
    """One device of a ResourceSlice. With the slice's `perDeviceNodeSelection`, each device says which
    nodes reach it (exactly one of nodeName, nodeSelector, allNodes)."""

    name: str = Field(min_length=1)
    attributes: dict[str, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = Field(default_factory=dict)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None


class ResourcePool(K8sModel):
    name: str = Field(min_length=1)
    generation: int = Field(default=0, ge=0)
    resource_slice_count: int = Field(default=1, ge=1)


class ResourceSliceSpec(K8sModel):
    driver: str = Field(min_length=1)
    pool: ResourcePool
    # Which nodes reach the slice's devices: exactly one of these (or perDeviceNodeSelection).
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: list[Device] = Field(default_factory=list)


class ResourceSlice(K8sModel):
    api_version: Literal["resource.k8s.io/v1"] = DRA_API_VERSION
    kind: Literal["ResourceSlice"] = "ResourceSlice"
    metadata: ObjectMeta
    spec: ResourceSliceSpec


class CELDeviceSelector(K8sModel):
    expression: str = Field(min_length=1)


class DeviceSelector(K8sModel):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(K8sModel):
    driver: str = Field(min_length=1)
    parameters: dict[str, Any] = Field(default_factory=dict)


class DeviceClassConfiguration(K8sModel):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(K8sModel):
    selectors: list[DeviceSelector] = Field(default_factory=list)
    config: list[DeviceClassConfiguration] = Field(default_factory=list)
    # KEP-5004: pods asking for this extended resource get it from the class's devices.
    extended_resource_name: str | None = None


class DeviceClass(K8sModel):
    api_version: Literal["resource.k8s.io/v1"] = DRA_API_VERSION
    kind: Literal["DeviceClass"] = "DeviceClass"
    metadata: ObjectMeta
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


AllocationMode = Literal["ExactCount", "All"]


class ExactDeviceRequest(K8sModel):
    """`count` devices of the class (ExactCount; the API server defaults it to 1), or all matching ones on
    the node (All)."""

    device_class_name: str = Field(min_length=1)
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: AllocationMode = "ExactCount"
    count: int = Field(default=1, ge=1)
    admin_access: bool | None = None


class DeviceSubRequest(K8sModel):
    name: str = Field(min_length=1)
    device_class_name: str = Field(min_length=1)
    selectors: list[DeviceSelector] = Field(default_factory=list)
    allocation_mode: AllocationMode = "ExactCount"
    count: int = Field(default=1, ge=1)


class DeviceRequest(K8sModel):
    name: str = Field(min_length=1)
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = Field(default_factory=list)


class DeviceConstraint(K8sModel):
    requests: list[str] = Field(default_factory=list)
    match_attribute: str | None = None


class DeviceClaimConfiguration(K8sModel):
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(K8sModel):
    requests: list[DeviceRequest] = Field(default_factory=list)
    constraints: list[DeviceConstraint] = Field(default_factory=list)
    config: list[DeviceClaimConfiguration] = Field(default_factory=list)


class ResourceClaimSpec(K8sModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(K8sModel):
    request: str = Field(min_length=1)
    driver: str = Field(min_length=1)
    pool: str = Field(min_length=1)
    device: str = Field(min_length=1)


class DeviceAllocationConfiguration(K8sModel):
    source: Literal["FromClass", "FromClaim"]
    requests: list[str] = Field(default_factory=list)
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(K8sModel):
    results: list[DeviceRequestAllocationResult] = Field(default_factory=list)
    config: list[DeviceAllocationConfiguration] = Field(default_factory=list)


class AllocationResult(K8sModel):
    """Which devices a claim got, and which nodes can use them (none: every node)."""

    devices: DeviceAllocationResult = Field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None


class ResourceClaimConsumerReference(K8sModel):
    api_group: str = ""
    resource: str = Field(min_length=1)
    name: str = Field(min_length=1)
    uid: str = ""


class ResourceClaimStatus(K8sModel):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = Field(default_factory=list)


class ResourceClaim(Namespaced):
    api_version: Literal["resource.k8s.io/v1"] = DRA_API_VERSION
    kind: Literal["ResourceClaim"] = "ResourceClaim"
    metadata: ObjectMeta
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = Field(default_factory=ResourceClaimStatus)


class ClaimTemplateMeta(K8sModel):
    """The metadata a template gives every claim made from it."""

    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ResourceClaimTemplateSpec(K8sModel):
    metadata: ClaimTemplateMeta = Field(default_factory=ClaimTemplateMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(K8sModel):
    api_version: Literal["resource.k8s.io/v1"] = DRA_API_VERSION
    kind: Literal["ResourceClaimTemplate"] = "ResourceClaimTemplate"
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace or 'default'}/{self.metadata.name}"


DraObject = ResourceClaim | ResourceClaimTemplate | ResourceSlice | DeviceClass


# --- Storage and ConfigMaps (v1, storage.k8s.io/v1): what the volume-binding and ConfigMap predicates read


class ConfigMap(Namespaced):
    api_version: Literal["v1"] = "v1"
    kind: Literal["ConfigMap"] = "ConfigMap"
    metadata: ObjectMeta


class PersistentVolumeClaimSpec(K8sModel):
    storage_class_name: str | None = None
    volume_name: str = ""
    access_modes: list[str] = Field(default_factory=list)
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)


class PersistentVolumeClaim(Namespaced):
    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)


class ObjectReference(K8sModel):
    namespace: str = ""
    name: str = ""
    uid: str = ""


class VolumeNodeAffinity(K8sModel):
    required: NodeSelector | None = None


class PersistentVolumeSpec(K8sModel):
    capacity: ResourceList = Field(default_factory=dict)
    storage_class_name: str = ""
    access_modes: list[str] = Field(default_factory=list)
    claim_ref: ObjectReference | None = None
    node_affinity: VolumeNodeAffinity | None = None


class PersistentVolume(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    metadata: ObjectMeta
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)


class TopologySelectorRequirement(K8sModel):
    key: str = Field(min_length=1)
    values: list[str] = Field(default_factory=list)


class TopologySelectorTerm(K8sModel):
    match_label_expressions: list[TopologySelectorRequirement] = Field(default_factory=list)


class StorageClass(K8sModel):
    api_version: Literal["storage.k8s.io/v1"] = "storage.k8s.io/v1"
    kind: Literal["StorageClass"] = "StorageClass"
    metadata: ObjectMeta
    provisioner: str = ""
    # The API server defaults it to Immediate.
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)


# --- disruption budgets (policy/v1) -------------------------------------------------------------

IntOrPercent = int | str
"""An IntOrString of a PodDisruptionBudget: a count, or a percentage such as `"50%"`."""


class PodDisruptionBudgetSpec(K8sModel):
    # None selects nothing; an empty selector selects every pod of the namespace (policy/v1).
    selector: LabelSelector | None = None
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None


class PodDisruptionBudgetStatus(K8sModel):
    observed_generation: int = 0
    disruptions_allowed: int | None = None


class PodDisruptionBudget(Namespaced):
    """What the victim search reads of a budget: which pods it covers and how many of them may go."""

    api_version: Literal["policy/v1"] = "policy/v1"
    kind: Literal["PodDisruptionBudget"] = "PodDisruptionBudget"
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus | None = None


# --- NodeResourceTopology (topology.node.k8s.io/v1alpha2): what the numa plugin reads ----------------


class NrtAttribute(K8sModel):
    name: str = ""
    value: str = ""


class NrtResourceInfo(K8sModel):
    """One resource of a zone: `available` is allocatable minus what running pods hold there."""

    name: str = Field(min_length=1)
    capacity: Quantity = Fraction(0)
    allocatable: Quantity = Fraction(0)
    available: Quantity = Fraction(0)


class NrtZone(K8sModel):
    name: str = Field(min_length=1)
    type: str = ""  # "Node" for a NUMA node; other levels (sockets, dies) are not modeled
    parent: str = ""
    attributes: list[NrtAttribute] = Field(default_factory=list)
    resources: list[NrtResourceInfo] = Field(default_factory=list)


class NodeResourceTopology(K8sModel):
    """A node's NUMA zones and its kubelet Topology Manager policy and scope, as an exporter (NFD's
    topology updater, the resource topology exporter) publishes them; named as its node."""

    api_version: Literal["topology.node.k8s.io/v1alpha2"] = "topology.node.k8s.io/v1alpha2"
    kind: Literal["NodeResourceTopology"] = "NodeResourceTopology"
    metadata: ObjectMeta
    # Deprecated by the API in favour of the attributes, still read when they name no policy.
    topology_policies: list[str] = Field(default_factory=list)
    zones: list[NrtZone] = Field(default_factory=list)
    attributes: list[NrtAttribute] = Field(default_factory=list)


StorageObject = ConfigMap | PersistentVolumeClaim | PersistentVolume | StorageClass
ApiObject = (
    Node
    | Pod
    | Queue
    | PodGroup
    | PriorityClass
    | Topology
    | DraObject
    | StorageObject
    | PodDisruptionBudget
    | Namespace
    | NodeResourceTopology
    | AccountedResource
)
