"""The pod grouper's decision: which PodGroup a pod belongs to. Pure: no API calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.controlplane.podgrouper._common import Context
from kai_scheduler.controlplane.podgrouper._kinds import grouper_for
from kai_scheduler.controlplane.podgrouper.owner_chain import grouping_index, owner_chain
from kai_scheduler.controlplane.podgrouper.plan import GrouperDefaults, PodGroupPlan

DEFAULT_GROUPER_DEFAULTS = GrouperDefaults()


def plan_pod_group(
    pod: Mapping[str, Any],
    owners: Sequence[Mapping[str, Any]],
    *,
    queue_label_key: str = c.QUEUE_LABEL,
    defaults: GrouperDefaults = DEFAULT_GROUPER_DEFAULTS,
) -> PodGroupPlan:
    """The PodGroup KAI's pod grouper would create for `pod`, given the objects up its owner chain
    (`owners`: the pod's controller, its controller's controller, ..., in any order).

    The pod is grouped by its top owner, passing over "skip top owner" kinds (TrainJob, Argo Workflow,
    ScheduledWorkflow, DynamoGraphDeployment); queue, priority class, preemptibility, topology, names,
    minMember and sub-groups follow KAI's rules for the top owner's kind, which docs/podgrouper.md lists.
    Raises `GroupingError`, one line naming the object and field, for anything missing or malformed."""
    chain = owner_chain(pod, owners)
    top = chain[grouping_index(chain)]
    ctx = Context(pod=chain[0], chain=chain, top=top, queue_label_key=queue_label_key, defaults=defaults)
    return grouper_for(top)(ctx)


def skips_pod_grouper(obj: Mapping[str, Any]) -> bool:
    """Whether the object (the pod or one of its owners) asks the pod grouper to leave its pods alone:
    `kai.scheduler/skip-podgrouper` set to exactly "true" (KAI's `shouldSkipPodGrouper`)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return isinstance(annotations, Mapping) and annotations.get(c.SKIP_PODGROUPER_ANNOTATION) == "true"
