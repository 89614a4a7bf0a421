"""`benchmarks/fragmentation_cost.py`: issue #23's cost row for gpufragmentation, its first cycle against
KAI's default's, with another tree's plugin alongside to show that speed work changed no decision."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_io  # the benchmarks folder is not a package
import fragmentation_cost


def test_the_ratio_is_of_the_least_cpu_of_each_and_a_tree_against_itself_decides_alike() -> None:
    entry = fragmentation_cost.measure(nodes=40, rounds=1, seed=7, before=bench_io.DEFAULT_TREE)

    least = entry["leastCpuSeconds"]
    assert entry["ratio"] == least["gpufragmentation"] / least["default"]
    assert entry["ratioBefore"] == least["gpufragmentationBefore"] / least["default"]
    assert entry["sameDecisionsAsBefore"] is True
    for name in ("default", "gpufragmentation", "gpufragmentationBefore"):
        (run,) = entry["runs"][name]
        assert run["nodes"] == 40
        assert run["decisions"].get("bind", 0) > 0  # the backlog is placed, not only measured


def test_a_before_tree_without_the_package_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^--before: .* holds no kai_scheduler package$"):
        fragmentation_cost.main(["--before", str(tmp_path), "--no-save"])
