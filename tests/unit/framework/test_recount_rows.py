"""The rows an explanation kept from the last cycle is counted again over (`placement_failures`,
`no_fit_counts`): those that may differ since the last cycle counted it. One counted again after the last
cycle placed a pod (the rest of a walk after a completion) is not counted again at that pod's node; nor is
a pod shape the last cycle found to have no node after it placed a pod asked about that pod's node."""

from __future__ import annotations

from collections.abc import Hashable
from datetime import UTC, datetime

import pytest

from helpers import node, pod, queue
from kai_scheduler.api.objects import ApiObject, Node
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.no_fit_counts import NoFitCounts
from kai_scheduler.framework.placement_failures import SessionFailures
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.resources import PodRequest
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)


def recounted_rows(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The rows of every explanation counted again, as each is."""
    recounted: list[list[int]] = []
    original = NoFitCounts.recount

    def recount(self: NoFitCounts, rows: list[int], refusals: list[int], position: int) -> None:
        recounted.append(list(rows))
        original(self, rows, refusals, position)

    monkeypatch.setattr(NoFitCounts, "recount", recount)
    return recounted


def rows_asked(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The rows asked whether any is a candidate for a pod shape the last cycle found to have no node."""
    asked: list[list[int]] = []
    original = SessionFailures._none_a_candidate

    def none_a_candidate(
        self: SessionFailures, task: TaskInfo, shape: tuple[PodRequest, str], rows: list[int]
    ) -> bool:
        asked.append(list(rows))
        return original(self, task, shape, rows)

    monkeypatch.setattr(SessionFailures, "_none_a_candidate", none_a_candidate)
    return asked


def trickle(monkeypatch: pytest.MonkeyPatch, *, verify: bool = True) -> tuple[Simulation, list[Node]]:
    """Three nodes of 2 GPUs, all taken; n0 frees one at 15 s for `one`, and `two` (2 GPUs) fits nowhere
    (`verify`: with the debug variable set)."""
    if verify:
        monkeypatch.setenv(VERIFY_ENV, "1")
    nodes = [node(f"n{i}", gpus=2) for i in range(3)]
    objects: list[ApiObject] = [
        *nodes,
        queue("q", gpu=8),
        pod("short", gpus=1, node_name="n0", priority_class="inference", duration="15s"),
        pod("long", gpus=1, node_name="n0", priority_class="inference"),
        *(pod(f"full-{i}", gpus=2, node_name=f"n{i}", priority_class="inference") for i in (1, 2)),
        pod("one", "q", gpus=1, priority_class="inference"),
        pod("two", "q", gpus=2),
    ]
    return Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=3)), nodes


def test_a_shape_found_without_a_node_after_a_pod_was_placed_is_not_asked_about_its_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cycle at 20 s places `one` at n0 (row 0), then finds `two` still has no node, asking row 0
    alone each time (where the two cycles' tables differ). At 30 s n2 (row 2) is cordoned: `two`'s shape
    is asked about row 2 alone, not row 0 (changed before it was found to have none), and waits as
    attempting it would leave it (the debug variable attempts it as well)."""
    asked = rows_asked(monkeypatch)
    sim, nodes = trickle(monkeypatch)
    sim._cycle(0.0, 1)
    _, placed = sim._cycle(20.0, 2)
    assert [(d.pod, d.node) for d in placed.decisions] == [("default/one", "n0")]
    assert asked and all(rows == [0] for rows in asked)
    asked.clear()
    sim.cluster.cache.set_nodes([*nodes[:2], cordoned(nodes[2])])
    _, after = sim._cycle(30.0, 3)
    assert asked and all(rows == [2] for rows in asked)
    assert not after.decisions
    assert "1 node(s) were unschedulable, 2 Insufficient GPUs" in after.unschedulable["default/pg-two"]


def test_an_explanation_counted_after_a_pod_was_placed_is_not_counted_again_at_its_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """n0 (row 0) frees a GPU at 15 s; the cycle at 20 s places `one` there, then explains why `two` does
    not fit, counting its kept explanation again at row 0. At 30 s n2 (row 2) is cordoned: `two`'s
    explanation is counted again at row 2 alone, and reads as counting every node does (the debug
    variable counts every node as well)."""
    recounted = recounted_rows(monkeypatch)
    sim, nodes = trickle(monkeypatch)
    sim._cycle(0.0, 1)
    recounted.clear()
    _, placed = sim._cycle(20.0, 2)
    assert [(d.pod, d.node) for d in placed.decisions] == [("default/one", "n0")]
    assert recounted == [[0]]
    sim.cluster.cache.set_nodes([*nodes[:2], cordoned(nodes[2])])
    _, after = sim._cycle(30.0, 3)
    assert recounted[1:] == [[2]]
    assert "1 node(s) were unschedulable, 2 Insufficient GPUs" in after.unschedulable["default/pg-two"]


def cordoned(n: Node) -> Node:
    return n.model_copy(update={"spec": n.spec.model_copy(update={"unschedulable": True})})


def test_an_explanation_asked_again_with_no_node_changed_reads_as_it_did_without_its_kept_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each explanation by rows is asked a second time at once (no node changed between): it reads as
    the first answer did, and is given from the counts kept at that very position, not through
    `kept_counts` and its rows that may differ (without the debug variable, which counts every time)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)
    sim, _ = trickle(monkeypatch, verify=False)
    kept_asked: list[Hashable] = []
    original_kept = SessionFailures.kept_counts

    def kept_counts(self: SessionFailures, key: Hashable) -> tuple[NoFitCounts, list[int]] | None:
        kept_asked.append(key)
        return original_kept(self, key)

    answers: list[tuple[str, str, list[Hashable]]] = []
    original = Session._explain_by_rows

    def asked_twice(self: Session, task: TaskInfo, part: SessionFailures) -> str:
        first = original(self, task, part)
        kept_asked.clear()
        again = original(self, task, part)
        answers.append((first, again, list(kept_asked)))
        return first

    monkeypatch.setattr(SessionFailures, "kept_counts", kept_counts)
    monkeypatch.setattr(Session, "_explain_by_rows", asked_twice)
    for at, cycle in ((0.0, 1), (20.0, 2)):
        sim._cycle(at, cycle)
    assert answers
    assert all(first == again and not asked for first, again, asked in answers)
    assert "Insufficient GPUs" in answers[-1][0]
