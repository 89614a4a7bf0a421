"""The earliest start of a job that cannot start now (`actions.start_planner`, issue #24): the bound on
how many end times must pass before a job's pods could fit by their GPUs alone skips placement probes,
never a start: plans with and without it are the same, cycle after cycle, on a saturated mix of small
jobs and gangs of whole nodes."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from helpers import node, pod, pod_group, queue
from kai_scheduler.actions import start_planner
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.config import PluginOption, SchedulerConfig
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.sim.engine import CycleRecord, Simulation, SimulationOptions

START = datetime(2026, 1, 1, tzinfo=UTC)


def saturated(seed: int) -> list[ApiObject]:
    """6 nodes x 8 GPUs kept busy by 1-, 2- and 4-GPU jobs of known durations, gangs of 2 x 8 GPUs arriving
    among them, and a few jobs of unknown duration."""
    rng = random.Random(seed)
    objects: list[ApiObject] = [node(f"n{i}", gpus=8) for i in range(6)]
    objects += [queue("q", gpu=48)]
    for i in range(60):
        duration = f"{rng.randint(30, 400)}s" if rng.random() < 0.9 else None
        objects.append(
            pod(f"s{i}", "q", gpus=rng.choice((1, 1, 2, 4)), arrival=f"{i * 5}s", duration=duration)
        )
    for g in range(3):
        objects.append(pod_group(f"gang-{g}", "q", min_member=2))
        objects += [
            pod(f"gang-{g}-{i}", None, gpus=8, group=f"gang-{g}", arrival=f"{40 + g * 90}s", duration="120s")
            for i in range(2)
        ]
    return objects


def run(objects: list[ApiObject]) -> list[tuple[Any, ...]]:
    config = SchedulerConfig()
    plugin = PluginOption("reservation", {"maxReservations": "2"})
    config = replace(config, tiers=(*config.tiers[:-1], (*config.tiers[-1], plugin)))
    sim = Simulation(objects, config, SimulationOptions(start=START, until=1500.0))
    seen: list[tuple[Any, ...]] = []

    def observe(record: CycleRecord, result: SessionResult) -> None:
        decisions = [(d.type, d.pod, d.node) for d in record.decisions]
        seen.append((record.time, decisions, sorted(result.reservations.items())))

    sim.observers.append(observe)
    sim.run()
    return seen


@pytest.mark.parametrize("seed", range(3))
def test_the_bound_skips_probes_not_starts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    bounded = run(saturated(seed))
    monkeypatch.setattr(start_planner, "_fewest_possible", lambda *args: 0)
    probed = run(saturated(seed))
    assert bounded == probed
    assert any(held for _, _, changes in bounded for _, held in changes if held is not None)
