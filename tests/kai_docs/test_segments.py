"""KAI v0.17.0 docs/topology/segments.md: the PyTorchJob examples (single-level: segments of 4 workers on
a rack; multi-level: the job in one zone, each segment on a rack), segment annotations on the Worker pod
template, where the doc puts them; and the LeaderWorkerSet example (`subGroupPolicy`, segments of 2).

The doc's snippets set no `schedulerName`: as written, KAI leaves their pods to the default scheduler, and
so does the simulator (with a warning naming the templates). With `schedulerName: kai-scheduler` added,
the only change, they end as the doc says. The cluster is the test's: two zones of four racks of two
nodes, each node taking 3 pods, so 16 workers only keep their segments together when placed with care."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, DocRun, nodes, simulate, with_scheduler_name

SINGLE_LEVEL = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytorch-tp4
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:latest
    Worker:
      replicas: 16
      template:
        metadata:
          annotations:
            kai.scheduler/topology: "cluster-topology"
            kai.scheduler/segment-size: "4"
            kai.scheduler/segment-topology-required-placement: "cloud.provider.com/topology-rack"
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:latest
"""

MULTI_LEVEL = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytorch-tp4-zoned
  annotations:
    kai.scheduler/topology: "cluster-topology"
    kai.scheduler/topology-required-placement: "topology.kubernetes.io/zone"
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:latest
    Worker:
      replicas: 16
      template:
        metadata:
          annotations:
            kai.scheduler/segment-size: "4"
            kai.scheduler/segment-topology-required-placement: "cloud.provider.com/topology-rack"
        spec:
          containers:
            - name: pytorch
              image: pytorch/pytorch:latest
"""

# The test's: the Topology the examples name, over the labels they use.
CLUSTER_TOPOLOGY = """
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: cluster-topology
spec:
  levels:
  - nodeLabel: topology.kubernetes.io/zone
  - nodeLabel: cloud.provider.com/topology-rack
  - nodeLabel: kubernetes.io/hostname
"""

RACK = "cloud.provider.com/topology-rack"
ZONE = "topology.kubernetes.io/zone"


def cluster() -> str:
    labels = {
        f"{zone}-rack-{r}-node-{n}": {ZONE: zone, RACK: f"{zone}-rack-{r}"}
        for zone in ("zone-a", "zone-b")
        for r in range(4)
        for n in range(2)
    }
    return nodes(*labels, labels=labels, pods="3")


def rack_of(node: str) -> str:
    return node.rsplit("-node-", 1)[0]


def worker_racks(run: DocRun, job: str) -> dict[int, set[str]]:
    """Segment index (replica index // 4) -> the racks its workers run on."""
    racks: dict[int, set[str]] = {}
    for name, node in run.running().items():
        if name.startswith(f"{job}-worker-"):
            index = int(name.rsplit("-", 1)[1])
            racks.setdefault(index // 4, set()).add(rack_of(node))
    return racks


def test_as_written_the_pods_are_the_default_schedulers(tmp_path: Path) -> None:
    run = simulate(tmp_path, cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, SINGLE_LEVEL)
    assert run.running() == {}
    assert run.document["summary"]["otherSchedulers"] == 17
    assert any("Worker.template.spec.schedulerName: not set" in w for w in run.warnings)


def test_each_segment_of_four_workers_shares_a_rack(tmp_path: Path) -> None:
    run = simulate(tmp_path, cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, with_scheduler_name(SINGLE_LEVEL))
    assert len(run.running()) == 17
    racks = worker_racks(run, "pytorch-tp4")
    assert sorted(racks) == [0, 1, 2, 3]
    assert all(len(r) == 1 for r in racks.values()), racks


def test_the_job_stays_in_one_zone_and_each_segment_on_one_rack(tmp_path: Path) -> None:
    run = simulate(tmp_path, cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, with_scheduler_name(MULTI_LEVEL))
    placed = run.running()
    assert len(placed) == 17
    assert len({node.split("-rack-")[0] for node in placed.values()}) == 1
    racks = worker_racks(run, "pytorch-tp4-zoned")
    assert all(len(r) == 1 for r in racks.values()), racks


LWS_SEGMENTED = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: lws-segmented
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 5
    subGroupPolicy:
      subGroupSize: 2
      subGroupPolicyType: LeaderWorker
    leaderTemplate:
      spec:
        containers:
          - name: leader
            image: my/image:latest
    workerTemplate:
      metadata:
        annotations:
          kai.scheduler/topology: "cluster-topology"
          kai.scheduler/segment-topology-required-placement: "cloud.provider.com/topology-rack"
      spec:
        containers:
          - name: worker
            image: my/image:latest
"""


def one_pod_racks() -> str:
    """Racks of 2, 3 and 2 nodes taking one pod each: only the middle rack holds the leader with the first
    segment's two workers."""
    labels = {
        f"zone-a-rack-{r}-node-{n}": {ZONE: "zone-a", RACK: f"zone-a-rack-{r}"}
        for r, count in enumerate((2, 3, 2))
        for n in range(count)
    }
    return nodes(*labels, labels=labels, pods="1")


def lws_racks(tmp_path: Path) -> dict[str, str]:
    run = simulate(
        tmp_path, one_pod_racks(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, with_scheduler_name(LWS_SEGMENTED)
    )
    placed = run.running()
    assert len(placed) == 5
    return {name: rack_of(node) for name, node in placed.items()}


def test_lws_workers_of_a_segment_share_a_rack(tmp_path: Path) -> None:
    # Workers 1-4 (pods lws-segmented-0-1 ... -0-4) in segments of 2: (1, 2) and (3, 4).
    racks = lws_racks(tmp_path)
    assert racks["lws-segmented-0-1"] == racks["lws-segmented-0-2"]
    assert racks["lws-segmented-0-3"] == racks["lws-segmented-0-4"]


def test_lws_leader_shares_the_first_segments_rack(tmp_path: Path) -> None:
    # "With the default LeaderWorker policy, the leader is grouped together with the workers in the first
    # segment."
    racks = lws_racks(tmp_path)
    assert racks["lws-segmented-0"] == racks["lws-segmented-0-1"]
