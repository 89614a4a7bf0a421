"""Start-time estimates with reservation and backfill (issue #24): the look-ahead runs the scheduler with
the same configuration, from the state where the run stopped with its reservations, so a job behind a
reservation is estimated to start later than without the plugin, and the job holding one, every duration
known, at its reservation's start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from helpers import START, node, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.cli.flags import scheduler_config
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.sim.engine import Simulation, SimulationOptions
from kai_scheduler.sim.estimates import start_estimates
from kai_scheduler.sim.results import result_document

# KAI's default configuration plus `reservation` (maxReservations 1), as the example ships it.
BACKFILL_CONFIG = Path(__file__).resolve().parents[2] / "examples" / "backfill-config.yaml"


def _reserving() -> SchedulerConfig:
    """The example's configuration without consolidation, whose placements see no hold (as
    tests/scenarios/reservation-* leave it out): the look-ahead is what is tested here."""
    config = scheduler_config(str(BACKFILL_CONFIG))
    return replace(config, actions=tuple(a for a in config.actions if a != "consolidation"))


def _workload() -> list[ApiObject]:
    """One 4-GPU node whose one-GPU pods end at 100, 200, 300 and 400 s; `big` (4 GPUs for 100 s) waits,
    and `small` (1 GPU for 500 s), taken up after it, too."""
    objects: list[ApiObject] = [node("n1", gpus=4), queue("q")]
    objects += [pod(f"busy-{i}", gpus=1, node_name="n1", duration=100 * i) for i in range(1, 5)]
    objects += [pod("big", gpus=4, duration=100), pod("small", gpus=1, duration=500)]
    return objects


def _stopped_at(seconds: float, config: SchedulerConfig) -> tuple[dict[str, object], dict[str, float | None]]:
    """The result document of a run stopped at `seconds`, and its start estimates."""
    simulation = Simulation(_workload(), config, SimulationOptions(start=START, until=seconds))
    result = simulation.run()
    estimates = start_estimates(simulation, result)
    groups = {f"{g['namespace']}/{g['name']}": g for g in result_document(result, estimates)["podGroups"]}
    return groups, estimates


def test_a_job_behind_a_reservation_is_estimated_to_start_later() -> None:
    # KAI's default: small takes the GPU that frees at 100 s and runs to 600 s; big needs all four.
    _, kai = _stopped_at(50, SchedulerConfig())
    assert (kai["default/pg-small"], kai["default/pg-big"]) == (100.0, 600.0)
    # With the plugin, big holds n1 from 400 s (the last busy pod's end); small would end after that, so it
    # waits for big to end.
    groups, held = _stopped_at(50, _reserving())
    assert groups["default/pg-big"]["reservation"] == {"nodes": ["n1"], "gpus": 4.0, "expectedStart": 400.0}
    assert held["default/pg-big"] == 400.0 == groups["default/pg-big"]["estimatedStart"]
    assert held["default/pg-small"] == 500.0
    assert groups["default/pg-small"]["reservation"] is None


def test_the_estimates_are_the_starts_of_the_run_continued() -> None:
    """Every duration known and nothing left to arrive: the look-ahead from the state with its reservation
    is the rest of the run."""
    config = _reserving()
    _, estimates = _stopped_at(250, config)
    full = Simulation(_workload(), config, SimulationOptions(start=START)).run()
    starts = {p.job_key: p.scheduled_at for p in full.cluster.pods}
    assert estimates["default/pg-big"] == starts["default/pg-big"] == 400.0
    assert estimates["default/pg-small"] == starts["default/pg-small"] == 500.0
