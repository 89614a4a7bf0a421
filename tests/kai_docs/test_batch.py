"""KAI v0.17.0 docs/batch/README.md: batch-job.yaml, batch-job-min-member.yaml, pytorch-job.yaml, and the
external PodGroup example it points to (examples/batch/external-podgroup-job.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import DEFAULT_QUEUES, fake_gpu_nodes, simulate

BATCH_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: batch-job
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      labels:
        kai.scheduler/queue: default-queue
    spec:
      schedulerName: kai-scheduler
      restartPolicy: OnFailure
      containers:
        - name: main
          image: ubuntu
          args: ["sleep", "infinity"]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""

BATCH_JOB_MIN_MEMBER = """
apiVersion: batch/v1
kind: Job
metadata:
  name: batch-job-min-member
  annotations:
    kai.scheduler/batch-min-member: "2"
spec:
  parallelism: 6
  completions: 6
  template:
    metadata:
      labels:
        kai.scheduler/queue: default-queue
    spec:
      schedulerName: kai-scheduler
      restartPolicy: OnFailure
      containers:
        - name: main
          image: ubuntu
          args: ["sleep", "infinity"]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""

PYTORCH_JOB = """
apiVersion: "kubeflow.org/v1"
kind: "PyTorchJob"
metadata:
  name: "pytorch-dist-mnist-nccl"
  labels:
    kai.scheduler/queue: default-queue
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          schedulerName: kai-scheduler
          containers:
            - name: pytorch
              image: ghcr.io/kubeflow/training-v1/pytorch-dist-mnist:latest
              args: ["--backend", "nccl", "--batch-size", "2048", "--epochs", "900"]
              resources:
                limits:
                  nvidia.com/gpu: "1"
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          schedulerName: kai-scheduler
          containers:
            - name: pytorch
              image: ghcr.io/kubeflow/training-v1/pytorch-dist-mnist:latest
              args: ["--backend", "nccl", "--batch-size", "2048", "--epochs", "900"]
              resources:
                limits:
                  nvidia.com/gpu: "1"
"""

# examples/batch/external-podgroup-job.yaml
EXTERNAL_PODGROUP_JOB = """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: external-batch-job
spec:
  minMember: 2
  queue: default-queue
  subGroups:
    - name: workers
      minMember: 2
---
apiVersion: batch/v1
kind: Job
metadata:
  name: external-batch-job
  annotations:
    kai.scheduler/skip-podgrouper: "true"
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations:
        pod-group-name: external-batch-job
      labels:
        kai.scheduler/subgroup-name: workers
    spec:
      schedulerName: kai-scheduler
      restartPolicy: Never
      containers:
        - name: main
          image: ubuntu
          args: ["sleep", "infinity"]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""


@pytest.mark.parametrize(("gpus", "running"), [(2, 2), (1, 1)])
def test_batch_job_pods_are_scheduled_separately(tmp_path: Path, gpus: int, running: int) -> None:
    # "Both pods will either run at the same time or sequentially, depending on the available resources."
    run = simulate(tmp_path, fake_gpu_nodes(1, gpus), DEFAULT_QUEUES, BATCH_JOB)
    assert len(run.running()) == running
    assert len(run.document["pods"]) == 2
    [group] = run.groups.values()  # KAI v0.17: one PodGroup per Job, minMember 1
    assert group["minMember"] == 1


def test_batch_min_member_gangs_two_of_six(tmp_path: Path) -> None:
    # "a job with parallelism of 6, but requires at least 2 pods to be scheduled together"
    run = simulate(tmp_path, fake_gpu_nodes(1, 4), DEFAULT_QUEUES, BATCH_JOB_MIN_MEMBER)
    [group] = run.groups.values()
    assert group["minMember"] == 2
    assert (len(run.running()), len(run.pending())) == (4, 2)


def test_batch_min_member_does_not_start_one_pod_alone(tmp_path: Path) -> None:
    run = simulate(tmp_path, fake_gpu_nodes(1, 1), DEFAULT_QUEUES, BATCH_JOB_MIN_MEMBER)
    assert run.running() == {}
    assert len(run.pending()) == 6


@pytest.mark.parametrize(("gpus", "running"), [(3, 3), (2, 0)])
def test_pytorch_job_is_all_or_nothing(tmp_path: Path, gpus: int, running: int) -> None:
    # "all 3 pods will be scheduled together, or none will be scheduled"
    run = simulate(tmp_path, fake_gpu_nodes(1, gpus), DEFAULT_QUEUES, PYTORCH_JOB)
    assert len(run.running()) == running
    [group] = run.groups.values()
    assert group["minMember"] == 3


def test_external_podgroup_is_joined_and_the_pod_grouper_stays_out(tmp_path: Path) -> None:
    run = simulate(tmp_path, fake_gpu_nodes(1, 2), DEFAULT_QUEUES, EXTERNAL_PODGROUP_JOB)
    assert set(run.groups) == {"external-batch-job"}
    assert len(run.running()) == 2
    assert all(p["podGroup"] == "default/external-batch-job" for p in run.document["pods"])
