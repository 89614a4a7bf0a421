"""When will my job start (issue #12 point 4): the look-ahead's estimates in the simulator.

The look-ahead runs the scheduler on a copy of the state where the run stopped. With every duration known
and nothing left to arrive, that copy is the rest of the same run, so its estimates must be exactly the
starts the run, continued, gives; with unknown durations it learns from similar completed pods or says
it does not know.
"""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from rich.console import Console

from helpers import (
    START,
    cluster_state,
    gang,
    node,
    objects_of,
    pod,
    pod_group,
    pod_manifest,
    queue,
    queue_manifest,
)
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.cli import main
from kai_scheduler.controlplane.run_times import StartTimeQuery, remaining
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.scheduler.start_times import look_ahead_config
from kai_scheduler.model.partition import Partition
from kai_scheduler.sim.engine import Simulation, SimulationOptions, SimulationResult
from kai_scheduler.sim.estimates import estimate_starts, start_estimates
from kai_scheduler.sim.report import render
from kai_scheduler.sim.results import result_document


def _run(
    objects: list[ApiObject], *, until: float | None = None, cycles: int | None = None
) -> tuple[SimulationResult, dict[str, float | None]]:
    simulation = Simulation(
        list(objects), SchedulerConfig(), SimulationOptions(start=START, until=until, cycles=cycles)
    )
    result = simulation.run()
    return result, start_estimates(simulation, result)


def _waiting(result: SimulationResult) -> set[str]:
    """The pod groups that wait to start where the run stopped (none of their pods runs)."""
    document = result_document(result)
    return {
        f"{g['namespace']}/{g['name']}" for g in document["podGroups"] if g["pending"] and g["running"] == 0
    }


def _first_binds_after(result: SimulationResult, time: float) -> dict[str, float]:
    """Each job's first bind at or after `time` in a run."""
    job_of = {p.key: p.job_key for p in result.cluster.pods}
    first: dict[str, float] = {}
    for record in result.cycles:
        for decision in record.decisions:
            if decision.type == "bind" and record.time >= time - 1e-9:
                first.setdefault(job_of[decision.pod], record.time)
    return first


def test_a_job_behind_one_of_known_duration_starts_when_it_ends() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q"),
        pod("first", gpus=8, duration=100),
        pod("second", gpus=8, duration=50),
        pod("third", gpus=8),
    ]
    stopped, estimates = _run(objects, until=30)
    assert _waiting(stopped) == {"default/pg-second", "default/pg-third"}
    assert estimates["default/pg-second"] == 100.0
    assert estimates["default/pg-third"] == 150.0
    assert estimates["default/pg-first"] == 0.0  # started: when it did
    # The same run, continued: the estimates are its starts.
    full, _ = _run(objects)
    starts = {p.key: p.scheduled_at for p in full.cluster.pods}
    assert starts["default/second"] == estimates["default/pg-second"]
    assert starts["default/third"] == estimates["default/pg-third"]


def _busy_workload() -> list[ApiObject]:
    """Two queues on two 8-GPU nodes, gangs and single pods of several sizes and priorities, every
    duration known, everything there at second 0: allocation, reclaim and preemption at work."""
    objects: list[ApiObject] = [
        node("n0", gpus=8),
        node("n1", gpus=8),
        queue("a", gpu=8),
        queue("b", gpu=8),
    ]
    objects += gang("a-big", "a", size=2, gpus=4, duration=100)
    objects += gang("b-wide", "b", size=2, gpus=8, duration=50)
    objects += [pod("a-one", "a", gpus=8, duration=60), pod("b-small", "b", gpus=4, duration=30)]
    objects += gang("b-four", "b", size=4, gpus=2, duration=40)
    objects += [pod("a-tiny", "a", gpus=2, duration=10, priority_class="build")]
    objects += gang("a-late", "a", size=3, gpus=4, duration=25)
    return objects


@pytest.mark.parametrize("until", [0, 1, 30, 70, 71, 75, 120])
def test_estimates_are_the_starts_of_the_run_continued(until: float) -> None:
    """Cut points: after the first cycle, mid-way, on the cycle that pipelines a consolidation (70: the
    look-ahead starts with its nominations) and the one that binds it."""
    objects = _busy_workload()
    full, _ = _run(objects)
    stopped, estimates = _run(objects, until=until)
    waiting = _waiting(stopped)
    assert waiting, "the cut leaves jobs waiting"
    look_ahead_start = stopped.cycles[-1].time + 1.0
    actual = _first_binds_after(full, look_ahead_start)
    for job in waiting:
        assert estimates[job] == actual[job], job


def test_a_running_job_of_unknown_duration_is_estimated_from_similar_completed_ones() -> None:
    objects = [
        node("n0", gpus=8),
        queue("q"),
        queue("other"),
        # A job of queue q's shape ran and completed: 8 GPUs for 100 s.
        pod("earlier", gpus=8, duration=100),
        # The same shape again, no duration given: it runs for good in the simulation.
        pod("running", gpus=8, arrival=10),
        # A CPU job of another queue ran for 5 s: it says nothing about q's 8-GPU pods.
        pod("elsewhere", "other", gpus=0, duration=5, arrival=150),
        pod("waiting", gpus=8, arrival=20),
    ]
    result, estimates = _run(objects)
    pods = {p.key: p for p in result.cluster.pods}
    started = pods["default/running"].scheduled_at
    assert started == 100.0  # after `earlier`
    # `running` should end 100 s after it started, like `earlier`; `waiting` starts then.
    assert estimates["default/pg-waiting"] == started + 100.0


def test_input_pods_that_succeeded_with_a_duration_teach_the_estimate() -> None:
    objects = objects_of(
        pod_manifest("done-0", gpus=8, phase="Succeeded", duration="1h", group="done"),
        pod_manifest("done-1", gpus=8, phase="Succeeded", duration="1h", group="done"),
    )
    objects += [node("n0", gpus=8), node("n1", gpus=8), queue("q")]
    objects += [pod_group("done", min_member=2)]
    objects += gang("now", size=2, gpus=8)  # the same shape, no duration
    objects += [pod("next", gpus=8)]
    _, estimates = _run(objects)
    assert estimates["default/pg-next"] == 3600.0
    assert estimates["default/done"] is None  # never scheduled in the run


def test_without_anything_known_the_estimate_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    objects = [node("n0", gpus=8), queue("q"), pod("forever", gpus=8), pod("waiting", gpus=8)]
    _, estimates = _run(objects)
    assert estimates["default/pg-waiting"] is None
    assert estimates["default/pg-forever"] == 0.0


def test_an_estimate_outrun_is_unknown_a_known_duration_outrun_ends_at_once() -> None:
    assert remaining(100.0, known=False, elapsed=30.0) == 70.0
    assert remaining(100.0, known=False, elapsed=130.0) is None
    assert remaining(100.0, known=True, elapsed=130.0) == 0.0
    assert remaining(None, known=False, elapsed=0.0) is None


def test_a_waiting_job_that_never_fits_has_no_estimate() -> None:
    objects = [node("n0", gpus=8), queue("q"), pod("huge", gpus=16), pod("fits", gpus=8, duration=10)]
    _, estimates = _run(objects)
    assert estimates["default/pg-huge"] is None
    assert estimates["default/pg-fits"] == 0.0


def test_a_run_of_exactly_n_cycles_gets_no_look_ahead() -> None:
    objects = [node("n0", gpus=8), queue("q"), pod("first", gpus=8, duration=100), pod("second", gpus=8)]
    _, estimates = _run(objects, cycles=1)
    assert estimates == {"default/pg-first": 0.0, "default/pg-second": None}


def test_the_real_run_is_not_changed_by_the_look_ahead() -> None:
    objects = _busy_workload()
    simulation = Simulation(list(objects), SchedulerConfig(), SimulationOptions(start=START, until=30))
    result = simulation.run()
    before = result_document(result)
    start_estimates(simulation, result)
    after = result_document(result)
    assert before == after


def test_simulate_prints_the_estimates(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo: tts-train waits (OverLimit) until whisper-train ends, whose duration is estimated from
    speech's earlier run of the same shape (1 hour)."""
    out = tmp_path / "result.json"
    assert main(["simulate", "--output", "json", "--out", str(out)]) == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    groups = {f"{g['namespace']}/{g['name']}": g for g in document["podGroups"]}
    assert groups["speech/tts-train"]["estimatedStart"] == 3600.0
    assert groups["language/llm-pretrain"]["estimatedStart"] == 121.0  # started: its actual start
    assert main(["simulate"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if "speech/tts-train" in line)
    assert "3600s" in row
    assert "starts (estimate)" in text


def test_a_node_pools_state_is_estimated_as_that_pools_shard() -> None:
    """Live mode's state is one node pool's: the look-ahead schedules it as that pool's shard."""
    pool = {"kai.scheduler/node-pool": "a"}
    labelled_queue = queue_manifest("q")
    labelled_queue["metadata"]["labels"] = pool
    objects: list[ApiObject] = [node("n0", gpus=8, labels=pool), *objects_of(labelled_queue)]
    objects += [
        pod("first", gpus=8, duration=100, labels=pool, node_name="n0"),
        pod("second", gpus=8, labels=pool),
    ]
    state = cluster_state(objects)

    def estimate(config: SchedulerConfig) -> float | None:
        query = StartTimeQuery(
            state=state, config=config, origin=START, start=0.0, started={"default/first": 0.0}
        )
        return estimate_starts(query)["default/pg-second"]

    assert estimate(look_ahead_config(SchedulerConfig(), Partition(value="a"))) == 100.0
    assert estimate(SchedulerConfig()) is None  # as the default shard, pool a's objects are not scheduled


def test_the_text_column_says_when_each_row_starts() -> None:
    """Per row of waiting pod groups: one estimate, a range, "unknown", or when a running group (its extra
    pods wait) started."""

    def group(name: str, queue: str, start: float | None, running: int = 0) -> dict[str, Any]:
        return {
            "namespace": "ns",
            "name": name,
            "queue": queue,
            "minMember": 1,
            "running": running,
            "pending": 1,
            "unschedulableReason": f"waits in {queue}",
            "estimatedStart": start,
        }

    objects = [node("n0", gpus=8), queue("q"), pod("a", gpus=8)]
    simulation = Simulation(objects, SchedulerConfig(), SimulationOptions(start=START))
    document = result_document(simulation.run())
    document["podGroups"] = [
        group("one", "q1", 120.0),
        group("two", "q2", 60.0),
        group("three", "q2", 90.0),
        group("four", "q3", None),
        group("five", "q4", 30.0),
        group("six", "q4", None),
        group("elastic", "q5", 10.0, running=1),
    ]
    out = StringIO()
    render(document, Console(file=out, width=200), title="t")
    rows = {line.split("│")[1].strip(): line for line in out.getvalue().splitlines() if line.startswith("│")}
    assert "120s" in rows["ns/one"]
    assert "60-90s" in rows["2: ns/two, ns/three"]
    assert "unknown" in rows["ns/four"]
    assert "30s, 1 unknown" in rows["2: ns/five, ns/six"]
    assert "started at 10s" in rows["ns/elastic"]
