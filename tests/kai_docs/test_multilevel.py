"""KAI v0.17.0 docs/topology/multilevel.md: the PodGroups `sample1` (two independent rack-bound
sub-groups, `minSubGroup: 2`) and `sample2` (a zone-bound gang whose `subgroup-ab` keeps A and B under one
spine), with the example pods the doc shows; and examples/external-podgroup/multi-topology-jobs.yaml (two
Jobs joining one external PodGroup, each sub-group under its own Topology).

The doc's pods set no `schedulerName` (KAI would leave them to the default scheduler) and show one pod
per sub-group, fewer than the sub-groups' minMember, so as written nothing can start: the tests check
that, then add `schedulerName: kai-scheduler` and the rest of each sub-group's pods (named as the doc
names its first) and check the placement the doc describes. The queue `test`, the Topology
`cluster-topology` over the doc's `topology/zone`, `topology/spine` and `topology/rack` labels, and the
cluster (2 zones x 2 spines x 2 racks x 3 nodes, one pod a node) are the test's."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, DocRun, nodes, simulate, with_scheduler_name

SAMPLE1 = """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: sample1
spec:
  queue: test
  priorityClassName: inference
  minSubGroup: 2
  subGroups:
    - name: subgroup-a
      minMember: 2
      topologyConstraint:
        topology: "cluster-topology"
        requiredTopologyLevel: "topology/rack"
    - name: subgroup-b
      minMember: 3
      topologyConstraint:
        topology: "cluster-topology"
        requiredTopologyLevel: "topology/rack"
"""

SAMPLE2 = """
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: sample2
spec:
  queue: test
  priorityClassName: inference
  minSubGroup: 2
  topologyConstraint:
    topology: "cluster-topology"
    requiredTopologyLevel: "topology/zone"
  subGroups:
    - name: subgroup-ab
      minSubGroup: 2
      topologyConstraint:
        topology: "cluster-topology"
        requiredTopologyLevel: "topology/spine"
    - name: subgroup-a
      minMember: 1
      parent: subgroup-ab
      topologyConstraint:
        topology: "cluster-topology"
        requiredTopologyLevel: "topology/rack"
    - name: subgroup-b
      minMember: 2
      parent: subgroup-ab
      topologyConstraint:
        topology: "cluster-topology"
        requiredTopologyLevel: "topology/rack"
    - name: subgroup-c
      minMember: 3
      topologyConstraint:
        topology: "cluster-topology"
        requiredTopologyLevel: "topology/rack"
"""


def doc_pod(name: str, pod_group: str, subgroup: str) -> str:
    """The doc's example pod, `name` in `subgroup` of `pod_group`."""
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations:
    pod-group-name: {pod_group}
  labels:
    kai.scheduler/subgroup-name: {subgroup}
spec:
  containers:
    - name: worker
      image: ubuntu
      command: ["sleep", "infinity"]
"""


# The test's prerequisites: the queue and Topology the PodGroups name, and the cluster.
TEST_QUEUE = """
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: test
spec:
  parentQueue: default-parent-queue
  resources:
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
"""

CLUSTER_TOPOLOGY = """
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: cluster-topology
spec:
  levels:
  - nodeLabel: topology/zone
  - nodeLabel: topology/spine
  - nodeLabel: topology/rack
  - nodeLabel: kubernetes.io/hostname
"""


def cluster() -> str:
    labels = {
        f"z{z}-s{s}-r{r}-n{n}": {
            "topology/zone": f"z{z}",
            "topology/spine": f"z{z}-s{s}",
            "topology/rack": f"z{z}-s{s}-r{r}",
        }
        for z in range(2)
        for s in range(2)
        for r in range(2)
        for n in range(3)
    }
    return nodes(*labels, labels=labels, pods="1")


def prerequisites() -> tuple[str, ...]:
    return (cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, TEST_QUEUE)


def racks(run: DocRun, *pods: str) -> set[str]:
    placed = run.running()
    return {placed[p].rsplit("-n", 1)[0] for p in pods}


def spines(run: DocRun, *pods: str) -> set[str]:
    return {rack.rsplit("-r", 1)[0] for rack in racks(run, *pods)}


def test_sample1_with_the_doc_pods_only_waits(tmp_path: Path) -> None:
    pods = with_scheduler_name(
        doc_pod("pod-a1", "sample1", "subgroup-a") + "---" + doc_pod("pod-b1", "sample1", "subgroup-b")
    )
    run = simulate(tmp_path, *prerequisites(), SAMPLE1, pods)
    assert run.running() == {}
    assert run.groups["sample1"]["unschedulableReason"]


def test_sample1_each_subgroup_on_one_rack(tmp_path: Path) -> None:
    names = {"subgroup-a": ["pod-a1", "pod-a2"], "subgroup-b": ["pod-b1", "pod-b2", "pod-b3"]}
    pods = "---".join(doc_pod(p, "sample1", sg) for sg, ps in names.items() for p in ps)
    run = simulate(tmp_path, *prerequisites(), SAMPLE1, with_scheduler_name(pods))
    assert len(run.running()) == 5
    assert len(racks(run, *names["subgroup-a"])) == 1
    assert len(racks(run, *names["subgroup-b"])) == 1


def test_sample2_a_and_b_under_one_spine_c_on_a_rack_all_in_one_zone(tmp_path: Path) -> None:
    names = {
        "subgroup-a": ["pod-a1"],
        "subgroup-b": ["pod-b1", "pod-b2"],
        "subgroup-c": ["pod-c1", "pod-c2", "pod-c3"],
    }
    pods = "---".join(doc_pod(p, "sample2", sg) for sg, ps in names.items() for p in ps)
    run = simulate(tmp_path, *prerequisites(), SAMPLE2, with_scheduler_name(pods))
    placed = run.running()
    assert len(placed) == 6
    assert len({node.split("-s")[0] for node in placed.values()}) == 1  # one zone
    assert len(spines(run, "pod-a1", "pod-b1", "pod-b2")) == 1
    assert len(racks(run, "pod-b1", "pod-b2")) == 1
    assert len(racks(run, *names["subgroup-c"])) == 1


# examples/external-podgroup/multi-topology-jobs.yaml
MULTI_TOPOLOGY_JOBS = """
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: rack-topology
spec:
  levels:
    - nodeLabel: topology.test/rack-domain
    - nodeLabel: kubernetes.io/hostname
---
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: zone-topology
spec:
  levels:
    - nodeLabel: topology.test/zone-domain
    - nodeLabel: kubernetes.io/hostname
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata:
  name: multi-topology-pipeline
  namespace: default
  labels:
    kai.scheduler/queue: default-queue
spec:
  queue: default-queue
  minSubGroup: 2
  subGroups:
    - name: rack-workers
      minMember: 3
      topologyConstraint:
        topology: rack-topology
        requiredTopologyLevel: topology.test/rack-domain
    - name: zone-workers
      minMember: 3
      topologyConstraint:
        topology: zone-topology
        requiredTopologyLevel: topology.test/zone-domain
"""


def bound_job(name: str, subgroup: str) -> str:
    """The example's two Jobs differ in name and sub-group only."""
    return f"""
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  annotations:
    kai.scheduler/skip-podgrouper: "true"
spec:
  parallelism: 3
  completions: 3
  template:
    metadata:
      annotations:
        pod-group-name: multi-topology-pipeline
      labels:
        kai.scheduler/queue: default-queue
        kai.scheduler/subgroup-name: {subgroup}
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
              nvidia.com/gpu: "4"
            limits:
              cpu: "250m"
              nvidia.com/gpu: "4"
"""


def test_two_jobs_join_one_podgroup_each_subgroup_under_its_topology(tmp_path: Path) -> None:
    # The test's cluster: 2 zones x 2 racks x 2 nodes of 8 GPUs (a rack takes the 3 rack-workers, 12 GPUs).
    labels = {
        f"z{z}-r{r}-n{n}": {"topology.test/zone-domain": f"z{z}", "topology.test/rack-domain": f"z{z}-r{r}"}
        for z in range(2)
        for r in range(2)
        for n in range(2)
    }
    cluster_nodes = nodes(*labels, labels=labels, **{"nvidia.com/gpu": "8"})
    jobs = bound_job("rack-bound-job", "rack-workers") + "---" + bound_job("zone-bound-job", "zone-workers")
    run = simulate(tmp_path, cluster_nodes, DEFAULT_QUEUES, MULTI_TOPOLOGY_JOBS, jobs)
    assert set(run.groups) == {"multi-topology-pipeline"}
    placed = run.running()
    assert len(placed) == 6
    rack = {n.rsplit("-n", 1)[0] for p, n in placed.items() if p.startswith("rack-bound-job")}
    zone = {n.split("-r")[0] for p, n in placed.items() if p.startswith("zone-bound-job")}
    assert (len(rack), len(zone)) == (1, 1)
