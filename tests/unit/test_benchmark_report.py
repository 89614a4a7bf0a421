"""docs/performance.md's issue #23 section (`benchmarks/report.py`): each of the issue's rows shows the figure
it was filed with beside the one recorded in results.json, and a figure not recorded says so."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import report  # the benchmarks folder is not a package


def _row(results: dict[str, Any], number: int) -> list[str]:
    """The cells of the section's row `number` (1-based), as rendered."""
    line = next(x for x in report.issue_23_rows(results) if x.startswith(f"| {number}. "))
    return [cell.strip() for cell in line.strip("|").split("|")]


def _cost(ratio: float) -> dict[str, Any]:
    least = {"default": 6.0, "gpufragmentation": 6.0 * ratio}
    return {"after": {"ratio": ratio, "goalRatio": 1.2, "rounds": 3, "nodes": 5000, "leastCpuSeconds": least}}


def test_every_row_of_the_issue_renders_once_with_its_filed_figure() -> None:
    lines = report.issue_23_rows({})
    rows = [x for x in lines if x[:3] in {f"| {n}" for n in range(1, 10)}]
    assert len(rows) == len(report.ISSUE_23_ROWS) == 8
    assert _row({}, 7)[1] == "1.52-1.56x"  # the issue's own figure, with nothing recorded


def test_a_recorded_cost_ratio_renders_after_with_its_verdict() -> None:
    _, _, after, goal, met = _row({"fragmentationCost": _cost(1.18)}, 7)
    assert after.startswith("**1.18x**") and "7.08 s against the default's 6.00 s" in after
    assert (goal, met) == ("<= 1.2x", "yes")
    assert _row({"fragmentationCost": _cost(1.25)}, 7)[4] == "**no**"


def test_a_figure_not_recorded_says_so_and_has_no_verdict() -> None:
    cells = _row({"fragmentationCost": _cost(1.18)}, 8)  # the FGD curve is not recorded
    assert cells[2].startswith("not in results.json yet") and cells[4] == "n/a"


def test_the_fgd_row_reads_the_curve_and_names_the_files_below() -> None:
    def file(*differences: float) -> dict[str, Any]:
        levels = {
            str(80 + i): {"ours": 90.0, "fgd": 90.0 - d, "difference": d} for i, d in enumerate(differences)
        }
        return {"levels": levels, "below": [80 + i for i, d in enumerate(differences) if d < 0]}

    curve = {"a": file(0.5, 0.0), "b": file(0.2, -0.4)}
    cells = _row({"fragmentation": {"after": {"curve": curve}}}, 8)
    assert cells[2].startswith("**1 of 2 files**") and "-0.40 points" in cells[2] and "below on b" in cells[2]
    assert cells[4] == "**no**"
    curve["b"] = file(0.2, 0.1)
    assert _row({"fragmentation": {"after": {"curve": curve}}}, 8)[4] == "yes"
    curve["b"]["belowBySeed"] = {"43": [98, 99, 100]}
    cells = _row({"fragmentation": {"after": {"curve": curve}}}, 8)
    assert cells[2].endswith("single seeds below somewhere: b seed 43") and cells[4] == "yes"


def _first_points(**kinds: dict[int, float]) -> dict[str, Any]:
    """Scale results with first-cycle points of `kinds` (kind -> nodes -> µs per pod, 1,000 pods placed)."""
    sizes = sorted({n for costs in kinds.values() for n in costs})
    points = [
        {
            "nodes": n,
            **{
                kind: {"reached": True, "seconds": costs[n] * 1e-6 * 1000, "placed": 1000, "cpuShare": 1.0}
                for kind, costs in kinds.items()
                if n in costs
            },
        }
        for n in sizes
    ]
    return {"scale": {"after": {"points": points}}}


def test_cpu_per_pod_is_flat_only_within_a_tenth_from_500_to_20000_nodes() -> None:
    # The growth rows' backlog (`first`) decides; the deep backlog's spread is shown beside it.
    flat = {500: 200.0, 5000: 210.0, 20000: 219.0}
    steep = {500: 200.0, 5000: 210.0, 20000: 230.0}
    assert _row(_first_points(first=flat), 5)[4] == "yes"
    assert _row(_first_points(first=steep), 5)[4] == "**no**"
    cells = _row(_first_points(first=flat, deep={500: 800.0, 5000: 400.0, 20000: 400.0}), 5)
    assert cells[2].startswith("**1.09x**") and "the deep backlog 2.00x" in cells[2] and cells[4] == "yes"
    assert _row(_first_points(first={500: 200.0, 5000: 210.0}), 5)[2].startswith("not in results.json yet")


def test_the_first_cycle_row_reads_the_deep_backlog_at_5000_nodes() -> None:
    # 1,000 pods at 1,400 µs: 1.4 s on the deep backlog; the half-cluster backlog's 1.0 s is shown beside.
    cells = _row(_first_points(first={5000: 1000.0}, deep={5000: 1400.0}), 4)
    assert cells[2].startswith("**1.40 s** of CPU") and "half the GPUs" in cells[2] and cells[4] == "yes"
    assert _row(_first_points(first={5000: 1000.0}, deep={5000: 1600.0}), 4)[4] == "**no**"
    assert _row(_first_points(first={5000: 1000.0}), 4)[2].startswith("not in results.json yet")
