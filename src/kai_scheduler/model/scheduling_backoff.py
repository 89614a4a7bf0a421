"""A PodGroup's `schedulingBackoff` and `markUnschedulable`, as KAI reads them.

KAI's scheduler writes a `schedulingConditions` entry (type `UnschedulableOnNodePool`, the PodGroup's node
pool) on every PodGroup that ends a cycle with pending pods and nothing placed. With `schedulingBackoff`
left out or -1 that is all; with any other value (KAI supports 1) a PodGroup whose latest condition (the
highest `transitionID`) names its own node pool is no longer the scheduler's at all: the cache leaves it
out of the session (`isPodGroupUpForScheduler`), so it is neither tried nor counted in its queue, until
its node-pool label changes or the condition goes. With `schedulingBackoff: 1` the messages written on
the PodGroup and its pods start with "Node-Pool '<pool>': " (`addNodePoolPrefixIfNeeded`).
`markUnschedulable: false` keeps the scheduler from setting the pods' `PodScheduled` condition (the
event is still recorded); left out it is true. Sources: pkg/scheduler/utils/pod_group_utils.go,
pkg/scheduler/cache/cluster_info/cluster_info.go, pkg/scheduler/cache/status_updater/
default_status_updater.go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from kai_scheduler.api.objects import PodGroup
from kai_scheduler.api.reasons import WaitReason, code_of
from kai_scheduler.model.partition import pool_of

NO_SCHEDULING_BACKOFF: Final = -1  # retry forever (the default)
SINGLE_SCHEDULING_BACKOFF: Final = 1


def scheduling_backoff(group: PodGroup) -> int:
    value = group.spec.scheduling_backoff
    return NO_SCHEDULING_BACKOFF if value is None else value


def backs_off(group: PodGroup) -> bool:
    """Whether the PodGroup leaves the scheduler once it was unschedulable on its pool."""
    return scheduling_backoff(group) != NO_SCHEDULING_BACKOFF


def latest_condition_pool(conditions: Iterable[Mapping[str, Any]]) -> str | None:
    """The node pool of the scheduling condition with the highest `transitionID` (unreadable ids count as
    -1; the first of equals wins), or None without conditions: KAI's `GetLastSchedulingCondition`."""
    latest: tuple[int, str] | None = None
    for condition in conditions:
        number = transition_id(condition.get("transitionID"))
        if latest is None or number > latest[0]:
            latest = (number, str(condition.get("nodePool") or ""))
    return None if latest is None else latest[1]


def transition_id(raw: object) -> int:
    """A condition's `transitionID` as a number (-1 when unreadable, as KAI reads it)."""
    try:
        return int(str(raw))
    except ValueError:
        return -1


def is_backed_off(group: PodGroup, condition_pool: str | None, label_key: str) -> bool:
    """KAI's `!isPodGroupUpForScheduler`: backoff set and the latest condition on the PodGroup's own pool."""
    if not backs_off(group) or condition_pool is None:
        return False
    return condition_pool == pool_of(group.metadata.labels, label_key)


def with_pool_prefix(group: PodGroup | None, message: str, label_key: str) -> str:
    """The message the scheduler writes on a PodGroup and its pods: prefixed with its node pool when its
    `schedulingBackoff` is 1."""
    if group is None:
        return message
    return prefixed(message, group.spec.scheduling_backoff, group.metadata.labels, label_key)


def prefixed(message: str, backoff: object, labels: Mapping[str, str], label_key: str) -> str:
    """`with_pool_prefix` from a PodGroup's raw `schedulingBackoff` and labels (live mode's objects)."""
    if backoff != SINGLE_SCHEDULING_BACKOFF:
        return message
    return WaitReason(f"Node-Pool '{pool_of(labels, label_key)}': {message}", code_of(message))
