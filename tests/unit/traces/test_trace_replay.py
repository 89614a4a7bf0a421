"""Imported traces replay: `trace import` then `simulate` on what it wrote, through the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kai_scheduler.cli import main
from trace_files import POLLUX, write

REPO = Path(__file__).resolve().parents[3]
OPENB = REPO.parent / "shared" / "traces" / "cluster-trace-gpu-v2023" / "csv"


def simulate(manifests: Path, tmp_path: Path, *extra: str) -> dict[str, Any]:
    out = tmp_path / "result.json"
    args = [
        "simulate",
        str(manifests),
        "--max-cycles",
        "100000",
        "--output",
        "json",
        "--out",
        str(out),
        *extra,
    ]
    assert main(args) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def test_an_elastic_job_starts_with_the_gpus_there_are_and_grows_as_others_end(tmp_path: Path) -> None:
    # One node of 4 GPUs. ncf-0 (1 replica, 0.5 GPU-hours: 1,800 s) arrives at 0; cifar10-1 (6 replicas,
    # 0.5 GPU-hours: 300 s each) at 10: minMember 1, so it starts with the 3 GPUs left instead of waiting
    # for 6, and its other 3 pods start when its first ones end (at 310).
    workload = write(tmp_path, "w.csv", POLLUX, ["ncf-0,0,ncf,1,256", "cifar10-1,10,cifar10,6,2048"])
    manifests = tmp_path / "pollux.yaml"
    assert main(["trace", "import", "pollux", str(workload), "--cluster", "1x4", "-o", str(manifests)]) == 0
    document = simulate(manifests, tmp_path)
    started = sorted(p["scheduledAt"] for p in document["pods"] if p["name"].startswith("cifar10-1-"))
    assert started == [10, 10, 10, 310, 310, 310]
    assert document["summary"]["pods"]["Succeeded"] == 7


@pytest.mark.skipif(not OPENB.exists(), reason="the openb trace is read from ../shared/traces")
def test_a_slice_of_the_real_openb_trace_replays_to_a_report(tmp_path: Path) -> None:
    manifests = tmp_path / "openb"
    pods = str(OPENB / "openb_pod_list_default.csv")
    assert (
        main(["trace", "import", "openb", pods, "--window", "9d:", "--limit", "150", "-o", str(manifests)])
        == 0
    )
    document = simulate(manifests, tmp_path, "--report", str(tmp_path / "report"))
    assert document["summary"]["steady"]
    assert len(document["pods"]) == 150
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["podGroups"]["total"] == 150 and summary["podGroups"]["started"] > 0
    assert 0 < summary["gpuAllocationRatio"] <= 1
