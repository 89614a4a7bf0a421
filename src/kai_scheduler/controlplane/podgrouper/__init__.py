"""KAI's pod grouper, as pure decisions: from a pod and its owner chain to the PodGroup to create.

`plan_pod_group` is the entry point; docs/podgrouper.md lists the rules per workload kind.
"""

from kai_scheduler.controlplane.podgrouper.errors import GroupingError
from kai_scheduler.controlplane.podgrouper.grouper import (
    DEFAULT_GROUPER_DEFAULTS,
    plan_pod_group,
    skips_pod_grouper,
)
from kai_scheduler.controlplane.podgrouper.owner_chain import SKIP_TOP_OWNER_KINDS, owner_chain, top_owner
from kai_scheduler.controlplane.podgrouper.plan import (
    DroppedInput,
    GrouperDefaults,
    KindDefaults,
    PodGroupPlan,
    SubGroupPlan,
    TopologyConstraintPlan,
    pod_group_manifest,
)

__all__ = [
    "DEFAULT_GROUPER_DEFAULTS",
    "SKIP_TOP_OWNER_KINDS",
    "DroppedInput",
    "GrouperDefaults",
    "GroupingError",
    "KindDefaults",
    "PodGroupPlan",
    "SubGroupPlan",
    "TopologyConstraintPlan",
    "owner_chain",
    "plan_pod_group",
    "pod_group_manifest",
    "skips_pod_grouper",
    "top_owner",
]
