"""When a few nodes' static facts change (a cordon, a label, a taint), the masks of each placement's static
predicates kept from the last cycle still answer for every other node (`static_masks.OlderMasks`), and a
node flag (`NodeFlags`: cordon, readiness) answers for a changed node it refuses: a cycle's pods that found
no node are asked about and explained over the changed rows without any placement's masks worked out over
every node again (issue #23, point 1). Every answer must be the one a full evaluation gives.

Generated clusters: racks of nodes full of running pods, pods bound to a rack by a node selector that
cannot fit, some tolerating a taint; between cycles a few nodes are cordoned or uncordoned, moved to
another rack, tainted or untainted, and running pods end (a rack's node then takes a waiting pod).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest

from helpers import node, pod, queue
from kai_scheduler.api.objects import ApiObject, Node
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)
RACKS = 3
PER_RACK = 4
CYCLES = 14
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}


def rack_node(number: int, rack: int, *, cordoned: bool = False, tainted: bool = False) -> Node:
    return node(
        f"n{number}",
        gpus=4,
        labels={"rack": f"r{rack}"},
        unschedulable=cordoned,
        taints=[TAINT] if tainted else None,
    )


def workload(seed: int) -> tuple[list[ApiObject], dict[str, Node]]:
    rng = random.Random(seed)
    nodes = {
        f"n{i}": rack_node(i, i // PER_RACK, tainted=rng.random() < 0.2) for i in range(RACKS * PER_RACK)
    }
    objects: list[ApiObject] = [*nodes.values(), queue("q", gpu=-1)]
    for i in range(RACKS * PER_RACK):
        ends = f"{rng.randint(20, 200)}s" if rng.random() < 0.6 else None
        objects.append(pod(f"run-{i}", gpus=4, node_name=f"n{i}", duration=ends))
    for i in range(12):
        objects.append(
            pod(
                f"wait-{i}",
                gpus=rng.choice((1, 2, 4)),
                cpu=rng.choice(("1", "2")),
                node_selector={"rack": f"r{rng.randrange(RACKS)}"} if rng.random() < 0.8 else None,
                tolerations=[TOLERATION] if rng.random() < 0.5 else None,
            )
        )
    return objects, nodes


def respecify(sim: Simulation, rng: random.Random, nodes: dict[str, Node]) -> None:
    """One or two nodes cordoned or uncordoned, moved to another rack, tainted or untainted."""
    for name in rng.sample(sorted(nodes), rng.choice((1, 1, 2))):
        current = nodes[name]
        change = rng.choice(("cordon", "cordon", "rack", "taint"))
        if change == "cordon":
            spec = current.spec.model_copy(update={"unschedulable": not current.spec.unschedulable})
            nodes[name] = current.model_copy(update={"spec": spec})
        elif change == "rack":
            labels = {"rack": f"r{rng.randrange(RACKS)}"}
            nodes[name] = current.model_copy(
                update={"metadata": current.metadata.model_copy(update={"labels": labels})}
            )
        else:
            tainted = rack_node(0, 0, tainted=not current.spec.taints)
            nodes[name] = current.model_copy(
                update={"spec": current.spec.model_copy(update={"taints": tainted.spec.taints})}
            )
    sim.cluster.cache.set_nodes(nodes.values())


def view(result: SessionResult) -> tuple[Any, ...]:
    decisions = [(d.action, d.type, d.pod, d.node, d.reason) for d in result.decisions]
    return decisions, sorted(result.unschedulable.items())


def replay(seed: int, *, carry: bool) -> list[tuple[Any, ...]]:
    objects, nodes = workload(seed)
    sim = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=CYCLES))
    sim.driver.reuse = carry
    sim.driver.scheduler.memos.carry = carry
    rng = random.Random(seed + 7)
    seen = []
    for number in range(1, CYCLES + 1):
        if number > 1 and rng.random() < 0.7:
            respecify(sim, rng, nodes)
        _, result = sim._cycle(10.0 * (number - 1), number)
        seen.append(view(result))
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_older_masks_answer_as_a_full_evaluation(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set, every answer read from an older mask or a node flag is worked out
    again (a difference raises); and every cycle decides and explains as one that carries nothing."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    answers = _answers_without_masks(monkeypatch)
    carried = replay(seed, carry=True)
    assert {"older", "flag"} <= set(answers), answers
    assert carried == replay(seed, carry=False)


def _answers_without_masks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Where each answer given without the placement's masks came from (checked in verify mode): an older
    mask, or a node flag."""
    answers: list[str] = []
    original = Session._check_static_refusal

    def check(self: Session, placement: Any, row: int, answer: int) -> None:
        older = self._older_static.get(placement.key)
        answers.append("older" if older is not None and row not in older[1] else "flag")
        original(self, placement, row, answer)

    monkeypatch.setattr(Session, "_check_static_refusal", check)
    return answers


def full_rack_and_bound_pod() -> tuple[Simulation, list[Node]]:
    """Two racks of two full nodes (n2's pod ends at 30 s), and a pod bound to rack r0 that waits."""
    nodes = [rack_node(i, i // 2) for i in range(4)]
    objects: list[ApiObject] = [
        *nodes,
        queue("q", gpu=-1),
        *(pod(f"run-{i}", gpus=4, node_name=f"n{i}", duration="30s" if i == 2 else None) for i in range(4)),
        pod("bound", gpus=1, node_selector={"rack": "r0"}),
    ]
    return Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=4)), nodes


def test_a_cordon_works_out_no_placement_masks_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node of rack r0 cordoned: the bound pod is carried as finding no node and explained over the
    changed row by the cordon flag, with no placement's masks worked out; moved to another rack, the
    node is read from the older masks at the other rows only, its own worked out again."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)  # (which works every answer out again)
    sim, nodes = full_rack_and_bound_pod()
    first = sim._cycle(0.0, 1)[1].unschedulable["default/pg-bound"]
    assert "2 node(s) didn't match Pod's node affinity/selector, 2 Insufficient GPUs" in first
    original = Session.static_masks_of
    with mock.patch.object(Session, "static_masks_of", autospec=True, side_effect=original) as worked_out:
        sim.cluster.cache.set_nodes([rack_node(0, 0, cordoned=True), *nodes[1:]])
        cordoned = sim._cycle(10.0, 2)[1].unschedulable["default/pg-bound"]
        assert "1 node(s) were unschedulable, 2 node(s) didn't match" in cordoned
        assert "1 Insufficient GPUs" in cordoned
        assert worked_out.call_count == 0
        sim.cluster.cache.set_nodes([rack_node(0, 0, cordoned=True), rack_node(1, 1), *nodes[2:]])
        moved = sim._cycle(20.0, 3)[1].unschedulable["default/pg-bound"]
        assert "1 node(s) were unschedulable, 3 node(s) didn't match" in moved
        assert worked_out.call_count > 0  # n1's row is not a cordon's: the placement's masks are worked out


def test_verify_mode_checks_an_older_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """An older mask that says a rack r1 node passes the bound pod's selector (made up) is caught by the
    debug variable when that row is asked."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim, nodes = full_rack_and_bound_pod()
    sim._cycle(0.0, 1)
    kept = sim.driver.scheduler.memos.static_masks
    key, (ok, parts) = next((key, masks) for key, masks in kept.masks.items() if "rack" in key)
    wrong = [(words, passing.copy()) for words, passing in parts]
    for _, passing in wrong:
        passing[2] = True
    kept.masks[key] = (ok, wrong)
    sim.cluster.cache.set_nodes([*nodes[:3], rack_node(3, 1, cordoned=True)])
    with pytest.raises(CarriedMismatch, match="the first static predicate refusing it"):
        sim._cycle(40.0, 2)  # n2's pod has ended: its row is asked


def test_verify_mode_checks_the_words_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explanations' words are kept by what they read (`NoFitWords`): counts alike read as the words kept,
    and a kept text that is not theirs (made up) is caught by the debug variable once a cordon moves the
    counts to it."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    sim, nodes = full_rack_and_bound_pod()
    sim._cycle(0.0, 1)
    failures = sim.driver.scheduler.memos.placement_failures
    sim.cluster.cache.set_nodes([rack_node(0, 0, cordoned=True), *nodes[1:]])
    cordoned = sim._cycle(10.0, 2)[1].unschedulable["default/pg-bound"]
    sim.cluster.cache.set_nodes(nodes)
    sim._cycle(20.0, 3)
    texts = failures.words._texts
    assert any(text in cordoned for text in texts.values())
    for key, text in texts.items():
        texts[key] = text.replace("unschedulable", "made up")
    sim.cluster.cache.set_nodes([rack_node(0, 0, cordoned=True), *nodes[1:]])
    with pytest.raises(CarriedMismatch, match="why it does not fit, kept as"):
        sim._cycle(25.0, 4)
