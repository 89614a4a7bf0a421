"""Each snapshot makes its queue tree of what the Queue objects say, read once (`builder.queue_specs`,
`builder.queue_tree_of`): a session changes its tree freely (allocations, fair shares, a flattened tree's
parents and children), and the next tree must be the one made from the objects read afresh."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from helpers import queue, queue_manifest
from kai_scheduler.api.objects import Queue
from kai_scheduler.model.builder import queue_specs, queue_tree_of
from kai_scheduler.model.queues import QueueInfo, QueueTree
from kai_scheduler.model.resources import Resources


def _queues() -> list[Queue]:
    gated = queue_manifest("gated", parent="dept", gpu=2)
    gated["spec"] |= {"admissionGating": True, "preemptMinRuntime": "30s"}
    return [
        queue("dept", gpu=8, cpu=4000, memory=1024, priority=5),
        queue("a", parent="dept", gpu=3, gpu_limit=6, gpu_weight=2, memory=512),
        Queue.model_validate(gated),
        queue("orphan", parent="missing"),
    ]


def _fields(tree: QueueTree) -> list[tuple[Any, ...]]:
    def value(item: object) -> object:
        return item.values() if isinstance(item, Resources) else item

    return [tuple(value(getattr(q, f.name)) for f in fields(QueueInfo)) for q in tree] + [
        tuple(sorted(tree.orphans.items())),
        tuple(tree.roots),
    ]


def test_a_tree_made_again_after_a_session_changed_the_last_is_the_one_read_afresh() -> None:
    queues = _queues()
    usage = {"a": Resources(0.25, 0.5, 0.125)}
    specs = queue_specs(queues)
    first = queue_tree_of(specs, usage)
    first.flattened()  # the leaves lose their parents
    for q in first:  # what a session does to its tree
        for part in (q.deserved, q.limit, q.weight, q.allocated, q.usage, q.fair_share):
            part.add(Resources(1.0, 1.0, 1.0))
        q.accounted_limits["example.com/licence"] = 3.0
        q.children.append("stray")

    assert _fields(queue_tree_of(specs, usage)) == _fields(queue_tree_of(queue_specs(queues), usage))
    assert usage["a"].values() == (0.25, 0.5, 0.125)
    tree = queue_tree_of(specs, usage)
    assert tree["a"].parent == "dept" and tree["dept"].children == ["a", "gated"]
    assert tree["gated"].admission_gating and tree["gated"].preempt_min_runtime == 30.0
    assert tree.orphans == {"orphan": "missing"}
