"""What the pod grouper decides: the PodGroup to create for a pod, and how the pod joins it.

`PodGroupPlan` is plain data; `pod_group_manifest` turns it into the `scheduling.run.ai/v2alpha2`
PodGroup object to create, and `PodGroupPlan.pod_patch` into the merge patch for the pod.
`GrouperDefaults` carries the grouper's settings, including KAI's per-kind defaults config map.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.controlplane.podgrouper.errors import GroupingError

PODGROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible")
NODE_POOL_LABEL_KEY = c.NODE_POOL_LABEL


@dataclass(frozen=True)
class TopologyConstraintPlan:
    """A topology constraint: the Topology CR's name and the node-label keys of the levels."""

    topology: str
    required_level: str | None = None
    preferred_level: str | None = None

    def to_manifest(self) -> dict[str, str]:
        out = {"topology": self.topology}
        if self.required_level:
            out["requiredTopologyLevel"] = self.required_level
        if self.preferred_level:
            out["preferredTopologyLevel"] = self.preferred_level
        return out


@dataclass(frozen=True)
class SubGroupPlan:
    """One sub-group of the PodGroup; `parent` names an enclosing sub-group (segments sit under one)."""

    name: str
    min_member: int
    parent: str | None = None
    topology_constraint: TopologyConstraintPlan | None = None
    # A sub-group with children: how many of them must be satisfied (KAI refuses minMember on it).
    min_sub_group: int | None = None

    def to_manifest(self, children: int = 0) -> dict[str, Any]:
        """Its manifest; one with `children` states `minSubGroup` (all of them unless set), as KAI's
        groupers write a parent sub-group."""
        out: dict[str, Any] = {"name": self.name}
        if self.min_sub_group is not None or children:
            out["minSubGroup"] = children if self.min_sub_group is None else self.min_sub_group
        else:
            out["minMember"] = self.min_member
        if self.parent:
            out["parent"] = self.parent
        if self.topology_constraint is not None:
            out["topologyConstraint"] = self.topology_constraint.to_manifest()
        return out


@dataclass(frozen=True)
class DroppedInput:
    """Input that KAI's pod grouper passes over without a word (a segment placement it cannot use): the
    PodGroup is made as KAI makes it, without that input, and both edges say so. `str()` is one line, as a
    `GroupingError`'s, naming the object and the key."""

    object_ref: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.object_ref}: {self.field}: {self.message}"


@dataclass(frozen=True)
class PodGroupPlan:
    """The PodGroup that the pod belongs to, and the sub-group label the pod should carry.

    `owner_reference` is the object the PodGroup is garbage-collected with (`controller: true`): the top
    owner, except for the kinds grouped per pod or per child object (docs/podgrouper.md).
    """

    name: str
    namespace: str
    min_member: int  # written unless `min_sub_group` is set (KAI: one or the other)
    queue: str
    priority_class_name: str
    preemptibility: str | None
    sub_groups: tuple[SubGroupPlan, ...]
    topology_constraint: TopologyConstraintPlan | None
    labels: dict[str, str]
    annotations: dict[str, str]
    owner_reference: dict[str, Any]
    pod_subgroup: str | None = None
    # `spec.stalenessGracePeriod` (a Go duration), from the `kai.scheduler/staleness-grace-period` annotation.
    staleness_grace_period: str | None = None
    # `spec.preemptionDelay` (a Go duration, not negative), from `kai.scheduler/preemption-delay`.
    preemption_delay: str | None = None
    # `spec.minSubGroup`: how many top-level sub-groups must be satisfied (a JobSet's replicated jobs).
    min_sub_group: int | None = None
    # What of the input the PodGroup was made without, as KAI makes it (the edges warn of each).
    dropped: tuple[DroppedInput, ...] = ()

    def pod_annotations(self) -> dict[str, str]:
        """The annotations the pod grouper puts on the pod."""
        return {c.POD_GROUP_ANNOTATION: self.name}

    def pod_labels(self) -> dict[str, str]:
        """The labels the pod grouper puts on the pod (the sub-group, when the PodGroup has sub-groups)."""
        return {c.SUBGROUP_LABEL: self.pod_subgroup} if self.pod_subgroup else {}

    def pod_patch(self) -> dict[str, Any]:
        """A JSON merge patch for the pod: `pod-group-name`, and the sub-group label when there is one."""
        metadata: dict[str, Any] = {"annotations": self.pod_annotations()}
        labels = self.pod_labels()
        if labels:
            metadata["labels"] = labels
        return {"metadata": metadata}


def pod_group_manifest(plan: PodGroupPlan) -> dict[str, Any]:
    """The `scheduling.run.ai/v2alpha2` PodGroup object to create for `plan`."""
    metadata: dict[str, Any] = {
        "name": plan.name,
        "namespace": plan.namespace,
        "ownerReferences": [dict(plan.owner_reference)],
    }
    if plan.labels:
        metadata["labels"] = dict(plan.labels)
    if plan.annotations:
        metadata["annotations"] = dict(plan.annotations)
    spec: dict[str, Any] = (
        {"minSubGroup": plan.min_sub_group}
        if plan.min_sub_group is not None
        else {"minMember": plan.min_member}
    )
    spec.update(queue=plan.queue, priorityClassName=plan.priority_class_name)
    if plan.preemptibility:
        spec["preemptibility"] = plan.preemptibility
    if plan.staleness_grace_period is not None:
        spec["stalenessGracePeriod"] = plan.staleness_grace_period
    if plan.preemption_delay is not None:
        spec["preemptionDelay"] = plan.preemption_delay
    if plan.topology_constraint is not None:
        spec["topologyConstraint"] = plan.topology_constraint.to_manifest()
    if plan.sub_groups:
        children = Counter(group.parent for group in plan.sub_groups if group.parent)
        spec["subGroups"] = [group.to_manifest(children[group.name]) for group in plan.sub_groups]
    return {"apiVersion": PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": metadata, "spec": spec}


@dataclass(frozen=True)
class KindDefaults:
    """Defaults for one workload kind, as in KAI's pod-grouper defaults config map."""

    priority_class_name: str | None = None
    preemptibility: str | None = None

    def __post_init__(self) -> None:
        value = self.preemptibility
        if value is not None and value not in PREEMPTIBILITY_VALUES:
            raise GroupingError(
                f"must be one of {', '.join(PREEMPTIBILITY_VALUES)}, got {value!r}",
                object_ref="pod grouper defaults",
                field="preemptibility",
            )


@dataclass(frozen=True)
class GrouperDefaults:
    """The pod grouper's settings.

    `kinds` maps `(api group, kind)` of a top owner (`("apps", "Deployment")`, `("", "Pod")`) to defaults
    that replace the grouper's built-in per-kind priority class and add a preemptibility; labels on the
    workload still win over them. `known_priority_classes`, when given, makes the grouper skip priority
    class names that are not in it (as if not set), the way KAI ignores a class that does not exist.
    """

    default_queue: str = c.DEFAULT_QUEUE
    node_pool_label_key: str = NODE_POOL_LABEL_KEY
    kinds: Mapping[tuple[str, str], KindDefaults] = field(default_factory=lambda: MappingProxyType({}))
    known_priority_classes: frozenset[str] | None = None

    @classmethod
    def from_types_json(cls, text: str, **settings: Any) -> GrouperDefaults:
        """Read KAI's defaults config map entry `types`:
        `[{"typeName": ..., "group": ..., "priorityName": ..., "preemptibility": ...}]`."""
        where = "pod grouper defaults"
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as err:
            raise GroupingError(f"not valid JSON: {err.msg} (line {err.lineno})", object_ref=where) from None
        if not isinstance(entries, list):
            raise GroupingError(
                "expected a list of {typeName, group, priorityName, preemptibility}", object_ref=where
            )
        kinds: dict[tuple[str, str], KindDefaults] = {}
        for i, entry in enumerate(entries):
            at = f"types[{i}]"
            if not isinstance(entry, dict):
                raise GroupingError("expected an object", object_ref=where, field=at)
            values: dict[str, str | None] = {}
            for key in ("typeName", "group", "priorityName", "preemptibility"):
                value = entry.get(key)
                if value is not None and not isinstance(value, str):
                    raise GroupingError(
                        f"expected a string, got {value!r}", object_ref=where, field=f"{at}.{key}"
                    )
                values[key] = value or None
            kind = values["typeName"]
            if kind is None:
                raise GroupingError("is missing", object_ref=where, field=f"{at}.typeName")
            preemptibility = values["preemptibility"]
            if preemptibility is not None and preemptibility not in PREEMPTIBILITY_VALUES:
                raise GroupingError(
                    f"must be one of {', '.join(PREEMPTIBILITY_VALUES)}, got {preemptibility!r}",
                    object_ref=where,
                    field=f"{at}.preemptibility",
                )
            kinds[(values["group"] or "", kind)] = KindDefaults(
                values["priorityName"], values["preemptibility"]
            )
        return cls(kinds=MappingProxyType(kinds), **settings)
