"""KAI v0.17.0 docs/staleness-grace-period/README.md and its runnable scenario,
examples/staleness-grace-period/: 00-with-spec.yaml (a 2-pod gang with `stalenessGracePeriod: 30s`),
then `kubectl delete pod stale-gang-pod-1`; and 01-with-annotation.yaml (a pod with the annotation).

Step 2 (the delete) is the cluster after step 1 as the test's input: both pods where step 1 put them,
running, and stale-gang-pod-1 with the deletion timestamp `kubectl delete` gives it. The node is the
test's."""

from __future__ import annotations

from pathlib import Path

import yaml
from docs_support import DEFAULT_QUEUES, nodes, simulate

WITH_SPEC = """
apiVersion: v1
kind: Namespace
metadata:
  name: stale-grace-demo
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: stale-gang
  namespace: stale-grace-demo
  labels:
    kai.scheduler/queue: default-queue
spec:
  queue: default-queue
  minMember: 2
  stalenessGracePeriod: 30s
---
apiVersion: v1
kind: Pod
metadata:
  name: stale-gang-pod-0
  namespace: stale-grace-demo
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    pod-group-name: stale-gang
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: registry.k8s.io/pause:3.9
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { cpu: 100m, memory: 64Mi }
---
apiVersion: v1
kind: Pod
metadata:
  name: stale-gang-pod-1
  namespace: stale-grace-demo
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    pod-group-name: stale-gang
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: registry.k8s.io/pause:3.9
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { cpu: 100m, memory: 64Mi }
"""

WITH_ANNOTATION = """
apiVersion: v1
kind: Namespace
metadata:
  name: stale-grace-annotation-demo
---
apiVersion: v1
kind: Pod
metadata:
  name: stale-gang-ann-pod-0
  namespace: stale-grace-annotation-demo
  labels:
    kai.scheduler/queue: default-queue
  annotations:
    kai.scheduler/staleness-grace-period: "5s"
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: registry.k8s.io/pause:3.9
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { cpu: 100m, memory: 64Mi }
"""

NODE = nodes("node-0", cpu="8")


def after_deleting_pod_1(placed: dict[str, str]) -> str:
    """Step 1's objects as the cluster holds them once it ran, stale-gang-pod-1 being deleted."""
    documents = list(yaml.safe_load_all(WITH_SPEC))
    for document in documents:
        name = document["metadata"]["name"]
        if document["kind"] == "Pod":
            document["spec"]["nodeName"] = placed[name]
            document["status"] = {"phase": "Running"}
            if name == "stale-gang-pod-1":
                document["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return yaml.safe_dump_all(documents, sort_keys=False)


def test_step_1_both_pods_run(tmp_path: Path) -> None:
    run = simulate(tmp_path, NODE, DEFAULT_QUEUES, WITH_SPEC)
    assert set(run.running()) == {"stale-gang-pod-0", "stale-gang-pod-1"}
    assert run.warnings == []


def test_the_stale_pod_is_evicted_when_its_30s_grace_period_ends(tmp_path: Path) -> None:
    placed = simulate(tmp_path, NODE, DEFAULT_QUEUES, WITH_SPEC).running()
    run = simulate(tmp_path, NODE, DEFAULT_QUEUES, after_deleting_pod_1(placed))
    [evict] = run.decisions(type="evict")
    assert (evict["pod"], evict["action"]) == ("stale-grace-demo/stale-gang-pod-0", "stalegangeviction")
    assert evict["time"] == 30.0  # the delete at 0 s, then the 30 s grace period, not the global 60 s
    assert run.running() == {}


def test_within_the_grace_period_the_remaining_pod_keeps_running(tmp_path: Path) -> None:
    placed = simulate(tmp_path, NODE, DEFAULT_QUEUES, WITH_SPEC).running()
    run = simulate(tmp_path, NODE, DEFAULT_QUEUES, after_deleting_pod_1(placed), until="29s")
    assert set(run.running()) == {"stale-gang-pod-0"}
    assert run.decisions(type="evict") == []


def test_the_annotated_pod_gets_its_podgroup_and_runs(tmp_path: Path) -> None:
    # "KAI's PodGrouper will take care of creating PodGroup and setting stalenessGracePeriod": a gang of
    # one, never stale while it runs.
    run = simulate(tmp_path, NODE, DEFAULT_QUEUES, WITH_ANNOTATION, until="30s")
    assert set(run.running()) == {"stale-gang-ann-pod-0"}
    assert run.group_of("stale-gang-ann-pod-0")["minMember"] == 1
    assert run.decisions(type="evict") == []
