"""KAI v0.17.0 docs/topology/README.md "Example": the `distributed-training` Job (zone required, rack
preferred) on the cluster the doc draws: zone A with racks A1 (2 nodes) and A2-A4 (1 node each), zone B
with racks B1-B3 (2 nodes each), one GPU per node. The doc elides the Job's pod template ("job
specification requiring 1 GPU per pod"); the test writes it, with the queue and scheduler name every
example uses. The Topology `cluster-topology` over the doc's zone and rack labels is the test's.

The doc reasons about a gang of three: no rack holds 3 GPUs, zone A (fewer free GPUs) is chosen, rack A1
filled first, so the pods land on 2 racks. KAI's code makes a batch Job a PodGroup of minMember 1 unless
`kai.scheduler/batch-min-member` says otherwise: each pod is placed on its own, and a single pod fits any
rack, so bin-packing puts the three on the one-GPU racks A2, A3 and A4 of zone A. The first test follows
the code; the second gives the Job the gang the doc assumes and gets the doc's result.

Also examples/topology-aliases/topology-aliases.yaml (a level named by its alias)."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, nodes, simulate

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: distributed-training
  annotations:
    kai.scheduler/topology: "cluster-topology"
    kai.scheduler/topology-required-placement: "topology.kubernetes.io/zone"
    kai.scheduler/topology-preferred-placement: "topology.kubernetes.io/rack"
spec:
  parallelism: 3
  completions: 3
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
          resources:
            limits:
              nvidia.com/gpu: "1"
"""

CLUSTER_TOPOLOGY = """
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: cluster-topology
spec:
  levels:
  - nodeLabel: topology.kubernetes.io/zone
  - nodeLabel: topology.kubernetes.io/rack
  - nodeLabel: kubernetes.io/hostname
"""

RACKS = {
    "zone-a": {"a1": 2, "a2": 1, "a3": 1, "a4": 1},
    "zone-b": {"b1": 2, "b2": 2, "b3": 2},
}


def doc_cluster() -> str:
    labels = {
        f"node-{rack}-{i + 1}": {"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/rack": rack}
        for zone, racks in RACKS.items()
        for rack, count in racks.items()
        for i in range(count)
    }
    return nodes(*labels, labels=labels, **{"nvidia.com/gpu": "1"})


def test_kai_code_places_each_pod_of_the_gang_of_one_on_its_own(tmp_path: Path) -> None:
    run = simulate(tmp_path, doc_cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, JOB)
    [group] = run.groups.values()
    assert group["minMember"] == 1  # KAI v0.17's Job grouper: batch-min-member, else 1
    assert sorted(run.running().values()) == ["node-a2-1", "node-a3-1", "node-a4-1"]


def test_as_a_gang_of_three_it_fills_rack_a1_then_one_more_rack_of_zone_a(tmp_path: Path) -> None:
    gang = JOB.replace("  annotations:\n", '  annotations:\n    kai.scheduler/batch-min-member: "3"\n', 1)
    run = simulate(tmp_path, doc_cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, gang)
    placed = sorted(run.running().values())
    assert len(placed) == 3
    assert placed[:2] == ["node-a1-1", "node-a1-2"]
    assert placed[2] in {"node-a2-1", "node-a3-1", "node-a4-1"}


# examples/topology-aliases/topology-aliases.yaml
TOPOLOGY_ALIASES = """
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: network
spec:
  levels:
    - nodeLabel: accelerator.nvidia.com/rack
      alias: rack
    - nodeLabel: kubernetes.io/hostname
      alias: node
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: aliased-topology-job
  namespace: default
  labels:
    kai.scheduler/queue: default-queue
spec:
  queue: default-queue
  minMember: 3
  topologyConstraint:
    topology: network
    requiredTopologyLevel: rack
---
apiVersion: batch/v1
kind: Job
metadata:
  name: aliased-topology-job
  namespace: default
  annotations:
    kai.scheduler/skip-podgrouper: "true"
spec:
  parallelism: 3
  completions: 3
  template:
    metadata:
      annotations:
        pod-group-name: aliased-topology-job
      labels:
        kai.scheduler/queue: default-queue
    spec:
      schedulerName: kai-scheduler
      restartPolicy: Never
      containers:
        - name: worker
          image: busybox:1.36
          command: ["sh", "-c", "sleep 3600"]
          resources:
            requests:
              cpu: "250m"
              nvidia.com/gpu: "1"
            limits:
              cpu: "250m"
              nvidia.com/gpu: "1"
"""


def test_alias_names_the_rack_level(tmp_path: Path) -> None:
    # Two racks of two 2-GPU nodes: the gang of three (1 GPU each) fits one rack only when the alias
    # `rack` resolves to the rack label.
    labels = {
        f"rack-{r}-node-{n}": {"accelerator.nvidia.com/rack": f"rack-{r}"} for r in range(2) for n in range(2)
    }
    cluster = nodes(*labels, labels=labels, **{"nvidia.com/gpu": "2"})
    run = simulate(tmp_path, cluster, DEFAULT_QUEUES, TOPOLOGY_ALIASES)
    assert set(run.groups) == {"aliased-topology-job"}
    placed = run.running()
    assert len(placed) == 3
    assert len({node.split("-node-")[0] for node in placed.values()}) == 1
