"""KAI v0.17.0 docs/topology/segments.md's single-level PyTorchJob with one of its segment keys left out, as a
user gets it wrong: KAI's pod grouper (pytorch_grouper.go) passes over a segment placement without the
`kai.scheduler/topology` name (segments without a constraint) or without `kai.scheduler/segment-size` (no
segments), and the job runs. So does the simulated one, with one warning naming the job and the key where
KAI says nothing."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, nodes, simulate

REQUIRED = "kai.scheduler/segment-topology-required-placement"


def pytorchjob(worker_annotations: str) -> str:
    return f"""
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
          schedulerName: kai-scheduler
          containers:
            - name: pytorch
              image: pytorch/pytorch:latest
    Worker:
      replicas: 8
      template:
        metadata:
          annotations:
{worker_annotations}
        spec:
          schedulerName: kai-scheduler
          containers:
            - name: pytorch
              image: pytorch/pytorch:latest
"""


def dropped_warnings(warnings: list[str]) -> list[str]:
    return [line for line in warnings if "dropped:" in line]


def test_placement_without_topology_name_runs_and_says_so(tmp_path: Path) -> None:
    job = pytorchjob(f'            kai.scheduler/segment-size: "4"\n            {REQUIRED}: "rack"')
    run = simulate(tmp_path, nodes("node-0"), DEFAULT_QUEUES, job)
    assert len(run.running()) == 9
    (line,) = dropped_warnings(run.warnings)
    assert "(PyTorchJob default/pytorch-tp4)" in line
    assert f'spec.pytorchReplicaSpecs.Worker.template.metadata.annotations["{REQUIRED}"]' in line
    assert "no kai.scheduler/topology names the topology" in line


def test_placement_without_segment_size_runs_and_says_so(tmp_path: Path) -> None:
    job = pytorchjob(
        f'            kai.scheduler/topology: "cluster-topology"\n            {REQUIRED}: "rack"'
    )
    run = simulate(tmp_path, nodes("node-0"), DEFAULT_QUEUES, job)
    assert len(run.running()) == 9
    (line,) = dropped_warnings(run.warnings)
    assert (
        f'annotations["{REQUIRED}"]: dropped: a segment placement without kai.scheduler/segment-size' in line
    )


def test_a_whole_segment_setting_warns_of_nothing(tmp_path: Path) -> None:
    job = pytorchjob(
        '            kai.scheduler/segment-size: "4"\n'
        '            kai.scheduler/topology: "cluster-topology"\n'
        f'            {REQUIRED}: "kubernetes.io/hostname"'
    )
    topology = """
apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata:
  name: cluster-topology
spec:
  levels:
  - nodeLabel: kubernetes.io/hostname
"""
    run = simulate(tmp_path, nodes("node-0", "node-1"), topology, DEFAULT_QUEUES, job)
    assert len(run.running()) == 9
    assert dropped_warnings(run.warnings) == []
