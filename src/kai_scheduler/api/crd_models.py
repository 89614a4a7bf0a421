"""The models of KAI's custom objects beyond what the scheduler reads (`objects.py`): what a real cluster's
Queue and PodGroup also carry (status, the PodGroup fields copied from batch Jobs) and the whole
BindRequest, with KAI's field names. `crds.py` generates the CustomResourceDefinitions from them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from kai_scheduler.api.objects import (
    K8sModel,
    ObjectMeta,
    PodGroup,
    PodGroupSpec,
    Quantity,
    Queue,
    ResourceList,
)


class Condition(K8sModel):
    """A condition in the standard Kubernetes shape (metav1.Condition)."""

    type: str = Field(min_length=1, description="Type of the condition, e.g. OverQuota or Orphan.")
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(default=None, ge=0)
    last_transition_time: datetime | None = None
    reason: str = ""
    message: str = ""


class AccountedUsage(K8sModel):
    """One AccountedResource in a queue's status: what the queue (with its subtree) holds, and its limit."""

    used: Quantity = Field(description="What the queue's running pods charge the resource.")
    limit: Quantity = Field(description="The queue's limit (its own entry, else the default); -1 unlimited.")


class QueueStatus(K8sModel):
    """Written by the queue controller: usage summed bottom-up through the queue tree."""

    conditions: list[Condition] = Field(default_factory=list)
    child_queues: list[str] = Field(default_factory=list, description="Names of the queue's children.")
    allocated: ResourceList = Field(default_factory=dict, description="Resources held by the queue's pods.")
    allocated_non_preemptible: ResourceList = Field(
        default_factory=dict, description="The part of `allocated` held by non-preemptible pods."
    )
    requested: ResourceList = Field(
        default_factory=dict, description="Resources asked for by the queue's pods, running or waiting."
    )
    fair_share: ResourceList = Field(
        default_factory=dict,
        description="The queue's fair share as the scheduler last computed it (not KAI's: written by "
        "this project's scheduler).",
    )
    accounted_resources: dict[str, AccountedUsage] = Field(
        default_factory=dict,
        description="Each AccountedResource's usage and limit, by name, as the scheduler last counted them "
        "(not KAI's: written by this project's scheduler).",
    )


class QueueObject(Queue):
    status: QueueStatus = Field(default_factory=QueueStatus)


class FullPodGroupSpec(PodGroupSpec):
    parallelism: int | None = Field(default=None, ge=0, description="Informational, from a batch Job.")
    completions: int | None = Field(default=None, ge=0, description="Informational, from a batch Job.")
    backoff_limit: int | None = Field(default=None, ge=0, description="Informational, from a batch Job.")


class PodGroupCondition(K8sModel):
    type: str = Field(min_length=1)
    status: Literal["True", "False", "Unknown"]
    transition_id: str = Field(default="", alias="transitionID")
    last_transition_time: datetime | None = None
    reason: str = ""
    message: str = ""


class QueueDetails(K8sModel):
    """The queue's numbers at the time the job was found unschedulable."""

    name: str = ""
    guaranteed: ResourceList = Field(default_factory=dict)
    deserved: ResourceList = Field(default_factory=dict)
    used: ResourceList = Field(default_factory=dict)
    max_allowed: ResourceList = Field(default_factory=dict)


class UnschedulableExplanationDetails(K8sModel):
    queue_details: QueueDetails | None = None


class UnschedulableExplanation(K8sModel):
    reason: str = Field(default="", description="NonPreemptibleOverQuota, OverLimit, QueueDoesNotExist, ...")
    message: str = ""
    details: UnschedulableExplanationDetails | None = None


class SchedulingCondition(K8sModel):
    """Why the job could not be scheduled on a node pool, as the scheduler last saw it."""

    type: str = Field(min_length=1, description="UnschedulableOnNodePool.")
    node_pool: str
    reason: str = ""
    message: str = ""
    transition_id: str = Field(default="", alias="transitionID")
    last_transition_time: datetime | None = None
    status: Literal["True", "False", "Unknown"] | None = None
    reasons: list[UnschedulableExplanation] = Field(default_factory=list)


class PodGroupResourcesStatus(K8sModel):
    allocated: ResourceList = Field(default_factory=dict)
    allocated_non_preemptible: ResourceList = Field(default_factory=dict)
    requested: ResourceList = Field(default_factory=dict)


class PodGroupStatus(K8sModel):
    """Written by the scheduler (scheduling conditions) and the pod group controller (the rest)."""

    phase: str = ""
    conditions: list[PodGroupCondition] = Field(default_factory=list)
    running: int = Field(default=0, ge=0)
    succeeded: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    pending: int = Field(default=0, ge=0)
    scheduling_conditions: list[SchedulingCondition] = Field(default_factory=list)
    resources_status: PodGroupResourcesStatus = Field(default_factory=PodGroupResourcesStatus)


class PodGroupObject(PodGroup):
    spec: FullPodGroupSpec = Field(default_factory=FullPodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)


class ReceivedGPU(K8sModel):
    """The GPUs a pod receives: `count` devices, each `portion` of a GPU (formatted `%.2f`)."""

    count: int = Field(default=0, ge=0)
    portion: str = ""


class ResourceClaimAllocation(K8sModel):
    name: str = Field(min_length=1, description="The pod's resource claim name.")
    allocation: dict[str, Any] | None = Field(
        default=None, description="A resource.k8s.io AllocationResult, passed through unchanged."
    )


class ExtendedResourceClaimAllocation(K8sModel):
    """The claim for a pod's DRA-backed extended resources (KEP-5004, KAI v0.17): the binder creates it
    with `deviceRequests`, writes `allocation` and names it in the pod's status with `containerMappings`."""

    allocation: dict[str, Any] | None = Field(
        default=None, description="A resource.k8s.io AllocationResult, passed through unchanged."
    )
    device_requests: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The claim's spec.devices.requests (resource.k8s.io DeviceRequests).",
    )
    container_mappings: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Which request serves each container's extended resource (containerName, resourceName, "
        "requestName).",
    )


class NUMAZonePlacement(K8sModel):
    """What a pod takes of one NUMA zone of its node (KAI v0.16)."""

    zone: str = Field(description="The zone, as the node's NodeResourceTopology names it.")
    amount: ResourceList = Field(description="The amounts the pod takes in that zone.")


class BindRequestSpec(K8sModel):
    pod_name: str = Field(default="", description="The pod to bind (same namespace as the BindRequest).")
    selected_node: str = Field(default="", description="The node the scheduler chose.")
    received_resource_type: Literal["Regular", "Fraction", "MigInstance"] | None = Field(
        default=None, description="Regular (whole GPUs or none), Fraction (shared GPU) or MigInstance."
    )
    selected_gpu_groups: list[str] = Field(
        default_factory=list, alias="selectedGPUGroups", description="Shared GPU groups, for fractions."
    )
    received_gpu: ReceivedGPU | None = Field(default=None, alias="receivedGPU")
    resource_claim_allocations: list[ResourceClaimAllocation] = Field(default_factory=list)
    extended_resource_claim_allocation: ExtendedResourceClaimAllocation | None = None
    predicted_numa_zones: list[NUMAZonePlacement] = Field(
        default_factory=list,
        alias="predictedNUMAZones",
        description="The NUMA zones the scheduler predicts the pod takes on the selected node.",
    )
    backoff_limit: int | None = Field(default=None, ge=0, description="Bind attempts before giving up.")


class BindRequestStatus(K8sModel):
    phase: Literal["Pending", "Succeeded", "Failed"] | None = None
    reason: str = ""
    failed_attempts: int = Field(default=0, ge=0)


class BindRequest(K8sModel):
    """The scheduler's request to bind one pod (name = the pod's name), carried out by the binder."""

    api_version: Literal["scheduling.run.ai/v1alpha2"] = "scheduling.run.ai/v1alpha2"
    kind: Literal["BindRequest"] = "BindRequest"
    metadata: ObjectMeta
    spec: BindRequestSpec = Field(default_factory=BindRequestSpec)
    status: BindRequestStatus = Field(default_factory=BindRequestStatus)
