"""Proportion's reclaim victim filter (KAI v0.17 #1764, `pkg/scheduler/plugins/proportion/reclaimable/
filter_victims.go`): which queues' jobs a reclaimer may take at all, before its victims are ordered.

Ported by name from KAI v0.17.0 `filter_victims_test.go`
`TestCanBeDeservedQuotaReclaimCandidateOnlyChecksInvolvedResources` (the second test there counts Go
allocations: left out) and `reclaimable_test.go` Describe("FilterVictim") (its five cases, through
proportion). The case through a whole reclaim is KAI's `reclaim_anchor_victim_test.go`, in
tests/kai.
"""

from __future__ import annotations

import pytest

from helpers import node, open_session, pod, queue, snapshot_of
from kai_scheduler.framework.config import SchedulerConfig
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


# KAI v0.17.0 reclaimable_test.go, Describe("FilterVictim"): the reclaimer asks for 2 GPUs; the queues are
# two top-level queues (reclaimer, victim) with these GPU deserved quotas, fair shares and allocations.
FILTER_VICTIM_CASES = {
    "filters victims whose leveled queue is strictly under deserved quota": ((4, 4, 0), (4, 4, 2), False),
    "keeps victims whose leveled queue is over deserved quota": ((4, 4, 0), (0, 4, 4), True),
    "keeps victims exactly at deserved quota for consolidation": ((4, 4, 0), (2, 4, 2), True),
    "filters victims under allocatable share when the reclaimer cannot use deserved quota": (
        (1, 4, 0),
        (2, 4, 3),
        False,
    ),
    "keeps victims over allocatable share when the reclaimer cannot use deserved quota": (
        (1, 4, 0),
        (2, 4, 5),
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(FILTER_VICTIM_CASES))
def test_kai_filter_victim_cases_through_proportion(case: str) -> None:
    reclaimer_side, victim_side, kept = FILTER_VICTIM_CASES[case]
    objects = [
        node("n0", gpus=8),
        queue("reclaimer", gpu=reclaimer_side[0]),
        queue("victim", gpu=victim_side[0]),
        pod("waiting", "reclaimer", gpus=2),
    ]
    session = open_session(snapshot_of(objects), SchedulerConfig())
    queues = session.snapshot.queues
    for name, (_, fair_share, allocated) in (("reclaimer", reclaimer_side), ("victim", victim_side)):
        queues[name].fair_share.gpu = fair_share
        queues[name].allocated.gpu = allocated
    (reclaimer,) = [job for job in session.snapshot.jobs.values() if job.queue == "reclaimer"]
    (may_reclaim_from,) = session.points.reclaim_victim_filters
    assert may_reclaim_from(reclaimer, Resources(gpu=2), "victim") is kept
