"""Queue order keys carried from one cycle to the next (`framework.queue_order_memo`, issue #23 point 1): a
session starts from the last one's keys of the queues whose fixed inputs and allocation are the same, and
with the debug variable set every one it starts from is worked out again (which
`tests/sim/test_unchanged_cycles.py` does through arrivals, completions and quota changes); so is whether
siblings of given allocatable shares are ranked by a strict weak ordering."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from helpers import node, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.controlplane.unchanged_cycles import VERIFY_ENV
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.queue_order_memo import CarriedQueueOrder
from kai_scheduler.plugins.proportion import plugin as proportion_plugin
from kai_scheduler.sim.engine import Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_session_starts_from_the_keys_it_would_work_out_again() -> None:
    carried = CarriedQueueOrder()
    fixed = {"a": (1.0, 2.0), "b": (3.0, 4.0)}
    keys = carried.keys_for(fixed, {"a": (1.0, 0.0, 0.0), "b": (2.0, 0.0, 0.0)})
    assert keys == {}
    keys[("a", 1.0, 0.0, 0.0, 1.0, 0.0, 0.0)] = ("a at 1",)
    keys[("a", 3.0, 0.0, 0.0, 1.0, 0.0, 0.0)] = ("a at 3",)  # worked out once a pod was placed
    keys[("b", 2.0, 0.0, 0.0, 1.0, 0.0, 0.0)] = ("b at 2",)
    # b's fair share moved: none of its keys holds; a is back at its allocation of 1 GPU.
    later = carried.keys_for({"a": (1.0, 2.0), "b": (3.5, 4.0)}, {"a": (1.0, 0.0, 0.0), "b": (2.0, 0.0, 0.0)})
    assert later == {("a", 1.0, 0.0, 0.0, 1.0, 0.0, 0.0): ("a at 1",)}
    # A queue new to the tree has no keys, nor one gone from it.
    assert carried.keys_for({"c": (1.0, 2.0)}, {"c": (1.0, 0.0, 0.0)}) == {}


def test_verify_mode_checks_the_carried_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set a carried key that differs from the one worked out again raises."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    objects: list[ApiObject] = [node("n0", gpus=2), queue("first", gpu=1), queue("second", gpu=1)]
    objects += [
        pod(f"{name}-{i}", name, gpus=1, node_name="n0" if i == 0 else None)
        for name in ("first", "second")
        for i in range(2)
    ]
    simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=2))
    simulation._cycle(0.0, 1)
    keys = simulation.driver.scheduler.memos.queue_orders._keys
    second = [memo for memo in keys if memo[0] == "second"]
    assert second  # the waiting pod of each queue ranked it
    keys[second[0]] = (not keys[second[0]][0], *keys[second[0]][1:])  # over its fair share, it says
    simulation.cluster.cache.set_nodes([node("n0", gpus=2, labels={"zone": "z1"})])
    with pytest.raises(CarriedMismatch, match="queue second: its order key for a request of"):
        simulation._cycle(10.0, 2)


def _three_siblings() -> Simulation:
    """Three sibling queues whose quotas exceed the cluster (their allocatable shares stay) with pods
    waiting for two GPUs: one is free, and the running pod's ends at 15 s, so that each of the first two
    cycles walks the job queue, which asks how the siblings are ordered."""
    objects: list[ApiObject] = [
        node("n0", gpus=2),
        queue("a", gpu=10),
        queue("b", gpu=20),
        queue("c", gpu=30),
    ]
    objects.append(pod("running", "a", gpus=1, node_name="n0", duration="15s"))
    objects += [pod(f"{name}-{i}", name, gpus=1) for name in "abc" for i in range(2)]
    return Simulation(objects, SchedulerConfig(), SimulationOptions(start=START, cycles=3))


def test_whether_siblings_are_weakly_ordered_is_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer for the siblings' allocatable shares is worked out once, and read by the next session
    while their shares stay (the plugin is made afresh each cycle)."""
    monkeypatch.delenv(VERIFY_ENV, raising=False)  # (which works every answer out again)
    worked_out: list[int] = []
    original = proportion_plugin._dominance_is_total

    def dominance_is_total(shares: set[tuple[float, float, float]]) -> bool:
        worked_out.append(len(shares))
        return original(shares)

    monkeypatch.setattr(proportion_plugin, "_dominance_is_total", dominance_is_total)
    simulation = _three_siblings()
    simulation._cycle(0.0, 1)
    assert worked_out
    kept = dict(simulation.driver.scheduler.memos.queue_orders.weakly_ordered)
    assert kept
    worked_out.clear()
    placed = simulation._cycle(20.0, 2)[0].decisions
    assert placed  # the walk was made
    assert not worked_out
    assert simulation.driver.scheduler.memos.queue_orders.weakly_ordered == kept


def test_verify_mode_checks_whether_siblings_are_weakly_ordered(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the debug variable set a carried answer that differs from the one worked out again raises."""
    monkeypatch.setenv(VERIFY_ENV, "1")
    simulation = _three_siblings()
    simulation._cycle(0.0, 1)
    kept = simulation.driver.scheduler.memos.queue_orders.weakly_ordered
    for shares, answer in kept.items():
        kept[shares] = not answer
    with pytest.raises(CarriedMismatch, match="are weakly ordered, kept, differs"):
        simulation._cycle(20.0, 2)
