"""Which pods an allocation attempt takes from a sub-group tree with `minSubGroup` (KAI v0.17's
`GetTasksToAllocate`, `pkg/scheduler/api/podgroup_info/allocation_info_test.go`
Test_GetTasksToAllocate_MinSubGroupZero, by case name), and a group served in sub-group order.
"""

from __future__ import annotations

import pytest

from helpers import node, open_session, queue
from kai_scheduler.framework.gang import tasks_to_allocate
from kai_scheduler.model.jobs import PodSet
from subgroup_trees import group, job_of, leaf


@pytest.mark.parametrize(
    ("children", "want"),
    [
        pytest.param(
            [leaf("sgA", 1, pending=1), leaf("sgB", 1, pending=1)],
            1,
            id="root minSubGroup=0, all children unsatisfied: gang skipped, "
            "elastic returns one child's tasks",
        ),
        pytest.param(
            [leaf("sgA", 1, running=1), leaf("sgB", 1, running=1)],
            0,
            id="root minSubGroup=0, all children satisfied: elastic returns no tasks",
        ),
        pytest.param(
            [leaf("sgA", 1, running=1), leaf("sgB", 1, running=1, pending=1)],
            1,
            id="root minSubGroup=0, one satisfied + one with elastic surplus: returns one elastic task",
        ),
    ],
)
def test_get_tasks_to_allocate_min_sub_group_zero(children: list[PodSet], want: int) -> None:
    session = open_session([node("n0"), queue("q")])
    assert len(tasks_to_allocate(session, job_of(children, min_sub_group=0))) == want


def test_below_its_minimum_a_group_takes_its_first_children_in_their_order() -> None:
    # minSubGroup 1 of two equally unsatisfied groups: the first one's pods only (KAI's "only the first
    # required member is scheduled in the gang phase").
    a = group("group-a", [leaf("sub-a1", 1, pending=1), leaf("sub-a2", 1, pending=1)])
    b = group("group-b", [leaf("sub-b1", 1, pending=1), leaf("sub-b2", 1, pending=1)])
    session = open_session([node("n0"), queue("q")])
    chosen = tasks_to_allocate(session, job_of([a, b], min_sub_group=1))
    assert [task.name for task in chosen] == ["sub-a1-0", "sub-a2-0"]


def test_an_unsatisfied_group_is_served_before_a_satisfied_one() -> None:
    ab = group("group-ab", [leaf("sub-a", 1, running=1), leaf("sub-b", 1, pending=2)], min_sub_group=1)
    cd = group("group-cd", [leaf("sub-c", 1, pending=2), leaf("sub-d", 1, pending=2)])
    session = open_session([node("n0"), queue("q")])
    chosen = tasks_to_allocate(session, job_of([ab, cd]))
    assert [task.name for task in chosen] == ["sub-c-0", "sub-d-0"]
