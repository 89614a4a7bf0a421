"""Which pods of a victim job go first without breaking its sub-group tree (KAI v0.17's hierarchical
`GetTasksToEvict`): `pkg/scheduler/api/podgroup_info/eviction_info_test.go`
TestGetTasksToEvict_HierarchicalTree, ported by case name. `more` is KAI's jobHasMoreActiveTasksAfterEviction.
"""

from __future__ import annotations

import pytest

from helpers import node, open_session, queue
from kai_scheduler.actions.solvers import gang_eviction
from kai_scheduler.actions.solvers.gang_eviction import (
    has_elastic_surplus,
    tasks_to_evict,
    walked_tasks_to_evict,
)
from kai_scheduler.model.jobs import ACTIVE_ALLOCATED, PodSet, SubGroupSet
from subgroup_trees import group, job_of, leaf

Member = PodSet | SubGroupSet

CASES: list[tuple[str, list[Member], int | None, bool, int, list[str] | None]] = [
    (
        "Phase1_ElasticRecursive_EvictFromPodSetAboveMin",
        [group("inner", [leaf("ps-a", 1, running=1), leaf("ps-b", 1, running=2)])],
        None,
        True,
        1,
        None,
    ),
    (
        "Phase2_ElasticDirect_DropMemberWhenMinSubGroupLessThanSatisfied",
        [leaf("ps-a", 1, running=1), leaf("ps-b", 1, running=1)],
        1,
        True,
        1,
        None,
    ),
    (
        "Phase2_ElasticDirect_NestedSubGroupSetWithMinSubGroup",
        [group("inner", [leaf("ps-a", 2, running=2), leaf("ps-b", 2, running=2)], min_sub_group=1)],
        None,
        True,
        2,
        None,
    ),
    (
        "Phase3_FullSubtreeEviction_AllMembersAtMin",
        [leaf("ps-a", 1, running=1), leaf("ps-b", 1, running=1)],
        None,
        False,
        2,
        None,
    ),
    ("NotSatisfied_ReturnsNil", [leaf("ps-a", 1, running=1), leaf("ps-b", 1)], None, False, 1, None),
    (
        "MixedSubGroupSetAndPodSetMembers",
        [leaf("ps-root", 1, running=2), group("inner", [leaf("ps-inner", 1, running=1)])],
        None,
        True,
        1,
        ["ps-root-1"],
    ),
    (
        "Phase1_GangEvictionInsideMember_DuringElasticRecursion",
        [
            group("member-a", [leaf("ps-a1", 1, running=1), leaf("ps-a2", 1, running=1)]),
            group("member-b", [leaf("ps-b1", 1, running=1), leaf("ps-b2", 1, running=1)]),
        ],
        1,
        True,
        2,
        None,
    ),
    ("MinSubGroupZero_RootEntireSubtreeElasticDroppable", [leaf("ps-a", 1, running=1)], 0, False, 1, None),
    (
        "MinSubGroupZero_NestedInnerSubtreeElasticDroppable",
        [group("inner", [leaf("ps-a", 1, running=1)], min_sub_group=0)],
        None,
        False,
        1,
        None,
    ),
    (
        "MinSubGroupZero_NestedInnerLeavesSiblingAlone",
        [group("inner", [leaf("ps-elastic", 1, running=1)], min_sub_group=0), leaf("ps-keep", 1, running=1)],
        None,
        True,
        1,
        ["ps-elastic-0"],
    ),
]


@pytest.mark.parametrize(
    ("children", "min_sub_group", "more", "count", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_get_tasks_to_evict_hierarchical_tree(
    children: list[Member], min_sub_group: int | None, more: bool, count: int, names: list[str] | None
) -> None:
    session = open_session([node("n0"), queue("q")])
    job = job_of(children, min_sub_group=min_sub_group)
    active = [task for task in job.tasks if task.status in ACTIVE_ALLOCATED]
    unit = tasks_to_evict(session, job, active, protected=False)
    assert (len(unit) < len(active), len(unit)) == (more, count)
    if names is not None:
        assert sorted(task.name for task in unit) == names


def test_a_protected_job_gives_only_what_keeps_its_tree_satisfied() -> None:
    session = open_session([node("n0"), queue("q")])
    at_minimum = job_of([leaf("ps-a", 1, running=1), leaf("ps-b", 1, running=1)])
    active = list(at_minimum.tasks)
    assert tasks_to_evict(session, at_minimum, active, protected=True) == []
    assert not has_elastic_surplus(session, at_minimum, active)
    one_spare = job_of([leaf("ps-a", 1, running=1), leaf("ps-b", 1, running=1)], min_sub_group=1)
    assert len(tasks_to_evict(session, one_spare, list(one_spare.tasks), protected=True)) == 1
    assert has_elastic_surplus(session, one_spare, list(one_spare.tasks))


@pytest.mark.parametrize(("children", "min_sub_group"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_the_one_pod_left_of_a_job_not_protected_is_its_unit_without_a_walk(
    monkeypatch: pytest.MonkeyPatch, children: list[Member], min_sub_group: int | None
) -> None:
    """Whatever the tree, the walk gives some of the pods left or all of them: with one left (and the job
    not protected) that pod, which `tasks_to_evict` gives without making the job's tree."""
    session = open_session([node("n0"), queue("q")])
    job = job_of(children, min_sub_group=min_sub_group)
    active = [task for task in job.tasks if task.status in ACTIVE_ALLOCATED]
    walked = {task.name: walked_tasks_to_evict(session, job, [task], protected=False) for task in active}
    assert walked == {task.name: [task] for task in active}

    def no_walk(*args: object) -> None:
        raise AssertionError("the job's tree was walked")

    monkeypatch.setattr(gang_eviction, "walked_tasks_to_evict", no_walk)
    assert all(tasks_to_evict(session, job, [task], protected=False) == [task] for task in active)
