"""KAI v0.17.0 docs/queues/README.md "Examples": research-team, ml-team (its child) and burst-queue, each
applied as written, with a one-GPU pod of the test's in each leaf queue.

KAI's doc and code disagree on fields left out. The doc's table says an unset limit means "no additional
resources", and its third example is titled "default value is -1". KAI's Queue CRD has no defaults, and
its scheduler reads a limit left out as 0, which lets a queue have none of that resource. So ml-team,
which sets a GPU quota but no limit, gets no GPU at all. This test follows the code, and the simulator
warns about each field left out."""

from __future__ import annotations

from pathlib import Path

from docs_support import fake_gpu_nodes, simulate

RESEARCH_TEAM = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: research-team
spec:
  displayName: "Research Team"
  resources:
    cpu:
      quota: 1000
      limit: 2000
    gpu:
      quota: 1
      limit: 2
"""

ML_TEAM = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: ml-team
spec:
  displayName: "ML Team"
  parentQueue: "research-team"
  priority: 200
  resources:
    cpu:
      quota: 500
      overQuotaWeight: 2
    gpu:
      quota: 1
      overQuotaWeight: 1
"""

BURST_QUEUE = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: burst-queue
spec:
  resources:
    cpu:
      quota: -1
      limit: -1
    gpu:
      quota: 0
      limit: -1
"""


def gpu_pod(name: str, queue: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{kai.scheduler/queue: {queue}}}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: ubuntu, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]
"""


def test_burst_queue_runs_and_ml_teams_unset_gpu_limit_holds_its_pod(tmp_path: Path) -> None:
    run = simulate(
        tmp_path,
        fake_gpu_nodes(1, 4),
        RESEARCH_TEAM,
        ML_TEAM,
        BURST_QUEUE,
        gpu_pod("ml-pod", "ml-team"),
        gpu_pod("burst-pod", "burst-queue"),
    )
    assert set(run.running()) == {"burst-pod"}
    ml = run.group_of("ml-pod")
    assert ml["unschedulableCode"] == "OverLimit"
    assert "gpu limit" in ml["unschedulableReason"]
    assert run.queues["ml-team"]["parent"] == "research-team"
    # Each field the examples leave out is named, with what KAI makes of it.
    assert any("Queue ml-team" in w and "spec.resources.gpu.limit: not set" in w for w in run.warnings)
    assert any("Queue burst-queue" in w and "spec.resources.memory: not set" in w for w in run.warnings)


def test_a_pod_in_the_parent_queue_is_not_scheduled(tmp_path: Path) -> None:
    # "Only leaf queues (queues with no children) can be used for scheduling jobs."
    run = simulate(
        tmp_path, fake_gpu_nodes(1, 4), RESEARCH_TEAM, ML_TEAM, gpu_pod("parent-pod", "research-team")
    )
    assert run.running() == {}
    assert "research-team" in run.group_of("parent-pod")["unschedulableReason"]
