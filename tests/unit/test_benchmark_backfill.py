"""`benchmarks/backfill.py` (issue #24's benchmark): its saturated workload is the issue's, as manifests
`simulate` reads, and its acceptance check holds a run to the issue's three conditions."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kai_scheduler.api.durations import parse_duration
from kai_scheduler.api.objects import Node, PodGroup, Queue
from kai_scheduler.sim.loader import load_manifests

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import backfill  # the benchmarks folder is not a package
import run


def _annotation(doc: dict[str, Any], what: str) -> str:
    value: str = doc["metadata"]["annotations"][f"simulation.kai.scheduler/{what}"]
    return value


def test_the_saturated_workload_is_the_issues() -> None:
    docs = backfill.saturated(hours=7).docs
    pods = [d for d in docs if d["kind"] == "Pod"]
    small = [p for p in pods if p["metadata"]["namespace"] == "research"]
    gangs = [d for d in docs if d["kind"] == "PodGroup"]

    assert sum(1 for d in docs if d["kind"] == "Node") == 32
    assert len(small) == 7 * 360  # one every 10 s for 7 h
    assert _annotation(small[1], "arrival") == "10s"
    minutes = [parse_duration(_annotation(p, "duration")) / 60 for p in small]
    assert min(minutes) >= 20 and max(minutes) <= 90
    assert [(g["spec"]["minMember"], _annotation(g, "arrival")) for g in gangs] == [
        (16, f"{hour * 3600}s") for hour in range(1, 8)
    ]
    assert len(pods) - len(small) == 7 * 16
    queues = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Queue"}
    assert queues["research"]["reclaimMinRuntime"] == "2h"
    assert "reclaimMinRuntime" not in queues["training"]
    assert {queues[q]["resources"]["gpu"]["quota"] for q in ("research", "training")} == {128}


def test_the_written_workload_loads_as_simulate_reads_it(tmp_path: Path) -> None:
    run.write_yaml(backfill.saturated(hours=1).docs, tmp_path)

    objects = [loaded.obj for loaded in load_manifests([str(tmp_path)])]

    queues = {o.metadata.name: o for o in objects if isinstance(o, Queue)}
    assert queues["research"].spec.reclaim_min_runtime == "2h"
    assert queues["research"].spec.parent_queue == "ml"
    assert sum(1 for o in objects if isinstance(o, Node)) == 32
    assert [o.metadata.name for o in objects if isinstance(o, PodGroup)] == ["gang-1"]


def _run(gang_wait_minutes: float, allocation: float) -> dict[str, Any]:
    return {
        "largeJobs": 7,
        "largeStarted": 7,
        "largeWaitSeconds": {"mean": gang_wait_minutes * 60},
        "gpuAllocationArrivals": allocation,
        "gpuAllocationRun": allocation,
    }


def test_acceptance_holds_the_gang_wait_to_one_and_a_half_longest_small_jobs() -> None:
    runs = {"default": _run(450, 0.947), "reservation": _run(135, 0.92)}
    assert backfill.acceptance({"runs": runs})["reservation"]["meanWaitMet"]

    runs["reservation"] = _run(136, 0.92)
    check = backfill.acceptance({"runs": runs})["reservation"]
    assert not check["meanWaitMet"]
    assert check["allocationMet"]  # 2.7 points


def test_acceptance_allows_at_most_three_points_of_allocation() -> None:
    runs = {"default": _run(450, 0.947), "reservation": _run(60, 0.915)}

    check = backfill.acceptance({"runs": runs})["reservation"]

    assert not check["allocationMet"]  # 3.2 points
    assert check["everyGangStarts"]
