"""proportion queue order, criterion 7: between two queues equal in criteria 1-6, the one with the smaller
allocatable share (≤ in every resource, < in at least one) goes first; otherwise creation decides.

Reference: kai-reference §4.2 Queue order: "6) lower dominant share without the job; 7) smaller allocatable
share (≤ in all and < in one resource); 8) earlier queue creation timestamp"; allocatable = min(limit,
max(deserved, fairShare)), unlimited ⇒ cluster total.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import bound_order, config, node, one_cycle, open_session, pod, queue
from kai_scheduler.plugins.proportion.plugin import SmallerAllocatableShare

ALLOCATE = config(actions="allocate")


def two_queues(**younger: Any) -> list[Any]:
    """`old` and `young` (created later), both with a GPU quota of 4, one 1-GPU pod each (old's first).
    `young` gets extra queue settings, e.g. a CPU limit below the cluster's 64 CPUs."""
    return [
        node("n0", gpus=8, cpu="64", memory="512Gi"),
        queue("old", gpu=4, created="2025-12-30T00:00:00Z"),
        queue("young", gpu=4, created="2025-12-31T00:00:00Z", **younger),
        pod("old-0", "old", gpus=1),
        pod("young-0", "young", gpus=1),
    ]


def test_a_queue_with_a_smaller_allocatable_share_goes_first() -> None:
    # young's CPU limit (32 of 64 CPUs) makes its allocatable CPU share smaller; GPU and memory are
    # equal; everything before criterion 7 ties (the dominant share is the GPU's 1/4 for both).
    objects = two_queues(cpu_limit=32000)
    session = open_session(objects)
    old, young = session.snapshot.queues["old"], session.snapshot.queues["young"]
    key_old = session.queue_order_key(old, session.snapshot.jobs["default/pg-old-0"])
    key_young = session.queue_order_key(young, session.snapshot.jobs["default/pg-young-0"])
    assert key_old[:6] == key_young[:6]
    assert key_young < key_old
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["young-0", "old-0"]


def test_control_without_a_smaller_share_creation_decides() -> None:
    assert bound_order(one_cycle(two_queues(), ALLOCATE)) == ["old-0", "young-0"]


def test_shares_smaller_in_different_resources_do_not_decide() -> None:
    # old's memory limit is below young's, young's CPU limit below old's: neither is smaller in all
    # resources, so creation decides (a lexicographic comparison of the shares would put young first).
    objects = [
        node("n0", gpus=8, cpu="64", memory="512Gi"),
        queue("old", gpu=4, memory_limit=100_000, created="2025-12-30T00:00:00Z"),
        queue("young", gpu=4, cpu_limit=32000, created="2025-12-31T00:00:00Z"),
        pod("old-0", "old", gpus=1),
        pod("young-0", "young", gpus=1),
    ]
    assert bound_order(one_cycle(objects, ALLOCATE)) == ["old-0", "young-0"]


@pytest.mark.parametrize(
    ("a", "b", "a_first", "b_first"),
    [
        ((4, 32, 9), (4, 64, 9), True, False),
        ((4, 64, 9), (4, 32, 9), False, True),
        ((3, 32, 8), (4, 64, 9), True, False),
        ((4, 64, 9), (4, 64, 9), False, False),
        ((4, 32, 9), (4, 64, 8), False, False),
    ],
)
def test_the_criterion_is_dominance(
    a: tuple[float, float, float], b: tuple[float, float, float], a_first: bool, b_first: bool
) -> None:
    share_a, share_b = SmallerAllocatableShare(a), SmallerAllocatableShare(b)
    assert (share_a < share_b) is a_first
    assert (share_b < share_a) is b_first
    assert (share_a == share_b) is (not a_first and not b_first)
    # In a key, an undecided criterion 7 hands over to creation (the next element).
    assert ((share_a, 1) < (share_b, 0)) is a_first
