"""`kai-scheduler trace import openb`: a pod per row, with its arrival, duration, GPUs, priority and queue
(docs/traces.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_scheduler.cli import main
from trace_files import OPENB_NODES, OPENB_PODS, annotations, imported, requests, write

ARRIVAL = "simulation.kai.scheduler/arrival"
DURATION = "simulation.kai.scheduler/duration"


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes = write(tmp_path, "nodes.csv", OPENB_NODES, ["n-0,64000,262144,8,V100M32", "n-1,32000,131072,0,"])
    pods = write(
        tmp_path,
        "pods.csv",
        OPENB_PODS,
        [
            # shared GPU, latency-sensitive, scheduled 5 s after creation, deleted at 1000
            "p-shared,6000,12288,1,460,,LS,Running,100,1000,105",
            # two whole GPUs of a given model, best effort; created before p-shared (the file is not sorted)
            "p-multi,16000,32768,2,1000,V100M16|V100M32,BE,Succeeded,50,350,60",
            # never scheduled: runs as long as it existed (lifetime) unless skipped
            "p-pending,4000,8192,1,1000,,Burstable,Pending,200,500,",
            # CPU only, Guaranteed
            "p-cpu,2000,4096,0,0,,Guaranteed,Running,300,300,300",
        ],
    )
    return nodes, pods


def test_each_row_becomes_a_pod_with_its_arrival_duration_request_priority_and_queue(
    tmp_path: Path, trace: tuple[Path, Path]
) -> None:
    nodes, pods = trace
    docs = imported(["openb", str(pods), "--nodes", str(nodes)], tmp_path / "out.yaml")

    shared = docs["Pod", "p-shared"]
    assert annotations(shared)[ARRIVAL] == "100s"
    assert annotations(shared)[DURATION] == "895s"  # deletion - scheduled
    assert annotations(shared)["gpu-fraction"] == "0.46"
    assert "nvidia.com/gpu" not in requests(shared)
    assert requests(shared) == {"cpu": "6000m", "memory": "12288Mi"}
    assert shared["spec"]["priorityClassName"] == "inference"  # LS
    assert shared["metadata"]["labels"]["kai.scheduler/queue"] == "ls"
    assert shared["metadata"]["namespace"] == "ls"

    multi = docs["Pod", "p-multi"]
    assert annotations(multi)[ARRIVAL] == "50s" and annotations(multi)[DURATION] == "290s"
    assert requests(multi)["nvidia.com/gpu"] == "2" and "gpu-fraction" not in annotations(multi)
    assert multi["spec"]["priorityClassName"] == "train"  # BE
    assert multi["metadata"]["labels"]["kai.scheduler/queue"] == "be"
    terms = multi["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["V100M16", "V100M32"]}
    ]

    pending = docs["Pod", "p-pending"]
    assert annotations(pending)[DURATION] == "300s"  # deletion - creation: its lifetime
    assert pending["spec"]["priorityClassName"] == "build-preemptible"

    cpu = docs["Pod", "p-cpu"]
    assert annotations(cpu)[DURATION] == "1s"  # deleted when scheduled: at least a second
    assert cpu["spec"]["priorityClassName"] == "build"
    assert "nvidia.com/gpu" not in requests(cpu)


def test_nodes_and_queues_with_quotas_by_gpu_seconds(tmp_path: Path, trace: tuple[Path, Path]) -> None:
    nodes, pods = trace
    docs = imported(["openb", str(pods), "--nodes", str(nodes)], tmp_path / "out.yaml")
    node = docs["Node", "n-0"]
    assert node["status"]["allocatable"] == {
        "cpu": "64000m",
        "memory": "262144Mi",
        "pods": "110",
        "nvidia.com/gpu": "8",
    }
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "V100M32"
    assert "nvidia.com/gpu.product" not in docs["Node", "n-1"]["metadata"]["labels"]
    # GPU-seconds: ls 0.46 x 895 = 411.7, be 2 x 290 = 580, burstable 1 x 300 = 300, guaranteed 0:
    # 8 GPUs split 2.55 / 3.59 / 1.86 / 0 -> 2 / 3 / 1 / 0, and the 2 left to the largest remainders
    # (burstable .86, be .59).
    quotas = {
        name: doc["spec"]["resources"]["gpu"]["quota"]
        for (kind, name), doc in docs.items()
        if kind == "Queue"
    }
    assert quotas == {"be": 4, "burstable": 2, "guaranteed": 0, "ls": 2}


def test_pods_come_in_arrival_order_whatever_the_file_order(tmp_path: Path, trace: tuple[Path, Path]) -> None:
    nodes, pods = trace
    docs = imported(["openb", str(pods), "--nodes", str(nodes)], tmp_path / "out.yaml")
    assert [name for kind, name in docs if kind == "Pod"] == ["p-multi", "p-shared", "p-pending", "p-cpu"]


def test_unscheduled_skip_leaves_out_pods_the_trace_never_ran(
    tmp_path: Path, trace: tuple[Path, Path]
) -> None:
    nodes, pods = trace
    docs = imported(["openb", str(pods), "--nodes", str(nodes), "--unscheduled", "skip"], tmp_path / "o.yaml")
    assert ("Pod", "p-pending") not in docs and ("Pod", "p-shared") in docs


def test_window_and_limit_take_a_slice_that_starts_at_second_zero(
    tmp_path: Path, trace: tuple[Path, Path]
) -> None:
    nodes, pods = trace
    docs = imported(["openb", str(pods), "--nodes", str(nodes), "--window", "60:1000"], tmp_path / "w.yaml")
    assert [name for kind, name in docs if kind == "Pod"] == ["p-shared", "p-pending", "p-cpu"]
    assert annotations(docs["Pod", "p-shared"])[ARRIVAL] == "40s"
    docs = imported(["openb", str(pods), "--nodes", str(nodes), "--limit", "2"], tmp_path / "l.yaml")
    assert [name for kind, name in docs if kind == "Pod"] == ["p-multi", "p-shared"]


def test_the_node_list_defaults_to_the_gpu_nodes_next_to_the_pods(
    tmp_path: Path, trace: tuple[Path, Path]
) -> None:
    nodes, pods = trace
    nodes.rename(tmp_path / "openb_node_list_gpu_node.csv")
    docs = imported(["openb", str(pods)], tmp_path / "out.yaml")
    assert ("Node", "n-0") in docs


def test_the_output_is_the_same_every_time(tmp_path: Path, trace: tuple[Path, Path]) -> None:
    nodes, pods = trace
    for out in ("a.yaml", "b.yaml"):
        assert (
            main(["trace", "import", "openb", str(pods), "--nodes", str(nodes), "-o", str(tmp_path / out)])
            == 0
        )
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()


def test_a_folder_output_holds_nodes_queues_and_jobs(tmp_path: Path, trace: tuple[Path, Path]) -> None:
    nodes, pods = trace
    docs = imported(["openb", str(pods), "--nodes", str(nodes)], tmp_path / "folder")
    assert sorted(p.name for p in (tmp_path / "folder").iterdir()) == [
        "jobs.yaml",
        "nodes.yaml",
        "queues.yaml",
    ]
    assert len(docs) == 2 + 4 + 4


def test_a_pod_list_without_times_or_qos_arrives_at_once_and_runs_on(tmp_path: Path) -> None:
    # As the multigpu lists: name,cpu_milli,memory_mib,num_gpu,gpu_milli only.
    write(tmp_path, "openb_node_list_gpu_node.csv", OPENB_NODES, ["n-0,64000,262144,8,V100M32"])
    pods = write(
        tmp_path, "pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", ["p-0,12000,16384,4,1000"]
    )
    pod = imported(["openb", str(pods)], tmp_path / "out.yaml")["Pod", "p-0"]
    assert annotations(pod) == {ARRIVAL: "0s"}  # no duration: it runs until the simulation ends
    assert pod["spec"]["priorityClassName"] == "train"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "default"
    assert requests(pod)["nvidia.com/gpu"] == "4"
    queue = imported(["openb", str(pods)], tmp_path / "out.yaml")["Queue", "default"]
    assert queue["spec"]["resources"]["gpu"]["quota"] == 8  # no times: shared by the GPUs asked for
