"""Preemption of jobs with sub-group trees over several rounds, as the simulator runs them: KAI v0.17's
`pkg/scheduler/actions/integration_tests/preempt/allocate_preempt_test.go`
TestAllocateDeallocateSubgroupsIntegrationTest, its five cases ported by name. A build-priority preemptor
takes GPUs from a train-priority job0: the victims are the pods the job can lose without breaking its tree
(KAI's hierarchical GetTasksToEvict), the job's pending pods get what is left, and with no elastic surplus
the whole job goes. Each case runs until it settles; the placements are KAI's expected ones (KAI's bounds
on the number of binds, evictions and pipelines are not checked: the simulator's rounds are not KAI's)."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import node, objects_of, pod_manifest, queue_manifest, simulate
from subgroup_trees import job0_manifests

Pods = list[tuple[str, bool]]  # (sub-group, running on node0), named job0-<i>


def placements(
    gpus: int,
    sub_groups: list[dict[str, Any]],
    pods: Pods,
    preemptor_gpus: int,
    min_sub_group: int | None = None,
) -> dict[str, str | None]:
    job = job0_manifests(sub_groups, pods, min_sub_group=min_sub_group, priority_class="train")
    preemptor = pod_manifest("preemptor0-0", "queue0", gpus=preemptor_gpus, priority_class="build")
    manifests = objects_of(queue_manifest("queue0", gpu=gpus), *job, preemptor)
    document = simulate([node("node0", gpus=gpus), *manifests], until=120)
    return {pod["name"]: pod["node"] for pod in document["pods"]}


def leaf(name: str, min_member: int, parent: str | None = None) -> dict[str, Any]:
    return {"name": name, "minMember": min_member, **({"parent": parent} if parent else {})}


CASES = [
    (
        "Elastic eviction from PodSet above minAvailable, allocate pending in same job",
        (4, [leaf("sub0", 1), leaf("sub1", 1)], [("sub0", True)] * 3 + [("sub1", False)], 2, None),
        {"job0-0": "node0", "job0-1": None, "job0-2": None, "job0-3": "node0"},
    ),
    (
        "Nested SubGroupSets - elastic eviction from deep branch, allocate in sibling of same job",
        (
            4,
            [
                {"name": "inner-a"},
                leaf("ps-a", 1, "inner-a"),
                {"name": "inner-b"},
                leaf("ps-b", 1, "inner-b"),
            ],
            [("ps-a", True)] * 3 + [("ps-b", False)],
            2,
            None,
        ),
        {"job0-0": "node0", "job0-1": None, "job0-2": None, "job0-3": "node0"},
    ),
    (
        "Multiple elastic PodSets in sibling branches - evict from both, allocate pending in same job",
        (
            5,
            [leaf("sub0", 1), leaf("sub1", 1), leaf("sub2", 1)],
            [("sub0", True), ("sub0", True), ("sub1", True), ("sub1", True), ("sub2", False)],
            2,
            None,
        ),
        {"job0-0": "node0", "job0-1": None, "job0-2": "node0", "job0-3": None, "job0-4": "node0"},
    ),
    (
        "Full subgroup allocate then evict - all pods in ps-target allocated and then evicted",
        (
            4,
            [
                {"name": "group-a"},
                leaf("ps-target", 2, "group-a"),
                {"name": "group-b"},
                leaf("ps-other", 1, "group-b"),
            ],
            [("ps-target", False), ("ps-target", False), ("ps-other", True), ("ps-other", True)],
            4,
            None,
        ),
        {f"job0-{i}": None for i in range(4)},
    ),
    (
        "MinSubGroup elastic full preemption - preemptor evicts entire job with minSubGroup=1",
        (4, [leaf("sub0", 1), leaf("sub1", 1)], [("sub0", True)] * 2 + [("sub1", True)] * 2, 4, 1),
        {f"job0-{i}": None for i in range(4)},
    ),
]


@pytest.mark.parametrize(("setup", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_allocate_deallocate_subgroups_integration(
    setup: tuple[Any, ...], expected: dict[str, str | None]
) -> None:
    assert placements(*setup) == {**expected, "preemptor0-0": "node0"}
