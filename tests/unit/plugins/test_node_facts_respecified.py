"""The predicates plugin's node facts for a node table whose few nodes got new static facts (a cordon, a
label, a taint, readiness: `NodeTable.respecify`) are the last table's facts with those rows worked out
again; they answer every filter as facts built from the whole table do."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai_scheduler.api.objects import Taint, Toleration
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.model.jobs import Placement
from kai_scheduler.model.nodes import NodeSpecInfo, NodeTable
from kai_scheduler.plugins.predicates import NodeFacts, _verified

ZONES = ("z1", "z2", "z3")
TAINTS = (
    (),
    (Taint(key="gpu", effect="NoSchedule"),),
    (Taint(key="soft", effect="PreferNoSchedule"),),
    (Taint(key="gpu", value="a100", effect="NoSchedule"), Taint(key="soft", effect="PreferNoSchedule")),
)
PLACEMENTS = [
    Placement(f"p{i}", selector, None, tolerations, False)
    for i, (selector, tolerations) in enumerate(
        [
            ({}, ()),
            ({"zone": "z1"}, ()),
            ({"zone": "z2", "rack": "r1"}, (Toleration(key="gpu", operator="Exists"),)),
            ({"rack": "r2"}, (Toleration(key="gpu", value="a100", effect="NoSchedule"),)),
            ({"zone": "gone"}, (Toleration(operator="Exists"),)),
        ]
    )
]

facts_of_a_node = st.tuples(
    st.booleans(),  # cordoned
    st.booleans(),  # ready
    st.sampled_from((None, *ZONES)),
    st.sampled_from((None, "r1", "r2")),
    st.integers(0, len(TAINTS) - 1),
)


def spec(name: str, facts: tuple[bool, bool, str | None, str | None, int]) -> NodeSpecInfo:
    cordoned, ready, zone, rack, taints = facts
    labels = {key: value for key, value in (("zone", zone), ("rack", rack)) if value is not None}
    return NodeSpecInfo(name, labels, cordoned, TAINTS[taints], ready=ready)


def answers(facts: NodeFacts) -> list[object]:
    table = NodeTable.__new__(NodeTable)  # the filters read only the table's size and specs
    table.specs, table.size = facts.specs, len(facts.specs)
    found: list[object] = [facts.soft_taints, [list(t) for t in facts.taints]]
    for placement in PLACEMENTS:
        found.append([(name, check(placement, table).tolist()) for name, _, check in facts.filters])
    return found


@settings(max_examples=150, deadline=None)
@given(
    st.lists(facts_of_a_node, min_size=16, max_size=40),
    st.lists(st.tuples(st.integers(0, 39), facts_of_a_node), max_size=3),
    st.booleans(),
)
def test_facts_of_a_few_nodes_respecified_equal_facts_of_the_whole_table(
    nodes: list[tuple[bool, bool, str | None, str | None, int]],
    changes: list[tuple[int, tuple[bool, bool, str | None, str | None, int]]],
    asked_first: bool,
) -> None:
    before = [spec(f"n{i:02d}", facts) for i, facts in enumerate(nodes)]
    last = NodeFacts.of(before)
    if asked_first:  # label keys the last facts' index already walked are carried
        answers(last)
    after = list(before)
    for row, facts in changes:
        if row < len(after):
            after[row] = spec(after[row].name, facts)
    carried = last.respecified(after)
    if len({row for row, _ in changes if row < len(after)}) * 16 > len(after):
        assert carried is None
        return
    assert carried is not None
    assert answers(carried) == answers(NodeFacts.of(after))


def test_a_whole_new_table_is_not_respecified() -> None:
    before = [spec(f"n{i:02d}", (False, True, "z1", "r1", 0)) for i in range(16)]
    assert NodeFacts.of(before).respecified(before[:-1]) is None
    assert (
        NodeFacts.of(before).respecified([spec(s.name, (True, True, "z1", "r1", 0)) for s in before]) is None
    )


def test_a_respecified_node_alone_turns_prefer_no_schedule_on_and_off() -> None:
    plain = [spec(f"n{i:02d}", (False, True, "z1", "r1", 0)) for i in range(16)]
    soft = [*plain[:-1], spec("n15", (False, True, "z1", "r1", 2))]
    facts = NodeFacts.of(plain)
    assert not facts.soft_taints
    turned_on = facts.respecified(soft)
    assert turned_on is not None and turned_on.soft_taints
    turned_off = turned_on.respecified(plain)
    assert turned_off is not None and not turned_off.soft_taints


def test_a_taint_no_node_had_is_checked_on_its_respecified_node() -> None:
    plain = [spec(f"n{i:02d}", (False, True, "z1", "r1", 0)) for i in range(16)]
    for taints in range(1, len(TAINTS)):  # each list new to the carried facts' numbers and examples
        tainted = [*plain[:-1], spec("n15", (False, True, "z1", "r1", taints))]
        carried = NodeFacts.of(plain).respecified(tainted)
        assert carried is not None
        assert answers(carried) == answers(NodeFacts.of(tainted))


def test_verifying_raises_on_carried_facts_that_are_not_their_nodes() -> None:
    plain = [spec(f"n{i:02d}", (False, True, "z1", "r1", 0)) for i in range(16)]
    cordoned = [*plain[:-1], spec("n15", (True, True, "z2", "r1", 1))]
    facts = NodeFacts.of(plain)
    answers(facts)  # label keys asked, which the check compares too
    carried = facts.respecified(cordoned)
    assert carried is not None and carried.alike(NodeFacts.of(cordoned))
    for wrong in (
        replace(carried, schedulable=facts.schedulable),  # the cordon left out
        replace(carried, taint_examples=facts.taint_examples | {1: []}),  # another list for a number
        replace(carried, labels=facts.labels),  # the zone read before
    ):
        assert not wrong.alike(NodeFacts.of(cordoned))
        with pytest.raises(CarriedMismatch):
            _verified(wrong)


def test_facts_of_untainted_and_tainted_nodes_count_each_soft_node_and_number_each_taint_list() -> None:
    """Nodes without a taint (most, answered without looking at a taint) share the empty list's number,
    and every node with a PreferNoSchedule taint, alone or among others, counts as soft."""
    kinds_of_nodes = (0, 2, 0, 3, 1, 0, 2)
    facts = NodeFacts.of([spec(f"n{i}", (False, True, "z1", "r1", k)) for i, k in enumerate(kinds_of_nodes)])
    assert facts.soft_count == 3
    assert facts.taint_numbers[()] == 0
    assert len(facts.taint_numbers) == 4
    numbers = facts.taint_kinds.tolist()
    assert [numbers[i] for i in (0, 2, 5)] == [0, 0, 0] and numbers[1] == numbers[6]
    assert len(set(numbers)) == 4
