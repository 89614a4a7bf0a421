"""KAI v0.17.0 docs/priority/README.md "Example": example/limited-queue.yaml, then train-priority-pod.yaml,
then, once train-pod runs, build-priority-pod.yaml.

The doc says the `test` queue's 1-GPU limit lets only one pod run, so build-pod preempts train-pod. KAI's
code decides otherwise, and this test follows the code: both pods name `kai.scheduler/queue:
default-queue`, not `test`, so the limit never applies; build-pod (priority 100: non-preemptible) may only
use its queue's quota, and default-queue's is 0, so it waits and train-pod keeps running."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, applied_at, fake_gpu_nodes, simulate

LIMITED_QUEUE = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: default
spec:
  resources:
    cpu:
      quota: -1
      limit: -1
      overQuotaWeight: 1
    gpu:
      quota: -1
      limit: -1
      overQuotaWeight: 1
    memory:
      quota: -1
      limit: -1
      overQuotaWeight: 1
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: test
spec:
  parentQueue: default
  resources:
    cpu:
      quota: -1
      limit: -1
      overQuotaWeight: 1
    gpu:
      quota: 1
      limit: 1
      overQuotaWeight: 1
    memory:
      quota: -1
      limit: -1
      overQuotaWeight: 1
"""

TRAIN_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: train-pod
  labels:
    kai.scheduler/queue: default-queue
    priorityClassName: train
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: ubuntu
      args: ["sleep", "infinity"]
      resources:
        limits:
          nvidia.com/gpu: "1"
"""

BUILD_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: build-pod
  labels:
    kai.scheduler/queue: default-queue
    priorityClassName: build
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: ubuntu
      args: ["sleep", "infinity"]
      resources:
        limits:
          nvidia.com/gpu: "1"
"""


def test_kai_code_keeps_train_pod_and_holds_build_pod_at_default_queues_zero_quota(tmp_path: Path) -> None:
    run = simulate(
        tmp_path, fake_gpu_nodes(), DEFAULT_QUEUES, LIMITED_QUEUE, TRAIN_POD, applied_at(10, BUILD_POD)
    )
    assert set(run.running()) == {"train-pod"}
    assert run.pods["train-pod"]["evictions"] == 0
    assert run.decisions(type="evict") == []
    build = run.group_of("build-pod")
    assert build["queue"] == "default-queue"  # the label decides, not the doc's `test` queue
    assert build["unschedulableCode"] == "NonPreemptibleOverQuota"
    # The `test` queue the doc creates is never used.
    assert run.queues["test"]["allocated"]["gpu"] == run.queues["test"]["requested"]["gpu"] == 0


def test_with_the_pods_in_the_test_queue_build_pod_preempts_train_pod_as_the_doc_says(tmp_path: Path) -> None:
    # What the doc's prose describes, once the pods name the queue it creates.
    def in_test_queue(pod: str) -> str:
        return pod.replace("kai.scheduler/queue: default-queue", "kai.scheduler/queue: test")

    run = simulate(
        tmp_path,
        fake_gpu_nodes(),
        DEFAULT_QUEUES,
        LIMITED_QUEUE,
        in_test_queue(TRAIN_POD),
        applied_at(10, in_test_queue(BUILD_POD)),
    )
    assert set(run.running()) == {"build-pod"}
    [evict] = run.decisions(type="evict")
    assert (evict["pod"], evict["action"]) == ("default/train-pod", "preempt")
    assert run.group_of("train-pod")["unschedulableCode"] == "OverLimit"
