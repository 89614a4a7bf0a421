"""Allocation of PodGroups whose sub-groups need only `minSubGroup` of their children, ported by case name
from KAI v0.17: `pkg/scheduler/actions/allocate/allocate_subgroups_test.go` TestHandleSubGroupsAllocation
(the three minSubGroup cases) and `allocateElastic_test.go` TestHandleElasticAllocation ("Elastic
allocation: satisfied PodSets in two-parent tree, lower-ratio group wins consecutive extra slots"). As in
KAI's harness: one node of GPUs, one queue with a GPU quota of 1, one-GPU pods named job0-<i> in order.
"""

from __future__ import annotations

from typing import Any

from helpers import binds, config, node, objects_of, one_cycle, open_session, queue_manifest
from kai_scheduler.cycle import ACTIONS
from subgroup_trees import job0_manifests

ALLOCATE = config(actions="allocate")


def job0(
    sub_groups: list[dict[str, Any]], pods: list[tuple[str, bool]], *, min_sub_group: int | None = None
) -> list[dict[str, Any]]:
    return job0_manifests(sub_groups, pods, min_sub_group=min_sub_group)


def leaves(parent: str | None, *names: str) -> list[dict[str, Any]]:
    return [{"name": name, "minMember": 1, **({"parent": parent} if parent else {})} for name in names]


def allocated(gpus: int, manifests: list[dict[str, Any]]) -> dict[str, str]:
    objects = [node("node0", gpus=gpus), *objects_of(queue_manifest("queue0", gpu=1), *manifests)]
    return binds(one_cycle(objects, ALLOCATE))


def test_tree_sub_groups_and_min_sub_groups_unsatisfied_group_gets_priority() -> None:
    # "Allocate job with tree SubGroups and MinSubGroups - unsatisfied group gets priority": group-cd (none
    # of its two members running) goes before group-ab (satisfied by sub-a alone, minSubGroup 1); the third
    # free GPU then goes to group-ab's unsatisfied sub-b.
    sub_groups = [
        {"name": "group-ab", "minSubGroup": 1},
        *leaves("group-ab", "sub-a", "sub-b"),
        {"name": "group-cd"},
        *leaves("group-cd", "sub-c", "sub-d"),
    ]
    pods = [("sub-a", True), ("sub-b", False), ("sub-b", False)]
    pods += [("sub-c", False), ("sub-c", False), ("sub-d", False), ("sub-d", False)]
    assert set(allocated(4, job0(sub_groups, pods))) == {"job0-1", "job0-3", "job0-5"}


def test_min_sub_group_only_the_first_required_member_is_scheduled_in_the_gang_phase() -> None:
    # "Allocate job with minSubGroup - only the first required member is scheduled in the gang phase".
    sub_groups = [
        {"name": "group-a"},
        *leaves("group-a", "sub-a1", "sub-a2"),
        {"name": "group-b"},
        *leaves("group-b", "sub-b1", "sub-b2"),
    ]
    pods = [("sub-a1", False), ("sub-a2", False), ("sub-b1", False), ("sub-b2", False)]
    assert set(allocated(2, job0(sub_groups, pods, min_sub_group=1))) == {"job0-0", "job0-1"}


def test_min_sub_group_elastic_phase_allocates_one_extra_member() -> None:
    # "Allocate job with minSubGroup - elastic phase allocates one extra member".
    sub_groups = [
        {"name": "group-a"},
        *leaves("group-a", "sub-a1"),
        {"name": "group-b"},
        *leaves("group-b", "sub-b1"),
    ]
    pods = [("sub-a1", True), ("sub-b1", False)]
    assert set(allocated(2, job0(sub_groups, pods, min_sub_group=1))) == {"job0-1"}


def test_satisfied_pod_sets_in_two_parent_tree_lower_ratio_group_wins_consecutive_extra_slots() -> None:
    # allocateElastic_test.go: group-ab needs 1 of its 2 members and has both (ratio 2), group-cd needs
    # both and has both (ratio 1): both extra GPUs go to group-cd's sub-c, not to group-ab's sub-a.
    sub_groups = [
        {"name": "group-ab", "minSubGroup": 1},
        *leaves("group-ab", "sub-a", "sub-b"),
        {"name": "group-cd"},
        *leaves("group-cd", "sub-c", "sub-d"),
    ]
    pods = [("sub-a", True), ("sub-a", True), ("sub-a", False), ("sub-a", False), ("sub-b", True)]
    pods += [("sub-c", True), ("sub-c", False), ("sub-c", False), ("sub-d", True)]
    assert set(allocated(7, job0(sub_groups, pods))) == {"job0-6", "job0-7"}


def test_a_tree_whose_required_sub_groups_lack_pods_waits_and_says_so() -> None:
    # Both leaves are required (no minSubGroup) and sub-b has one of the two pods its minMember needs.
    sub_groups = [{"name": "sub-a", "minMember": 1}, {"name": "sub-b", "minMember": 2}]
    objects = [
        node("node0", gpus=4),
        *objects_of(queue_manifest("queue0", gpu=1), *job0(sub_groups, [("sub-a", False), ("sub-b", False)])),
    ]
    session = open_session(objects, ALLOCATE)
    ACTIONS["allocate"]().execute(session)
    assert session.decisions == []
    assert session.unschedulable["default/job0"] == (
        "waiting for pods: too few sub-groups have the pods their minMember needs"
    )
