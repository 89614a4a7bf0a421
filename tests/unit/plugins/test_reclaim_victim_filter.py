"""Proportion's reclaim victim filter (KAI v0.17 #1764, `pkg/scheduler/plugins/proportion/reclaimable/
filter_victims.go`): which queues' jobs a reclaimer may take at all, before its victims are ordered.

Ported by name from KAI v0.17.0 `filter_victims_test.go`
`TestCanBeDeservedQuotaReclaimCandidateOnlyChecksInvolvedResources` (the second test there counts Go
allocations: left out). The case through a whole reclaim is KAI's `reclaim_anchor_victim_test.go`, in
tests/kai.
"""

from __future__ import annotations

from kai_scheduler.model.queues import QueueInfo
from kai_scheduler.model.resources import Resources
from kai_scheduler.plugins.proportion.victim_filter import may_be_reclaimed

ONE_GPU = Resources(gpu=1)


def _victim_side(gpu_allocated: float, gpu_deserved: float) -> QueueInfo:
    # CPU and memory: nothing held of a deserved 10; the reclaimer asks for neither.
    return QueueInfo(
        name="victims",
        parent=None,
        priority=100,
        rank=0,
        deserved=Resources(gpu=gpu_deserved, cpu=10, memory=10),
        limit=Resources(-1, -1, -1),
        weight=Resources(1, 1, 1),
        allocated=Resources(gpu=gpu_allocated),
    )


def _candidate(queue: QueueInfo) -> bool:
    return may_be_reclaimed(queue, ONE_GPU, reclaimer_within_deserved=True, above_share=False)


def test_only_the_resources_the_reclaimer_asks_for_are_compared_with_deserved() -> None:
    # CPU and memory are under their deserved, but the reclaimer asks for GPUs only: at deserved GPUs
    # the queue stays a candidate (fair share decides), below it not, above it yes.
    assert _candidate(_victim_side(2, 2))
    assert not _candidate(_victim_side(1, 2))
    assert _candidate(_victim_side(3, 2))
    # An unlimited deserved quota is never exceeded, and never under-used either.
    assert _candidate(_victim_side(1, -1))


def test_a_reclaimer_beyond_its_deserved_quota_takes_only_from_queues_above_their_share() -> None:
    over = _victim_side(3, 2)
    assert may_be_reclaimed(over, ONE_GPU, reclaimer_within_deserved=False, above_share=True)
    assert not may_be_reclaimed(over, ONE_GPU, reclaimer_within_deserved=False, above_share=False)
