"""`benchmarks/scale.py` measures some sizes or kinds of the growth rows at a time (`--sizes`, `--kinds`);
what it stores must keep the points it did not measure, or docs/performance.md loses them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import report  # the benchmarks folder is not a package
import scale

OLD = {"timestamp": "2026-12-01T00:00:00+00:00", "tree": {"commit": "aaaaaaa", "path": "src"}}
NEW = {"timestamp": "2026-12-05T00:00:00+00:00", "tree": {"commit": "bbbbbbb", "path": "src"}}


def _run(header: dict[str, Any], points: list[dict[str, Any]]) -> dict[str, Any]:
    return {**header, "seed": 1, "points": points}


def test_measured_points_replace_theirs_and_the_others_stay() -> None:
    stored = _run(
        OLD,
        [
            {"nodes": 500, "first": {"seconds": 1.0}, "steady": {"medianSeconds": 0.1}},
            {"nodes": 5000, "first": {"seconds": 5.0}, "trickle": {"medianCpuSeconds": 0.9}},
        ],
    )
    measured = _run(
        NEW,
        [
            {"nodes": 5000, "trickle": {"medianCpuSeconds": 0.3}},
            {"nodes": 20000, "trickle": {"medianCpuSeconds": 1.2}},
        ],
    )

    merged = scale.merge_points(stored, measured)

    points = {entry["nodes"]: entry for entry in merged["points"]}
    assert [entry["nodes"] for entry in merged["points"]] == [500, 5000, 20000]
    assert points[500]["steady"]["medianSeconds"] == 0.1
    assert points[5000]["first"]["seconds"] == 5.0
    assert points[5000]["trickle"]["medianCpuSeconds"] == 0.3
    assert set(points[20000]) == {"nodes", "trickle"}
    # Each point says which run measured it; the result's header stays the run of most of them.
    assert points[5000]["first"]["measured"] == OLD
    assert points[5000]["trickle"]["measured"] == NEW
    assert merged["tree"] == OLD["tree"]


def test_a_first_result_is_the_run_itself() -> None:
    measured = _run(NEW, [{"nodes": 500, "first": {"seconds": 1.0}}])

    merged = scale.merge_points(None, measured)

    assert merged["points"] == [{"nodes": 500, "first": {"seconds": 1.0, "measured": NEW}}]


def test_the_provenance_table_names_every_run_whose_points_a_table_shows() -> None:
    stored = _run(
        {**OLD, "machine": {"loadAverage": [1.0, 1.0, 1.0]}}, [{"nodes": 500, "first": {"seconds": 1.0}}]
    )
    measured = _run(NEW, [{"nodes": 5000, "trickle": {"medianCpuSeconds": 0.3}}])
    merged = scale.merge_points(stored, measured)

    rows = report.provenance({"scale": {"after": merged}})

    assert any(row.startswith("| scale after | 2026-12-01") and "aaaaaaa" in row for row in rows), rows
    assert "| scale after: trickle 5,000 | 2026-12-05T00:00:00+00:00 | bbbbbbb | n/a |" in rows, rows
    assert not any("first 500" in row for row in rows), rows  # the stored run's own points are its header's


def _first(seconds: float, share: float, reached: bool = True) -> dict[str, Any]:
    return {"kind": "first", "reached": reached, "seconds": seconds, "cpuShare": share}


def test_a_repeated_first_cycle_point_keeps_the_run_of_least_cpu() -> None:
    # The second run's wall time is the longest but half of it went to other processes: its CPU is least.
    kept = scale.least_cpu([_first(4.0, 1.0), _first(6.0, 0.5), _first(3.5, 1.0)])
    assert kept["seconds"] == 6.0
    assert kept["repeats"] == 3
    assert kept["runSeconds"] == [4.0, 6.0, 3.5]


def test_a_point_run_once_is_kept_as_it_is_and_a_run_out_of_budget_makes_it_not_reached() -> None:
    once = _first(4.0, 1.0)
    assert scale.least_cpu([once]) is once
    late = {"nodes": 20000, "reached": False, "budgetSeconds": 600.0}
    assert scale.least_cpu([_first(4.0, 1.0), late]) is late


def test_first_cycle_runs_go_in_rounds_over_the_sizes_and_kinds_and_each_keeps_its_least() -> None:
    # The growth row compares sizes: each size's runs are spread over the pass, not made back to back.
    order: list[tuple[str, int]] = []
    times = {
        ("first", 500): iter([2.0, 1.0, 3.0]),
        ("first", 2000): iter([9.0, 8.0, 7.0]),
        ("deep", 500): iter([4.0, 5.0, 6.0]),
        ("deep", 2000): iter([9.5, 8.5, 9.0]),
    }

    def run_point(kind: str, nodes: int) -> dict[str, Any]:
        order.append((kind, nodes))
        return {**_first(next(times[kind, nodes]), 1.0), "nodes": nodes}

    points = scale.first_cycle_rounds(["first", "deep"], [500, 2000], 3, run_point)

    one_round = [("first", 500), ("deep", 500), ("first", 2000), ("deep", 2000)]
    assert order == one_round * 3
    assert points["first", 500]["seconds"] == 1.0
    assert points["first", 2000]["seconds"] == 7.0
    assert points["first", 2000]["runSeconds"] == [9.0, 8.0, 7.0]
    assert points["deep", 500]["seconds"] == 4.0
    assert points["deep", 2000]["seconds"] == 8.5


def test_a_first_cycle_point_out_of_budget_is_not_run_again_nor_are_the_kinds_larger_sizes() -> None:
    order: list[tuple[str, int]] = []

    def run_point(kind: str, nodes: int) -> dict[str, Any]:
        order.append((kind, nodes))
        if (kind, nodes) == ("deep", 2000):
            return {"nodes": nodes, "reached": False, "budgetSeconds": 600.0}
        return {**_first(1.0, 1.0), "nodes": nodes}

    points = scale.first_cycle_rounds(["first", "deep"], [500, 2000, 5000], 2, run_point)

    # The deep kind stops at 2,000 nodes; the first kind goes on to 5,000 in both rounds.
    first_round = [("first", 500), ("deep", 500), ("first", 2000), ("deep", 2000), ("first", 5000)]
    second_round = [("first", 500), ("deep", 500), ("first", 2000), ("first", 5000)]
    assert order == first_round + second_round
    assert points["deep", 500]["repeats"] == 2
    assert not points["deep", 2000]["reached"]
    assert points["deep", 5000] == {"nodes": 5000, "reached": False, "skipped": True}
    assert points["first", 5000]["repeats"] == 2
