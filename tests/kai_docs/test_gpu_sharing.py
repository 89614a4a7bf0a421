"""KAI v0.17.0 docs/gpu-sharing/README.md and docs/gpu-sharing/mps/README.md: gpu-sharing.yaml (0.5 of a
GPU), gpu-memory.yaml (2000 MiB), gpu-sharing-non-default-container.yaml, gpu-sharing-init-container.yaml
and mps/gpu-sharing-with-mps.yaml, on one node of one 40 GiB GPU (GPU sharing on, as the doc's
prerequisite `global.gpuSharing=true` asks). gpu-sharing.yaml and gpu-memory.yaml both name their pod
`gpu-sharing`, so the doc applies them one at a time, and so does the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import DEFAULT_QUEUES, fake_gpu_nodes, simulate

GPU_SHARING = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-sharing
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    gpu-fraction: "0.5"
spec:
  schedulerName: kai-scheduler
  containers:
    - name: gpu-workload
      image: nvidia/cuda:13.0.2-base-ubi8
      command: ["nvidia-smi"]
      args: ["-L"]
"""

GPU_MEMORY = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-sharing
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    gpu-memory: "2000"
spec:
  schedulerName: kai-scheduler
  containers:
    - name: gpu-workload
      image: nvidia/cuda:13.0.2-base-ubi8
      command: ["nvidia-smi"]
      args: ["-L"]
"""

NON_DEFAULT_CONTAINER = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-sharing-non-default
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    gpu-fraction: "0.5"
    gpu-fraction-container-name: "gpu-workload"
spec:
  schedulerName: kai-scheduler
  containers:
    - name: sidecar
      image: busybox
      args: ["sleep", "infinity"]
    - name: gpu-workload
      image: nvidia/cuda:13.0.2-base-ubi8
      command: ["nvidia-smi"]
      args: ["-L"]
    - name: another-sidecar
      image: busybox
      args: ["sleep", "infinity"]
"""

INIT_CONTAINER = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-sharing-init-container
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    gpu-fraction: "0.5"
    gpu-fraction-container-name: "gpu-init"
spec:
  schedulerName: kai-scheduler
  initContainers:
    - name: gpu-init
      image: nvidia/cuda:13.0.2-base-ubi8
      command: ["nvidia-smi"]
      args: ["-L"]
  containers:
    - name: main-app
      image: ubuntu
      args: ["sleep", "infinity"]
"""

WITH_MPS = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-sharing-with-mps
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    gpu-fraction: "0.5"
spec:
  schedulerName: kai-scheduler
  containers:
    - name: gpu-workload
      image: nvidia/cuda:13.0.2-base-ubi8
      command: ["nvidia-smi"]
      args: ["-L"]
      volumeMounts:
        - name: mps
          mountPath: /tmp/nvidia-mps
  volumes:
    - name: mps
      hostPath:
        path: /tmp/nvidia-mps
        type: DirectoryOrCreate
"""


def test_half_a_gpu_is_shared_with_up_to_another_half(tmp_path: Path) -> None:
    # "Other pods with total request of up to 0.5 GPU memory will be able to share this device as well"
    run = simulate(
        tmp_path, fake_gpu_nodes(1, 1), DEFAULT_QUEUES, GPU_SHARING, WITH_MPS, NON_DEFAULT_CONTAINER
    )
    running = run.running()
    assert set(running) == {"gpu-sharing", "gpu-sharing-with-mps"}
    assert run.pods["gpu-sharing"]["gpuGroups"] == run.pods["gpu-sharing-with-mps"]["gpuGroups"] != []
    assert run.pods["gpu-sharing"]["gpu"] == 0.5
    assert run.pending() == {"gpu-sharing-non-default"}


def test_gpu_memory_pod_leaves_the_rest_of_the_gpu_to_others(tmp_path: Path) -> None:
    # 2000 MiB of a 40960 MiB GPU; the rest can be shared: two half-GPU pods do not both fit beside it.
    run = simulate(
        tmp_path, fake_gpu_nodes(1, 1), DEFAULT_QUEUES, GPU_MEMORY, NON_DEFAULT_CONTAINER, INIT_CONTAINER
    )
    assert run.pods["gpu-sharing"]["phase"] == "Running"
    # KAI floors device memory to 100 MiB: 2000 of 40900 MiB.
    assert run.pods["gpu-sharing"]["gpu"] == pytest.approx(2000 / 40900)
    assert len(run.running()) == 2
    groups = {tuple(p["gpuGroups"]) for p in run.document["pods"] if p["phase"] == "Running"}
    assert len(groups) == 1  # one physical GPU, shared


def test_fraction_on_a_non_default_or_init_container_is_a_half(tmp_path: Path) -> None:
    run = simulate(tmp_path, fake_gpu_nodes(1, 1), DEFAULT_QUEUES, NON_DEFAULT_CONTAINER, INIT_CONTAINER)
    assert set(run.running()) == {"gpu-sharing-non-default", "gpu-sharing-init-container"}
    assert {p["gpu"] for p in run.document["pods"]} == {0.5}
