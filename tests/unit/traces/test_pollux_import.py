"""`kai-scheduler trace import pollux`: each row an elastic job (a PodGroup with minMember 1 and
num_replicas one-GPU pods), with its arrival and a duration from its application's GPU-hours."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kai_scheduler.cli import main
from trace_files import POLLUX, annotations, imported, requests, write

ARRIVAL = "simulation.kai.scheduler/arrival"
DURATION = "simulation.kai.scheduler/duration"


def workload(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        "workload.csv",
        POLLUX,
        ["cifar10-0,107,cifar10,6,2048", "imagenet-1,110,imagenet,32,6400", "ncf-2,135,ncf,1,32768"],
    )


def test_each_row_is_an_elastic_pod_group_with_its_arrival_and_duration(tmp_path: Path) -> None:
    docs = imported(["pollux", str(workload(tmp_path))], tmp_path / "out.yaml")

    group = docs["PodGroup", "cifar10-0"]
    assert group["spec"] == {"minMember": 1, "queue": "cifar10", "priorityClassName": "train"}
    assert annotations(group)[ARRIVAL] == "107s"
    pods = [doc for (kind, name), doc in docs.items() if kind == "Pod" and name.startswith("cifar10-0-")]
    assert len(pods) == 6  # num_replicas: minMember 1 < replicas, KAI's elastic job
    for pod in pods:
        assert annotations(pod)["pod-group-name"] == "cifar10-0"
        assert annotations(pod)[ARRIVAL] == "107s"
        assert annotations(pod)[DURATION] == "300s"  # 0.5 GPU-hours over 6 GPUs
        assert requests(pod)["nvidia.com/gpu"] == "1"
        assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "cifar10"

    imagenet = [doc for (kind, name), doc in docs.items() if kind == "Pod" and name.startswith("imagenet-1-")]
    assert len(imagenet) == 32
    assert annotations(imagenet[0])[DURATION] == "33750s"  # 300 GPU-hours over 32 GPUs
    assert docs["PodGroup", "ncf-2"]["spec"]["minMember"] == 1


def test_the_cluster_and_gpu_hours_can_be_chosen(tmp_path: Path) -> None:
    docs = imported(
        ["pollux", str(workload(tmp_path)), "--cluster", "2x8", "--gpu-hours", "cifar10=1.5"],
        tmp_path / "out.yaml",
    )
    nodes = [doc for (kind, _), doc in docs.items() if kind == "Node"]
    assert [n["metadata"]["name"] for n in nodes] == ["node-0", "node-1"]
    assert {n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes} == {"8"}
    assert annotations(docs["Pod", "cifar10-0-0"])[DURATION] == "900s"  # 1.5 GPU-hours over 6 GPUs


def test_queues_share_the_default_cluster_by_gpu_hours(tmp_path: Path) -> None:
    docs = imported(["pollux", str(workload(tmp_path))], tmp_path / "out.yaml")
    quotas = {
        name: doc["spec"]["resources"]["gpu"]["quota"]
        for (kind, name), doc in docs.items()
        if kind == "Queue"
    }
    # 64 GPUs (16x4) by 0.5 : 300 : 0.5 GPU-hours
    assert quotas == {"cifar10": 0, "imagenet": 64, "ncf": 0}


def test_without_an_output_the_manifests_go_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "import", "pollux", str(workload(tmp_path)), "--limit", "1"]) == 0
    captured = capsys.readouterr()
    kinds = [doc["kind"] for doc in yaml.safe_load_all(captured.out)]
    assert kinds == ["Node"] * 16 + ["Queue", "PodGroup"] + ["Pod"] * 6
    assert "1 jobs (6 pods)" in captured.err
