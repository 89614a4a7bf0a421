"""A small zoned cluster the explanation tests share: three 8-GPU nodes in zone `a` (one half taken by a
running pod), in zone `b` a 2-GPU node and a tainted 8-GPU node, and a pending `filler` that can take
GPUs but not its 60 CPUs where the running pod is. Each test adds the pending pods it explains."""

from __future__ import annotations

from typing import Any

from helpers import node, pod, queue
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo, TaskStatus

TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}

ZONED_CLUSTER: list[Any] = [
    queue("q", gpu=-1),
    *(node(f"a{i}", gpus=8, cpu=64, labels={"zone": "a"}) for i in range(3)),
    node("b0", gpus=2, cpu=16, labels={"zone": "b"}),
    node("b1", gpus=8, cpu=64, labels={"zone": "b"}, taints=[TAINT]),
    pod("running", gpus=4, cpu="8", node_name="a1"),
    pod("filler", gpus=4, cpu="60", queue="q"),
]


def pending(session: Session, name: str) -> TaskInfo:
    """The pending pod `name` of `session`."""
    return next(
        task
        for task in session.snapshot.tasks.values()
        if task.status is TaskStatus.PENDING and task.name == name
    )
