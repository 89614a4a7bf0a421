"""Reclaim from a queue at the root of the hierarchy by a job whose queue has a parent (KAI #1863/#1866):
the victim is taken and the reclaimer pipelined, and the eviction says why, though the victim's queue has
no parent department to name.

Ported from KAI v0.17.0 `pkg/scheduler/actions/integration_tests/reclaim/
reclaim_cross_hierarchy_root_leaf_test.go` `TestReclaimCrossHierarchyRootLeafVictimDoesNotPanic`: node0
has one GPU; department `default` (deserved 1) holds `inference-default` (deserved 1); `non-gpu` is a root
leaf queue (deserved 0); both jobs are train priority.
"""

from __future__ import annotations

from helpers import node, pod, queue, run


def test_reclaim_cross_hierarchy_root_leaf_victim() -> None:
    objects = [
        node("node0", gpus=1),
        queue("default", gpu=1),
        queue("inference-default", parent="default", gpu=1),
        queue("non-gpu", gpu=0),
        pod("root-leaf-victim", "non-gpu", gpus=1, priority_class="train", node_name="node0"),
        pod("inference-pending", "inference-default", gpus=1, priority_class="train"),
    ]
    decisions = run(objects, cycles=1).cycles[0].decisions
    assert [(d.action, d.type, d.pod.split("/", 1)[1], d.node) for d in decisions] == [
        ("reclaim", "evict", "root-leaf-victim", "node0"),
        ("reclaim", "pipeline", "inference-pending", "node0"),
    ]
    assert "queue inference-default below fair share" in decisions[0].reason
