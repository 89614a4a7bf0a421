"""KAI v0.17.0 docs/numa/README.md: the `numa` plugin enabled in a SchedulingShard as the doc writes it,
and its three visual examples (best-effort, restricted, single-numa-node), each a Guaranteed pod whose
requests the doc states, on nodes whose NUMA zones hold what the doc's boxes show. Where the restricted
diagram and KAI's code disagree, the code decides (below). The nodes, their
NodeResourceTopology objects (as NFD's topology updater publishes them) and the pods are the test's."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import DEFAULT_QUEUES, simulate

SHARD = """
apiVersion: kai.scheduler/v1
kind: SchedulingShard
metadata:
  name: gpu-shard
spec:
  plugins:
    numa:
      enabled: true
"""


def node(name: str, cpu: int, memory_gi: int, gpus: int) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status: {{allocatable: {{cpu: "{cpu}", memory: {memory_gi}Gi, pods: "110", nvidia.com/gpu: "{gpus}"}}}}
"""


def nrt(name: str, policy: str, *zones: tuple[int, int, int]) -> str:
    """The node's NodeResourceTopology: one zone per (cpu, memory GiB, gpus), all of it available."""
    zone_text = ""
    for index, (cpu, memory_gi, gpus) in enumerate(zones):
        zone_text += f"""
  - name: node-{index}
    type: Node
    resources:
    - {{name: cpu, capacity: "{cpu}", allocatable: "{cpu}", available: "{cpu}"}}
    - {{name: memory, capacity: {memory_gi}Gi, allocatable: {memory_gi}Gi, available: {memory_gi}Gi}}
    - {{name: nvidia.com/gpu, capacity: "{gpus}", allocatable: "{gpus}", available: "{gpus}"}}"""
    return f"""
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {{name: {name}}}
topologyPolicies: []
attributes:
- {{name: topologyManagerPolicy, value: {policy}}}
- {{name: topologyManagerScope, value: pod}}
zones:{zone_text}
"""


def guaranteed_pod(cpu: int, memory_gi: int, gpus: int = 1) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: pod, labels: {{kai.scheduler/queue: default-queue}}}}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: main
    image: trainer
    resources:
      requests: {{cpu: "{cpu}", memory: {memory_gi}Gi, nvidia.com/gpu: "{gpus}"}}
      limits: {{cpu: "{cpu}", memory: {memory_gi}Gi, nvidia.com/gpu: "{gpus}"}}
"""


# The restricted and single-numa-node diagrams: NUMA 0 has 4 CPU, 16 GiB and the GPU; NUMA 1 4 CPU and
# 16 GiB. The pod asks 6 CPU, 24 GiB and 1 GPU: the node has room, but no one zone does.
SPLIT_ZONES = ((4, 16, 1), (4, 16, 0))


def test_single_numa_node_filters_the_node_and_the_pod_stays_pending(tmp_path: Path) -> None:
    run = simulate(
        tmp_path,
        node("node-a", 8, 32, 1),
        nrt("node-a", "single-numa-node", *SPLIT_ZONES),
        SHARD,
        DEFAULT_QUEUES,
        guaranteed_pod(6, 24),
    )
    assert run.running() == {}
    assert run.pending() == {"pod"}


def test_restricted_as_kai_code_has_it_filters_the_doc_example_too(tmp_path: Path) -> None:
    # The doc's diagram admits this pod under restricted. KAI v0.17's code (plugins/numa/evaluator.go,
    # restrictedEvaluator) needs every resource's narrowest width to agree: the GPU fits one zone, CPU
    # and memory need two, so it filters the node, as the kubelet's hint merge would (the merged two-zone
    # hint is not preferred for the GPU). The code decides.
    run = simulate(
        tmp_path,
        node("node-a", 8, 32, 1),
        nrt("node-a", "restricted", *SPLIT_ZONES),
        SHARD,
        DEFAULT_QUEUES,
        guaranteed_pod(6, 24),
    )
    assert run.running() == {}


@pytest.mark.parametrize(("policy", "placed"), [("restricted", {"pod": "node-a"}), ("single-numa-node", {})])
def test_restricted_admits_an_aligned_multi_numa_pod(
    tmp_path: Path, policy: str, placed: dict[str, str]
) -> None:
    # "permitting correctly aligned multi-NUMA workloads, such as large training pods": a GPU in each
    # zone and a pod of 6 CPU, 24 GiB and 2 GPUs, two zones wide in every resource.
    run = simulate(
        tmp_path,
        node("node-a", 8, 32, 2),
        nrt("node-a", policy, (4, 16, 1), (4, 16, 1)),
        SHARD,
        DEFAULT_QUEUES,
        guaranteed_pod(6, 24, gpus=2),
    )
    assert run.running() == placed


def test_best_effort_prefers_the_local_candidate(tmp_path: Path) -> None:
    # Candidate A: everything in NUMA 0; candidate B: the GPU in NUMA 0, CPU and memory in NUMA 1. The pod
    # asks 4 CPU, 16 GiB and 1 GPU.
    run = simulate(
        tmp_path,
        node("candidate-a", 4, 16, 1),
        nrt("candidate-a", "best-effort", (4, 16, 1)),
        node("candidate-b", 4, 16, 1),
        nrt("candidate-b", "best-effort", (0, 0, 1), (4, 16, 0)),
        SHARD,
        DEFAULT_QUEUES,
        guaranteed_pod(4, 16),
    )
    assert run.running() == {"pod": "candidate-a"}
