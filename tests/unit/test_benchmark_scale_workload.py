"""The scale benchmark's first-cycle backlogs ask what their rows say: issue #23's first-cycle row is "a
backlog asking 2.7 times the cluster's GPUs (20,000 pending pods of mixed shapes)" at 5,000 nodes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scale_workload  # the benchmarks folder is not a package

SEED = 20260108


def _gpus_asked(docs: list[dict[str, Any]]) -> float:
    asked = 0.0
    for doc in docs:
        if doc["kind"] != "Pod":
            continue
        requests = doc["spec"]["containers"][0]["resources"].get("requests", {})
        fraction = doc["metadata"].get("annotations", {}).get("gpu-fraction", "0")
        asked += float(requests.get("nvidia.com/gpu", 0)) + float(fraction)
    return asked


@pytest.mark.parametrize("nodes", [500, 2000])
def test_the_deep_backlog_asks_about_2_7_times_the_gpus_with_4_pods_a_node(nodes: int) -> None:
    docs = scale_workload.first_cycle_deep(nodes, SEED)
    pods = [doc for doc in docs if doc["kind"] == "Pod"]
    assert len(pods) == nodes * scale_workload.PENDING_PER_NODE_FIRST
    assert all(pod["status"]["phase"] == "Pending" for pod in pods)
    ratio = _gpus_asked(docs) / (nodes * scale_workload.GPUS_PER_NODE)
    assert 2.6 <= ratio <= 2.8
    shapes = {pod["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu") for pod in pods}
    assert {"1", "2", "4", "8"} <= shapes  # mixed shapes, not one
    assert any(doc["kind"] == "PodGroup" for doc in docs)


def test_the_growth_rows_backlog_asks_about_half_the_gpus() -> None:
    ratio = _gpus_asked(scale_workload.first_cycle(500, SEED)) / (500 * scale_workload.GPUS_PER_NODE)
    assert 0.4 <= ratio <= 0.6
