"""KAI v0.17.0 docs/quickstart/README.md: the default queues and the two example pods
(docs/quickstart/pods/cpu-only-pod.yaml, gpu-pod.yaml) on a fake GPU node set, as the quickstart assumes."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, fake_gpu_nodes, simulate

CPU_ONLY_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: cpu-only-pod
  labels:
    kai.scheduler/queue: default-queue
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: ubuntu
      args: ["sleep", "infinity"]
      resources:
        requests:
          cpu: 100m
          memory: 250M
"""

GPU_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
  labels:
    kai.scheduler/queue: default-queue
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: ubuntu
      command: ["bash", "-c"]
      args: ["nvidia-smi; trap 'exit 0' TERM; sleep infinity & wait"]
      resources:
        limits:
          nvidia.com/gpu: "1"
"""


def test_both_example_pods_run_in_the_default_queue(tmp_path: Path) -> None:
    run = simulate(tmp_path, fake_gpu_nodes(), DEFAULT_QUEUES, CPU_ONLY_POD, GPU_POD)
    assert set(run.running()) == {"cpu-only-pod", "gpu-pod"}
    assert run.pods["gpu-pod"]["gpu"] == 1.0
    assert run.pods["cpu-only-pod"]["gpu"] == 0.0
    assert {run.pods[p]["queue"] for p in ("cpu-only-pod", "gpu-pod")} == {"default-queue"}
    assert run.queues["default-queue"]["parent"] == "default-parent-queue"
    assert run.warnings == []


def test_without_the_default_queues_the_pods_wait_and_say_why(tmp_path: Path) -> None:
    # The quickstart's queues are what an install creates; the simulator adds none of its own.
    run = simulate(tmp_path, fake_gpu_nodes(), CPU_ONLY_POD, GPU_POD)
    assert run.running() == {}
    assert "default-queue" in run.group_of("gpu-pod")["unschedulableReason"]
