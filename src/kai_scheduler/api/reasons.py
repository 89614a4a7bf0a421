"""Why a job waits, as data: KAI's unschedulable reason codes (`UnschedulableReason` of its PodGroup API)
and `WaitReason`, the message a person reads with its code.

The core produces these (the queue capacity checks, the snapshot builder), and both edges read the code
from them: live mode's PodGroup condition `reason`, its log's counts by reason, the scale adjuster's
"nodes would not help". Nothing reads a code back out of a message.
"""

from __future__ import annotations

from typing import Final

# KAI's UnschedulableReason values (pkg/apis/scheduling/v2alpha2/podgroup_types.go), and its generic one.
NON_PREEMPTIBLE_OVER_QUOTA: Final = "NonPreemptibleOverQuota"
OVER_LIMIT: Final = "OverLimit"
QUEUE_DOES_NOT_EXIST: Final = "QueueDoesNotExist"
PREEMPTION_DELAY_NOT_ELAPSED: Final = "PreemptionDelayNotElapsed"
# KAI's AccountedResource design: the queue names an AccountedResource that does not exist.
ACCOUNTED_RESOURCE_NOT_FOUND: Final = "AccountedResourceNotFound"
# The same design: the pod names a shared ResourceClaim a pod of another queue uses.
SHARED_CLAIM_ACROSS_QUEUES: Final = "SharedResourceClaimAcrossQueues"
UNSCHEDULABLE: Final = "Unschedulable"

# The codes a node added to the cluster cannot cure (the job's queue, not the cluster's size, stops it).
NOT_CURED_BY_NODES: Final = frozenset(
    {
        OVER_LIMIT,
        NON_PREEMPTIBLE_OVER_QUOTA,
        QUEUE_DOES_NOT_EXIST,
        ACCOUNTED_RESOURCE_NOT_FOUND,
        SHARED_CLAIM_ACROSS_QUEUES,
    }
)


class WaitReason(str):
    """A reason a job waits: the message people read (the string itself) and KAI's code for it (`code`).
    A string, so every place that shows, compares or joins messages keeps working; `joined` keeps the code
    when later actions add why they could not help either."""

    __slots__ = ("code",)
    code: str

    def __new__(cls, message: str, code: str = UNSCHEDULABLE) -> WaitReason:
        reason = super().__new__(cls, message)
        reason.code = code
        return reason

    def joined(self, more: str) -> WaitReason:
        return WaitReason(f"{self}; {more}", self.code)


def code_of(reason: str) -> str:
    """The code of a reason (a plain message is KAI's generic Unschedulable)."""
    return reason.code if isinstance(reason, WaitReason) else UNSCHEDULABLE


def with_code(message: str, code: str) -> str:
    """`message` with `code`: a plain string when the code is the generic one (as `code_of` reads it),
    else a WaitReason. (A backlog's reasons are thousands a cycle, nearly all generic, and a plain string
    is several times cheaper to make and to format into another.)"""
    return message if code == UNSCHEDULABLE else WaitReason(message, code)


# Why a pod waits, as live mode writes it on the pod: the `reason` of its `PodScheduled=False` condition and
# of the Warning event that goes with it (docs/live-reasons.md lists them; `kubectl kai why` reads them, so
# they are stable). `Unschedulable` is kube-scheduler's and KAI's (cluster autoscalers act on it): the job
# waits for room. The others say the scheduler cannot take the pod as it is; no node would help.
POD_UNSCHEDULABLE: Final = UNSCHEDULABLE
INVALID_POD: Final = "InvalidPod"  # the pod breaks KAI's admission rules (`api.manifests`)
POD_GROUP_NOT_FOUND: Final = "PodGroupNotFound"  # its pod-group-name names no PodGroup
INVALID_POD_GROUP: Final = "InvalidPodGroup"  # its PodGroup breaks KAI's admission rules
# QUEUE_DOES_NOT_EXIST too: its queue (or a parent of it) does not exist.
POD_REASONS: Final = (
    POD_UNSCHEDULABLE,
    INVALID_POD,
    POD_GROUP_NOT_FOUND,
    INVALID_POD_GROUP,
    QUEUE_DOES_NOT_EXIST,
)
# Warnings on an object the scheduler still takes (events only):
PRIORITY_CLASS_NOT_FOUND: Final = "PriorityClassNotFound"  # spec.priorityClassName names no PriorityClass
INVALID_QUEUE: Final = "InvalidQueue"  # a Queue that breaks KAI's admission rules (an event on it)
