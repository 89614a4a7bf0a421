"""KAI v0.17.0 docs/topology/segments.md's single-level PyTorchJob with one of its segment keys left out, as a
user gets it wrong: KAI's pod grouper (pytorch_grouper.go) passes over a segment placement without the
`kai.scheduler/topology` name (segments without a constraint) or without `kai.scheduler/segment-size` (no
segments), and the job runs. So does the simulated one, with one warning naming the job and the key where
KAI says nothing."""

from __future__ import annotations

from pathlib import Path

from docs_support import DEFAULT_QUEUES, simulate, with_scheduler_name
from test_segments import CLUSTER_TOPOLOGY, SINGLE_LEVEL, cluster

REQUIRED = "kai.scheduler/segment-topology-required-placement"
TOPOLOGY_LINE = '            kai.scheduler/topology: "cluster-topology"\n'
SIZE_LINE = '            kai.scheduler/segment-size: "4"\n'


def without(line: str) -> str:
    """The doc's example, schedulerName added, with `line` left out."""
    assert line in SINGLE_LEVEL
    return with_scheduler_name(SINGLE_LEVEL.replace(line, ""))


def dropped_warnings(warnings: list[str]) -> list[str]:
    return [line for line in warnings if "dropped:" in line]


def test_placement_without_topology_name_runs_and_says_so(tmp_path: Path) -> None:
    run = simulate(tmp_path, cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, without(TOPOLOGY_LINE))
    assert len(run.running()) == 17
    (line,) = dropped_warnings(run.warnings)
    assert "(PyTorchJob default/pytorch-tp4)" in line
    assert f'spec.pytorchReplicaSpecs.Worker.template.metadata.annotations["{REQUIRED}"]' in line
    assert "no kai.scheduler/topology names the topology" in line


def test_placement_without_segment_size_runs_and_says_so(tmp_path: Path) -> None:
    run = simulate(tmp_path, cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, without(SIZE_LINE))
    assert len(run.running()) == 17
    (line,) = dropped_warnings(run.warnings)
    assert (
        f'annotations["{REQUIRED}"]: dropped: a segment placement without kai.scheduler/segment-size' in line
    )


def test_the_whole_example_warns_of_nothing_dropped(tmp_path: Path) -> None:
    run = simulate(tmp_path, cluster(), CLUSTER_TOPOLOGY, DEFAULT_QUEUES, with_scheduler_name(SINGLE_LEVEL))
    assert len(run.running()) == 17
    assert dropped_warnings(run.warnings) == []
