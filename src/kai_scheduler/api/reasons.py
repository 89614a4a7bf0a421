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
UNSCHEDULABLE: Final = "Unschedulable"

# The codes a node added to the cluster cannot cure (the job's queue, not the cluster's size, stops it).
NOT_CURED_BY_NODES: Final = frozenset({OVER_LIMIT, NON_PREEMPTIBLE_OVER_QUOTA, QUEUE_DOES_NOT_EXIST})


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
