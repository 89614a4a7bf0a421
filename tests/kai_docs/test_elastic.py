"""KAI v0.17.0 docs/elastic/README.md: elastic/pytorch-elastic.yaml (minReplicas 1, two workers of 4 CPUs)."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, applied_at, nodes, simulate

PYTORCH_ELASTIC = """
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: elastic-example-imagenet
  labels:
    kai.scheduler/queue: default-queue
spec:
  elasticPolicy:
    rdzvBackend: c10d
    minReplicas: 1
    maxReplicas: 3
    maxRestarts: 100
    metrics:
      - type: Resource
        resource:
          name: cpu
          target:
            type: Utilization
            averageUtilization: 80
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          schedulerName: kai-scheduler
          containers:
            - name: pytorch
              image: kubeflow/pytorch-elastic-example-imagenet:latest
              imagePullPolicy: IfNotPresent
              resources:
                requests:
                  cpu: 4
              env:
                - name: LOGLEVEL
                  value: DEBUG
              command:
                - python
                - -m
                - torch.distributed.run
                - /workspace/examples/imagenet.py
                - "--arch=resnet18"
                - "--epochs=1"
                - "--batch-size=32"
                - "--workers=0"
                - "/workspace/data/tiny-imagenet-200"
"""

# The test's: a pod of a higher priority than the job's (train) that wants the CPUs of one worker.
PRIORITIZED_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: prioritized
  labels:
    kai.scheduler/queue: default-queue
spec:
  schedulerName: kai-scheduler
  priorityClassName: build-preemptible
  containers:
    - name: main
      image: ubuntu
      resources:
        requests:
          cpu: 4
"""


def test_starts_with_one_worker_when_only_one_fits(tmp_path: Path) -> None:
    # "start running as soon as there are enough resource in the cluster for the one pod"
    run = simulate(tmp_path, nodes("node-0", cpu="4"), DEFAULT_QUEUES, PYTORCH_ELASTIC)
    [group] = run.groups.values()
    assert group["minMember"] == 1
    assert (len(run.running()), len(run.pending())) == (1, 1)


def test_runs_both_workers_when_they_fit(tmp_path: Path) -> None:
    run = simulate(tmp_path, nodes("node-0", cpu="8"), DEFAULT_QUEUES, PYTORCH_ELASTIC)
    assert len(run.running()) == 2


def test_a_prioritized_workload_evicts_only_part_of_it(tmp_path: Path) -> None:
    # "KAI Scheduler will be able to evict only part of its pods and the workload will continue running"
    run = simulate(
        tmp_path, nodes("node-0", cpu="8"), DEFAULT_QUEUES, PYTORCH_ELASTIC, applied_at(10, PRIORITIZED_POD)
    )
    evicted = run.decisions(type="evict")
    assert len(evicted) == 1
    assert evicted[0]["pod"].startswith("default/elastic-example-imagenet-worker-")
    running = run.running()
    assert "prioritized" in running
    assert sum(name.startswith("elastic-example-imagenet-worker-") for name in running) == 1
