"""A sub-group's minimum (`minSubGroup`, unset: all children), which children count as satisfied, and the
order sub-groups are served in (plugin subgrouporder), ported from KAI v0.17:
`pkg/scheduler/api/podgroup_info/subgroup_info/subgroupset_test.go` (TestGetMinChildrenToSatisfy,
TestSubGroupSet_MinSubGroupZero_AlwaysSatisfied, TestGetNumActiveAllocatedDirectSubGroups) and
`pkg/scheduler/plugins/subgrouporder/subgroup_order_test.go` (TestSubGroupOrderFn, by case name).
"""

from __future__ import annotations

import pytest

from kai_scheduler.model.jobs import PodSet, SubGroupSet
from kai_scheduler.plugins.ordering import elastic_rank, podset_rank
from subgroup_trees import group, job_of, leaf

# --- TestGetMinChildrenToSatisfy -------------------------------------------------------------------


def test_no_min_sub_group_empty() -> None:
    assert group("root", []).min_to_satisfy() == 0


def test_no_min_sub_group_counts_children() -> None:
    root = group("root", [group("a", []), group("b", []), leaf("ps", 1)])
    assert root.min_to_satisfy() == 3


def test_min_sub_group_overrides_count() -> None:
    assert group("root", [group("a", []), group("b", [])], min_sub_group=1).min_to_satisfy() == 1


def test_min_sub_group_zero_returns_zero() -> None:
    assert group("root", [group("a", []), group("b", [])], min_sub_group=0).min_to_satisfy() == 0


# --- TestSubGroupSet_MinSubGroupZero_AlwaysSatisfied ---------------------------------------------------


def test_no_allocated_children_still_satisfied() -> None:
    assert group("root", [leaf("ps", 3)], min_sub_group=0).is_satisfied()


def test_no_ready_members_still_ready_for_scheduling() -> None:
    assert group("root", [leaf("ps", 3)], min_sub_group=0).is_ready()


def test_nested_min_sub_group_zero_satisfied() -> None:
    inner = group("inner", [leaf("ps", 2)], min_sub_group=0)
    root = group("root", [inner])
    assert inner.is_satisfied()
    assert root.satisfied_members() == 1


# --- TestGetNumActiveAllocatedDirectSubGroups --------------------------------------------------------


@pytest.mark.parametrize(
    ("children", "satisfied"),
    [
        pytest.param([], 0, id="empty"),
        pytest.param([leaf("ps", 3, running=2)], 0, id="podSet_not_satisfied"),
        pytest.param([leaf("ps", 3, running=3)], 1, id="podSet_satisfied"),
        pytest.param([leaf("ok", 1, running=1), leaf("bad", 2, running=1)], 1, id="mixed_podSets"),
        pytest.param([group("child", [leaf("ps", 1, running=1)])], 1, id="nested_child_satisfied_by_podSet"),
        pytest.param([group("emptyChild", [])], 1, id="empty_child_subgroup_counts_satisfied"),
    ],
)
def test_get_num_active_allocated_direct_sub_groups(
    children: list[PodSet | SubGroupSet], satisfied: int
) -> None:
    assert group("root", children).satisfied_members() == satisfied


def test_nested_child_not_satisfied_until_pod_min_met() -> None:
    podset = leaf("ps", 2, running=1, pending=1)
    root = group("root", [group("child", [podset])])
    assert root.satisfied_members() == 0
    podset.tasks[1].status = podset.tasks[0].status  # the pending pod starts running
    assert root.satisfied_members() == 1


# --- TestSubGroupOrderFn -------------------------------------------------------------------------------


def with_pod_sets(name: str, min_sub_group: int | None, specs: list[tuple[int, int]]) -> SubGroupSet:
    """KAI's makeSubGroupSetWithPodSetMembers: pod sets of (minAvailable, running)."""
    members = [leaf(f"{name}-member-{i}", need, running=count) for i, (need, count) in enumerate(specs)]
    return group(name, members, min_sub_group=min_sub_group)


L, R, EQUAL = -1, 1, 0

ORDER_CASES = [
    (
        "both below threshold (nil minSubGroup, no members satisfied)",
        with_pod_sets("l", None, [(3, 1), (3, 0)]),
        with_pod_sets("r", None, [(3, 2), (3, 1)]),
        EQUAL,
    ),
    (
        "left below threshold, right above",
        with_pod_sets("l", None, [(3, 0), (3, 0)]),
        with_pod_sets("r", None, [(3, 5), (3, 4)]),
        L,
    ),
    (
        "right below threshold, left above",
        with_pod_sets("l", None, [(3, 5), (3, 4)]),
        with_pod_sets("r", None, [(3, 0), (3, 0)]),
        R,
    ),
    (
        "both satisfied, left has lower satisfaction ratio",
        with_pod_sets("l", 2, [(3, 5), (3, 4), (3, 0)]),
        with_pod_sets("r", 2, [(3, 5), (3, 4), (3, 3)]),
        L,
    ),
    (
        "both satisfied, equal satisfaction ratio",
        with_pod_sets("l", 2, [(1, 1)] * 4),
        with_pod_sets("r", 4, [(1, 1)] * 8),
        EQUAL,
    ),
    (
        "left optional (minSubGroup=0), right required and satisfied",
        with_pod_sets("l", 0, []),
        with_pod_sets("r", 2, [(3, 5), (3, 4)]),
        R,
    ),
    (
        "left non-leaf optional (minSubGroup=0 with children), right required and satisfied",
        with_pod_sets("l", 0, [(2, 0), (2, 0)]),
        with_pod_sets("r", 2, [(3, 5), (3, 4)]),
        R,
    ),
    (
        "both non-leaf optional (minSubGroup=0), neither has allocated members",
        with_pod_sets("l", 0, [(2, 0)]),
        with_pod_sets("r", 0, [(3, 0)]),
        EQUAL,
    ),
    (
        "both non-leaf optional (minSubGroup=0), left has fewer allocated members",
        with_pod_sets("l", 0, [(1, 0)]),
        with_pod_sets("r", 0, [(1, 1)]),
        L,
    ),
    (
        "nested SubGroupSets: left's member not satisfied, right's member satisfied",
        group("l", [with_pod_sets("l-member", None, [(2, 3), (2, 0)])], min_sub_group=1),
        group("r", [with_pod_sets("r-member", None, [(2, 3), (2, 4)])], min_sub_group=1),
        L,
    ),
    (
        "both below minAvailable, should be equal (PodSet)",
        leaf("l", 3, running=1),
        leaf("r", 4, running=2),
        EQUAL,
    ),
    ("left below, right above minAvailable (PodSet)", leaf("l", 3, running=1), leaf("r", 3, running=5), L),
    ("right below, left above minAvailable (PodSet)", leaf("l", 3, running=5), leaf("r", 3, running=1), R),
    (
        "both above minAvailable, left lower allocation ratio (PodSet)",
        leaf("l", 2, running=4),
        leaf("r", 4, running=9),
        L,
    ),
    (
        "both above minAvailable, right lower allocation ratio (PodSet)",
        leaf("l", 2, running=10),
        leaf("r", 4, running=9),
        R,
    ),
    (
        "both above minAvailable, equal allocation ratio (PodSet)",
        leaf("l", 2, running=4),
        leaf("r", 4, running=8),
        EQUAL,
    ),
]


@pytest.mark.parametrize(
    ("left", "right", "want"), [case[1:] for case in ORDER_CASES], ids=[c[0] for c in ORDER_CASES]
)
def test_sub_group_order_fn(left: PodSet | SubGroupSet, right: PodSet | SubGroupSet, want: int) -> None:
    got = podset_rank(left), podset_rank(right)
    assert (got[0] > got[1]) - (got[0] < got[1]) == want


# --- elastic job order of a job with sub-groups (KAI's elastic.go minAvailableState) ---------------------


@pytest.mark.parametrize(
    ("children", "rank"),
    [
        pytest.param([leaf("a", 1, pending=1), leaf("b", 1, running=2)], 0, id="a pod set below: below"),
        pytest.param([leaf("a", 1, running=1), leaf("b", 2, running=2)], 1, id="every pod set at: at"),
        pytest.param([leaf("a", 1, running=1), leaf("b", 1, running=2)], 2, id="one above: above"),
    ],
)
def test_elastic_rank_of_a_job_with_sub_groups_is_per_pod_set(children: list[PodSet], rank: int) -> None:
    # The PodGroup states minSubGroup and no minMember: its pod sets decide, not a minMember of 0.
    assert elastic_rank(job_of(children, min_sub_group=1)) == rank
