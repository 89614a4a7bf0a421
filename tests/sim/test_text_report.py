"""The text report answers "what happened to my job" (issue #14): the timeline names the pods each action
moved and the pod group it acted for, a pod that ended keeps its node, and a run that went on after it
was steady says since when."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kai_scheduler.cli import main

RECLAIM = Path(__file__).with_name("reclaim_for_report.yaml")


def run(tmp_path: Path, *args: str) -> tuple[str, dict[str, Any]]:
    manifests = RECLAIM
    out = tmp_path / "result.json"
    assert main(["simulate", str(manifests), *args, "--output", "json", "--out", str(out)]) == 0
    text = tmp_path / "report.txt"
    assert main(["simulate", str(manifests), *args, "--out", str(text)]) == 0
    return text.read_text(), json.loads(out.read_text())


def test_the_timeline_names_the_evicted_pod_and_the_job_it_made_room_for(tmp_path: Path) -> None:
    text, document = run(tmp_path)
    (evicted,) = [d for d in document["decisions"] if d["type"] == "evict"]
    assert evicted["action"] == "reclaim" and evicted["for"] == "default/pg-b-0"
    assert f"reclaim for default/pg-b-0: evicted {evicted['pod']}; pipelined default/b-0" in text
    assert all("for" not in d for d in document["decisions"] if d["action"] == "allocate")


def test_a_pod_that_ended_keeps_the_node_it_ran_on(tmp_path: Path) -> None:
    _, document = run(tmp_path)
    (pod,) = [p for p in document["pods"] if p["name"] == "b-0"]
    assert (pod["phase"], pod["node"]) == ("Succeeded", "n0")


@pytest.mark.parametrize("until", ["2h"])
def test_a_run_that_goes_on_after_it_is_steady_says_since_when(tmp_path: Path, until: str) -> None:
    text, document = run(tmp_path, "--until", until)
    summary = document["summary"]
    assert summary["time"] == 7200 and summary["steady"]
    assert 600 <= summary["steadySince"] < 7200
    assert f"7200s simulated (steady from {summary['steadySince']:g}s)" in text
    _, plain = run(tmp_path)
    assert "steadySince" not in plain["summary"]


def test_jobs_alike_that_wait_for_the_same_reason_share_a_row(tmp_path: Path) -> None:
    running = RECLAIM.read_text().split("- apiVersion: v1\n  kind: Pod\n  metadata: {name: b-0")[0]
    pod = (
        "- {{apiVersion: v1, kind: Pod, metadata: {{name: big-{i}, labels: {{kai.scheduler/queue: b}}}},"
        " spec: {{schedulerName: kai-scheduler,"
        ' containers: [{{name: m, resources: {{requests: {{nvidia.com/gpu: "8"}}}}}}]}}}}'
    )
    manifests = tmp_path / "alike.yaml"
    manifests.write_text(running + "\n".join(pod.format(i=i) for i in range(3)) + "\n")
    text = tmp_path / "report.txt"
    assert main(["simulate", str(manifests), "--out", str(text)]) == 0
    report = text.read_text()
    assert "Waiting pod groups (3)" in report, report
    # big-0 tried first and failed; big-1 and big-2, of its shape, wait for that one reason: one row.
    assert "2: default/pg-big-1, default/pg-big-2" in report, report


def test_a_completed_run_ends_with_what_ran(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "overnight-batch.yaml"
    text = tmp_path / "report.txt"
    assert main(["simulate", str(example), "--out", str(text)]) == 0
    out = tmp_path / "result.json"
    assert main(["simulate", str(example), "--output", "json", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["summary"]["pods"]["Running"] == document["summary"]["pods"]["Pending"] == 0
    evictions = sum(1 for d in document["decisions"] if d["type"] == "evict")
    (line,) = [line for line in text.read_text().splitlines() if line.startswith("what ran:")]
    assert f"; {evictions} evictions;" in line and "GPU-hours used" in line
    # An unfinished run (the demo) has no such line.
    demo = tmp_path / "demo.txt"
    assert main(["simulate", "--out", str(demo)]) == 0
    assert "what ran:" not in demo.read_text()
