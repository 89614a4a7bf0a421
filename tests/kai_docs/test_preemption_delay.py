"""KAI v0.17.0 docs/preemption-delay/README.md and the runnable scenario it points to,
examples/preemption-delay/ (00-queues.yaml, 01-victim.yaml, 02-delayed-preemptor.yaml): a queue at its
500m CPU limit, a running low-priority victim, and a higher-priority pod with a 2-minute delay applied
once the victim runs (the test applies it 10 s in). The node is the test's.

The doc's status message ends with the window's end as a wall-clock time ("... before <RFC3339>"); the
simulator's clock has no date, so its message says how long is left instead."""

from __future__ import annotations

from pathlib import Path

from docs_support import DocRun, applied_at, nodes, simulate

QUEUES = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: delay-parent
spec:
  resources:
    cpu: {limit: 500, overQuotaWeight: 1, quota: 500}
    gpu: {limit: -1, overQuotaWeight: 1, quota: 0}
    memory: {limit: -1, overQuotaWeight: 1, quota: 0}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: delay-queue
spec:
  parentQueue: delay-parent
  resources:
    cpu: {limit: 500, overQuotaWeight: 1, quota: 500}
    gpu: {limit: -1, overQuotaWeight: 1, quota: 0}
    memory: {limit: -1, overQuotaWeight: 1, quota: 0}
---
apiVersion: v1
kind: Namespace
metadata:
  name: delay-demo
"""

VICTIM = """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: victim-gang
  namespace: delay-demo
  labels:
    kai.scheduler/queue: delay-queue
spec:
  minMember: 1
  queue: delay-queue
  priorityClassName: train
---
apiVersion: v1
kind: Pod
metadata:
  name: victim-gang-pod
  namespace: delay-demo
  labels:
    kai.scheduler/queue: delay-queue
  annotations:
    pod-group-name: victim-gang
spec:
  schedulerName: kai-scheduler
  priorityClassName: train
  containers:
  - name: main
    image: registry.k8s.io/pause:3.9
    resources:
      limits: {cpu: 500m}
      requests: {cpu: 500m}
"""

DELAYED_PREEMPTOR = """
apiVersion: v1
kind: Pod
metadata:
  name: delayed-preemptor
  namespace: delay-demo
  labels:
    kai.scheduler/queue: delay-queue
  annotations:
    kai.scheduler/preemption-delay: "2m"
spec:
  schedulerName: kai-scheduler
  priorityClassName: build-preemptible
  containers:
  - name: main
    image: registry.k8s.io/pause:3.9
    resources:
      limits: {cpu: 500m}
      requests: {cpu: 500m}
"""


def example(tmp_path: Path, **flags: str) -> DocRun:
    return simulate(
        tmp_path, nodes("node-0", cpu="8"), QUEUES, VICTIM, applied_at(10, DELAYED_PREEMPTOR), **flags
    )


def test_within_the_window_the_victim_runs_and_the_status_says_why(tmp_path: Path) -> None:
    run = example(tmp_path, until="60s")
    assert set(run.running()) == {"victim-gang-pod"}
    assert run.decisions(type="evict") == []
    reason = run.group_of("delayed-preemptor")["unschedulableReason"]
    assert "Workload is within its preemption delay window (2m0s) and may not trigger evictions" in reason


def test_after_the_window_the_victim_is_preempted_and_the_pod_runs(tmp_path: Path) -> None:
    run = example(tmp_path)
    [evict] = run.decisions(type="evict")
    assert evict["pod"] == "delay-demo/victim-gang-pod"
    assert evict["action"] == "preempt"
    assert evict["time"] == 130.0  # applied at 10 s, plus the 2-minute delay
    assert set(run.running()) == {"delayed-preemptor"}
    assert run.pods["victim-gang-pod"]["evictions"] == 1
    assert run.warnings == []  # the Namespace is read, not refused
