"""Statement: allocate / pipeline / evict applied at once, undone exactly on rollback.

Reference: kai-reference §4.3 allocate (d) ("all-or-nothing per gang via a statement checkpoint/rollback";
pipelined gang), §4.3 reclaim (a scenario is simulated and undone), §5.1 ("in-session
allocate/pipeline/evict events update shares").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.actions import allocate
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskStatus


def _objects() -> list[Any]:
    return [
        node("n0", gpus=4, cpu="16", memory="64Gi"),
        node("n1", gpus=2, cpu="16", memory="64Gi"),
        queue("dept"),
        queue("q", parent="dept"),
        pod("running", gpus=1, node_name="n0"),
        pod("shared", fraction=0.5, node_name="n1", labels={"runai-gpu-group": "n1-g"}),
        pod("a", gpus=2, cpu="2", memory="4Gi"),
        pod("b", fraction=0.25),
        pod("c", fraction=0.5),
        pod("d", gpus=1),
    ]


def _state(session: Session) -> dict[str, Any]:
    nodes = session.snapshot.nodes
    arrays = {
        name: getattr(nodes, name).copy()
        for name in (
            "used_cpu",
            "used_memory",
            "used_pods",
            "free_gpus",
            "rel_gpus",
            "rel_cpu",
            "rel_memory",
            "rel_pods",
            "shared_free_now",
            "shared_free_soon",
        )
    }
    groups = {
        gid: (g.node, round(g.used, 9), round(g.releasing, 9), dict(g.holders))
        for gid, g in nodes.group_by_id.items()
    }
    queues = {
        q.name: (q.allocated.values(), q.allocated_non_preemptible.values()) for q in session.snapshot.queues
    }
    tasks = {k: (t.status, t.node, t.gpu_groups) for k, t in session.snapshot.tasks.items()}
    return {"arrays": arrays, "groups": groups, "queues": queues, "tasks": tasks}


def _assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    for name, array in before["arrays"].items():
        assert np.allclose(array, after["arrays"][name]), name
    assert before["groups"] == after["groups"]
    for name, (allocated, non_preemptible) in before["queues"].items():
        assert allocated == pytest.approx(after["queues"][name][0])
        assert non_preemptible == pytest.approx(after["queues"][name][1])
    assert before["tasks"] == after["tasks"]


def test_rollback_restores_node_usage_gpu_groups_and_queue_allocation_exactly() -> None:
    session = open_session(_objects())
    tasks = session.snapshot.tasks
    before = _state(session)
    statement = session.statement("allocate")
    statement.allocate(tasks["default/a"], 0, (), "test")
    statement.allocate(tasks["default/b"], 1, ("n1-g",), "test")  # joins the existing shared GPU
    statement.pipeline(tasks["default/c"], 0, ("n0-new",), "test")  # opens a new shared GPU
    statement.evict(tasks["default/running"], "test")
    statement.evict(tasks["default/shared"], "test")
    # Changes are visible at once.
    nodes = session.snapshot.nodes
    assert nodes.free_gpus[0] == 4 - 1 - 2 - 1
    assert nodes.rel_gpus[0] == 1
    assert nodes.group_by_id["n1-g"].used == pytest.approx(0.75)
    assert session.snapshot.queues["q"].allocated.gpu == pytest.approx(1 + 0.5 + 2 + 0.25 + 0.5 - 1 - 0.5)
    assert tasks["default/running"].status is TaskStatus.RELEASING
    statement.rollback()
    _assert_same(before, _state(session))
    assert statement.operations == 0


def test_rollback_to_a_checkpoint_keeps_what_came_before() -> None:
    session = open_session(_objects())
    tasks = session.snapshot.tasks
    statement = session.statement("allocate")
    statement.allocate(tasks["default/a"], 0, (), "first")
    middle = _state(session)
    mark = statement.checkpoint()
    statement.allocate(tasks["default/d"], 0, (), "second")
    statement.allocate(tasks["default/c"], 1, ("n1-g",), "third")
    statement.evict(tasks["default/running"], "fourth")
    statement.rollback(mark)
    _assert_same(middle, _state(session))
    assert tasks["default/a"].status is TaskStatus.ALLOCATED
    assert statement.operations == 1


def test_commit_records_decisions_in_order_with_node_names_and_groups() -> None:
    session = open_session(_objects())
    tasks = session.snapshot.tasks
    statement = session.statement("allocate")
    statement.allocate(tasks["default/a"], 0, (), "a fits")
    statement.pipeline(tasks["default/b"], 1, ("n1-g",), "b waits")
    statement.evict(tasks["default/running"], "make room")
    decisions = statement.commit()
    assert [(d.action, d.type, d.pod, d.node, d.gpu_groups, d.reason) for d in decisions] == [
        ("allocate", "bind", "default/a", "n0", (), "a fits"),
        ("allocate", "pipeline", "default/b", "n1", ("n1-g",), "b waits"),
        ("allocate", "evict", "default/running", "n0", (), "make room"),
    ]
    assert session.decisions == decisions
    assert statement.operations == 0
    statement.rollback()  # nothing left to undo after a commit
    assert tasks["default/a"].status is TaskStatus.ALLOCATED


def test_convert_to_pipeline_turns_binds_into_pipelines() -> None:
    session = open_session(_objects())
    tasks = session.snapshot.tasks
    statement = session.statement("allocate")
    statement.allocate(tasks["default/a"], 0, (), "a")
    statement.allocate(tasks["default/d"], 0, (), "d")
    statement.convert_to_pipeline(0)
    assert tasks["default/a"].status is TaskStatus.PIPELINED
    decisions = statement.commit()
    assert [d.type for d in decisions] == ["pipeline", "pipeline"]


def test_discard_undoes_everything() -> None:
    session = open_session(_objects())
    tasks = session.snapshot.tasks
    before = _state(session)
    statement = session.statement("allocate")
    statement.allocate(tasks["default/a"], 1, (), "a")
    statement.allocate(tasks["default/c"], 0, ("x",), "c")
    statement.discard()
    _assert_same(before, _state(session))
    assert session.decisions == []


def test_non_preemptible_allocation_is_tracked_and_rolled_back() -> None:
    objects = [node("n0", gpus=4), queue("q"), pod("inf", gpus=2, priority_class="inference")]
    session = open_session(objects)
    task = session.snapshot.tasks["default/inf"]
    statement = session.statement("allocate")
    statement.allocate(task, 0, (), "x")
    q = session.snapshot.queues["q"]
    assert q.allocated_non_preemptible.gpu == 2
    statement.rollback()
    assert q.allocated_non_preemptible.gpu == 0
    assert q.allocated.gpu == 0


@pytest.mark.parametrize("lone_shortcut", [True, False])
def test_a_shared_gpu_placed_for_good_is_not_handed_out_again_once_its_pod_leaves_it(
    lone_shortcut: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new shared GPU that a committed placement opened keeps its id for the cycle: a pod that takes a
    new shared GPU on that node later in the session, after the first one left it, gets another id (one
    id must not name two GPUs in a cycle's bind requests). Allocate places a lone pod without a
    statement (`LONE_POD_SHORTCUT`), a gang's pods through one: both hand the GPU out so."""
    monkeypatch.setattr(allocate, "LONE_POD_SHORTCUT", lone_shortcut)
    session = open_session(
        [node("n0", gpus=2), queue("dept"), queue("q", parent="dept"), pod("half", fraction=0.5)]
    )
    task = session.snapshot.tasks["default/half"]
    assert allocate.place_job_tasks(session, task.job, [task], "allocate")
    (opened,), on = task.gpu_groups, task.node
    assert session.decisions[-1].gpu_groups == (opened,)
    assert opened == "n0-gpu-c1-1"  # a new shared GPU
    session.state.unplace(task, TaskStatus.PENDING, -1, ())
    assert opened not in session.snapshot.nodes.group_by_id  # the GPU is gone with its only pod
    assert session.new_gpu_group_id(on) != opened
