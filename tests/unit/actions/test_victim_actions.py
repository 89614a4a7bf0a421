"""reclaim and preempt: who may take resources from whom.

Reference: kai-reference §4.3 reclaim ("Reclaimer job must pass CanReclaimResources: its queue's allocated
+ job request <= its fair share ...; Victims: running jobs from *other* queues that are preemptible"),
§4.3 preempt ("within the same queue only ... may evict *preemptible* jobs of the same queue with strictly
lower priority ... build(100) preempts train(50); inference (125) preempts train; non-preemptible victims
(build/inference) are never preempted"), §4.2 victim order (lowest priority, newest jobs, most over-share
queues first), §5.4 (MaintainFairShare compared at the level where the queues' paths diverge).
"""

from __future__ import annotations

from typing import Any

from helpers import node, pod, queue, run


def decisions(objects: list[Any]) -> list[tuple[int, str, str, str]]:
    result = run(objects)
    return [(r.cycle, d.action, d.type, d.pod.split("/")[1]) for r in result.cycles for d in r.decisions]


def test_reclaim_takes_back_up_to_the_fair_share_and_no_more() -> None:
    # Fair shares: deserved 1 + 1, the 2 left split evenly -> 2 and 2. A holds all 4.
    objects = [
        node("n0", gpus=4),
        queue("a", gpu=1),
        queue("b", gpu=1),
        *[pod(f"a-{i}", "a", gpus=1, node_name="n0") for i in range(4)],
        *[pod(f"b-{i}", "b", gpus=1) for i in range(3)],
    ]
    assert decisions(objects) == [
        (1, "reclaim", "evict", "a-3"),
        (1, "reclaim", "pipeline", "b-0"),
        (1, "reclaim", "evict", "a-2"),
        (1, "reclaim", "pipeline", "b-1"),
        (2, "allocate", "bind", "b-0"),
        (2, "allocate", "bind", "b-1"),
    ]


def test_reclaim_never_takes_non_preemptible_pods() -> None:
    objects = [
        node("n0", gpus=2),
        queue("a", gpu=0),
        queue("b", gpu=2),
        pod("a-0", "a", gpus=1, node_name="n0", priority_class="inference"),
        pod("a-1", "a", gpus=1, node_name="n0", priority_class="inference"),
        pod("b-0", "b", gpus=1),
    ]
    assert decisions(objects) == []


def test_no_reclaim_from_a_queue_within_its_fair_share() -> None:
    objects = [
        node("n0", gpus=4),
        queue("a", gpu=2),
        queue("b", gpu=2),
        *[pod(f"a-{i}", "a", gpus=1, node_name="n0") for i in range(2)],
        *[pod(f"b-{i}", "b", gpus=1, node_name="n0") for i in range(2)],
        pod("b-2", "b", gpus=1),
    ]
    assert decisions(objects) == []


def test_reclaim_between_siblings_leaves_other_departments_alone() -> None:
    objects = [
        node("n0", gpus=4),
        queue("d1", gpu=2),
        queue("d2", gpu=2),
        queue("t1", parent="d1", gpu=2),
        queue("t2", parent="d2", gpu=1),
        queue("t3", parent="d2", gpu=1),
        *[pod(f"t1-{i}", "t1", gpus=1, node_name="n0") for i in range(2)],
        *[pod(f"t2-{i}", "t2", gpus=1, node_name="n0") for i in range(2)],
        pod("t3-0", "t3", gpus=1),
    ]
    assert decisions(objects) == [
        (1, "reclaim", "evict", "t2-1"),
        (1, "reclaim", "pipeline", "t3-0"),
        (2, "allocate", "bind", "t3-0"),
    ]


def test_preempt_takes_lower_priority_preemptible_pods_of_the_same_queue_only() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q", gpu=2),
        pod("build", gpus=1, node_name="n0", priority_class="build"),
        pod("train", gpus=1, node_name="n0", priority_class="train"),
        pod("inf", gpus=1, priority_class="inference"),
    ]
    assert decisions(objects) == [
        (1, "preempt", "evict", "train"),
        (1, "preempt", "pipeline", "inf"),
        (2, "allocate", "bind", "inf"),
    ]


def test_equal_priority_never_preempts() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=1),
        pod("t0", gpus=1, node_name="n0", priority_class="train"),
        pod("t1", gpus=1, priority_class="train"),
    ]
    assert decisions(objects) == []


def test_preempt_does_not_cross_queues() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=1),
        queue("other", gpu=0),
        pod("t0", "other", gpus=1, node_name="n0", priority_class="train"),
        pod("b0", "q", gpus=1, priority_class="build"),
    ]
    # Not preempt (other queue); reclaim applies instead: q is owed its GPU, other is above its share.
    assert [d[1] for d in decisions(objects)] == ["reclaim", "reclaim", "allocate"]


def test_a_non_preemptible_preemptor_above_its_quota_does_not_preempt() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=0),
        pod("t0", gpus=1, node_name="n0", priority_class="train"),
        pod("inf", gpus=1, priority_class="inference"),
    ]
    result = run(objects)
    assert [d for r in result.cycles for d in r.decisions] == []
    assert result.reasons["default/pg-inf"].startswith("NonPreemptibleOverQuota")
