"""KAI v0.17.0 docs/operator/scheduling-shards.md: the `default` and `gpu-shard` SchedulingShards, the
nodes labelled as its `kubectl label` commands label them, its shard-specific queues and its example pod.
The node resources and one unlabelled node (the default shard's partition: "all nodes that are not
labeled") are the test's.

Where the doc's objects do not do what its prose says, KAI's code decides and the tests say so:
- `gpu-queue-parent` and `gpu-queue` set a GPU quota but no limit, which KAI reads as 0: their pods get
  no GPU (the second test gives them `limit: -1` to show the shard placement the doc describes);
- `cpu-queue` spells its resources `resourceQuota`, a field KAI's Queue does not have: refused;
- the example pod targets node pool `foo` and queue `foo-queue-test`, which no shard or queue of the
  doc serves: it waits and says so."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, nodes, refused, simulate

SHARDS = """
apiVersion: kai.scheduler/v1
kind: SchedulingShard
metadata:
  name: default
---
apiVersion: kai.scheduler/v1
kind: SchedulingShard
metadata:
  name: gpu-shard
spec:
  partitionLabelValue: gpu-nodes
  args:
    leader-elect: "true"
    v: "3"
  placementStrategy:
    gpu: binpack
    cpu: binpack
  queueDepthPerAction:
    preempt: 15
    reclaim: 8
    allocate: 25
  minRuntime:
    preemptMinRuntime: "10m"
    reclaimMinRuntime: "5m"
"""

GPU_QUEUES = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: gpu-queue-parent
  labels:
    kai.scheduler/node-pool: gpu-nodes
spec:
  priority: 100
  resources:
    gpu:
      quota: -1
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: gpu-queue
  labels:
    kai.scheduler/node-pool: gpu-nodes
spec:
  parentQueue: gpu-queue-parent
  priority: 100
  resources:
    gpu:
      quota: 10
"""

CPU_QUEUE = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: cpu-queue
  labels:
    kai.scheduler/node-pool: cpu-nodes
spec:
  priority: 50
  parentQueue: cpu-queue-parent
  resourceQuota:
    cpu:
       quota: 200
    memory:
        quota: -1
"""

DOC_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
  namespace: test
  labels:
    kai.scheduler/queue: foo-queue-test
    kai.scheduler/node-pool: foo
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

POOL = "kai.scheduler/node-pool"
POOLS = {"node-1": "gpu-nodes", "node-2": "gpu-nodes", "node-3": "cpu-nodes", "node-4": "cpu-nodes"}
POOLS["node-5"] = "high-memory-nodes"
CLUSTER = nodes(
    *POOLS, "node-6", labels={n: {POOL: pool} for n, pool in POOLS.items()}, **{"nvidia.com/gpu": "8"}
)


def pool_pod(name: str, queue: str, pool: str | None) -> str:
    """The doc's example pod, in `queue` and node pool `pool` (none: no label)."""
    labels = f"kai.scheduler/queue: {queue}" + (f", {POOL}: {pool}" if pool else "")
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: test, labels: {{{labels}}}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, image: ubuntu, resources: {{limits: {{nvidia.com/gpu: "1"}}}}}}]
"""


def test_the_gpu_queues_as_written_get_no_gpu_in_their_shard(tmp_path: Path) -> None:
    run = simulate(
        tmp_path, CLUSTER, SHARDS, DEFAULT_QUEUES, GPU_QUEUES, pool_pod("train", "gpu-queue", "gpu-nodes")
    )
    group = run.group_of("train")
    assert group["shard"] == "gpu-shard"
    assert group["unschedulableCode"] == "OverLimit"
    assert any("Queue gpu-queue" in w and "spec.resources.gpu.limit: not set" in w for w in run.warnings)
    # The doc's scheduler flags without a counterpart here are named, not silently dropped.
    assert any("SchedulingShard gpu-shard: spec.args.leader-elect" in w for w in run.warnings)


def test_each_shard_schedules_its_own_pool(tmp_path: Path) -> None:
    unlimited = GPU_QUEUES.replace("      quota: -1\n", "      quota: -1\n      limit: -1\n").replace(
        "      quota: 10\n", "      quota: 10\n      limit: -1\n"
    )
    run = simulate(
        tmp_path,
        CLUSTER,
        SHARDS,
        DEFAULT_QUEUES,
        unlimited,
        pool_pod("train", "gpu-queue", "gpu-nodes"),
        pool_pod("notebook", "default-queue", None),
    )
    placed = run.running()
    assert placed["train"] in {"node-1", "node-2"}
    assert run.group_of("train")["shard"] == "gpu-shard"
    assert placed["notebook"] == "node-6"  # the default shard: the nodes without the label
    assert run.group_of("notebook")["shard"] == "default"


def test_the_cpu_queue_example_is_refused(tmp_path: Path) -> None:
    error = refused(tmp_path, CLUSTER, SHARDS, CPU_QUEUE)
    assert 'Queue cpu-queue): spec.resourceQuota: unknown field "resourceQuota"' in error


def test_the_example_pod_waits_for_a_shard_of_pool_foo(tmp_path: Path) -> None:
    run = simulate(tmp_path, CLUSTER, SHARDS, DEFAULT_QUEUES, DOC_POD)
    assert run.running() == {}
    group = run.group_of("gpu-pod")
    assert group["shard"] is None
    assert "'foo'" in group["unschedulableReason"]
