"""A PodGroup's minimums as KAI v0.17's PodGroup webhook checks them, ported by case name from
`pkg/apis/scheduling/v2alpha2/podgroup_webhook_test.go`: TestValidateSubGroups, TestValidatePodGroupSpec
and TestCreateRejectsWhatUpdateWarns. KAI's words are compared exactly where the rule is one of the
minimum rules; the graph's (duplicates, missing parents, cycles) are this project's, which name the
sub-group's position, so there only the refusal is compared.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai_scheduler.api.manifests import InvalidField, check_sub_groups, pod_group_warnings
from kai_scheduler.api.objects import ObjectMeta, PodGroup, PodGroupSpec, SubGroup
from kai_scheduler.api.podgroup_rules import Severity, min_findings


def sub(name: str, parent: str | None = None, *, mm: int | None = None, msg: int | None = None) -> SubGroup:
    # Built without the schema: KAI's cases use names (A) that the CRD's DNS-label pattern refuses.
    return SubGroup.model_construct(name=name, parent=parent, min_member=mm, min_sub_group=msg)


def spec(*subs: SubGroup, mm: int | None = None, msg: int | None = None) -> PodGroupSpec:
    return PodGroupSpec.model_construct(sub_groups=list(subs), min_member=mm, min_sub_group=msg)


def refused_on_create(pod_group_spec: PodGroupSpec) -> str | None:
    group = PodGroup.model_construct(metadata=ObjectMeta(name="pg"), spec=pod_group_spec)
    try:
        check_sub_groups(group)
    except InvalidField as problem:
        return problem.message
    return None


MIN_MEMBER_REQUIRED = "subgroup {}: minMember is required"
LEAF_MIN_SUB_GROUP = 'subgroup "{}": minSubGroup cannot be set on a leaf SubGroup (no child SubGroups)'
MID_MIN_MEMBER = (
    'subgroup "parent": minMember cannot be set on a mid-level SubGroup (has child SubGroups); '
    "use minSubGroup instead"
)

# Cases KAI's tables share.
PARENT_OF_TWO = [sub("parent", msg=2), sub("child-1", "parent", mm=4), sub("child-2", "parent", mm=4)]
TWO_LEVELS = [
    sub("decode", msg=2),
    sub("decode-leaders", "decode", mm=1),
    sub("decode-workers", "decode", mm=4),
    sub("prefill", msg=2),
    sub("prefill-leaders", "prefill", mm=1),
    sub("prefill-workers", "prefill", mm=4),
]

# (case, sub-groups, KAI's structural error (None: none), KAI's minimum-rule findings)
SUB_GROUP_CASES: list[tuple[str, list[SubGroup], bool, list[str]]] = [
    ("Valid DAG single root", [sub("a", msg=1), sub("b", "a", msg=1), sub("c", "b", mm=1)], False, []),
    (
        "Valid DAG multiple roots",
        [sub("a", msg=1), sub("b", msg=1), sub("c", "a", mm=1), sub("d", "b", mm=1)],
        False,
        [],
    ),
    ("Missing parent", [sub("a", mm=1), sub("b", "x", mm=1)], True, []),
    ("Empty list", [], False, []),
    ("nil minMember on leaf subgroup", [sub("a")], False, [MIN_MEMBER_REQUIRED.format("a")]),
    (
        "parent subgroup may omit minMember when it has subgroup children",
        [sub("p"), sub("l", "p", mm=1)],
        False,
        [],
    ),
    (
        "leaf child still requires minMember when parent omits it",
        [sub("p"), sub("l", "p")],
        False,
        [MIN_MEMBER_REQUIRED.format("l")],
    ),
    ("Duplicate subgroup names", [sub("a", mm=1), sub("a", mm=1)], True, []),
    (
        "Cycle in graph (a -> b -> c -> a) - duplicate subgroup name",
        [sub("a", mm=1), sub("b", "a", mm=1), sub("c", "b", mm=1), sub("a", "c", mm=1)],
        True,
        [],
    ),
    ("Self-parent subgroup (cycle of length 1)", [sub("a", "a", mm=1)], True, []),
    (
        "Cycle in graph (a -> b -> c -> a)",
        [sub("a", "c", mm=1), sub("b", "a", mm=1), sub("c", "b", mm=1)],
        True,
        [],
    ),
    (
        "Multiple disjoint cycles",
        [sub("a", "b", mm=1), sub("b", "a", mm=1), sub("c", "d", mm=1), sub("d", "c", mm=1)],
        True,
        [],
    ),
    (
        "Valid: mid-level SubGroup uses minSubGroup",
        PARENT_OF_TWO,
        False,
        [],
    ),
    (
        "Invalid: leaf SubGroup uses minSubGroup",
        [sub("A", msg=1)],
        False,
        [LEAF_MIN_SUB_GROUP.format("A"), MIN_MEMBER_REQUIRED.format("A")],
    ),
    (
        "Invalid: mid-level SubGroup uses minMember",
        [sub("parent", mm=2), sub("child-1", "parent", mm=4), sub("child-2", "parent", mm=4)],
        False,
        [MID_MIN_MEMBER],
    ),
    (
        "Invalid: SubGroup has both minMember and minSubGroup",
        [sub("parent", mm=2, msg=1), sub("child-1", "parent", mm=4)],
        True,
        ['subgroup "parent": minMember and minSubGroup are mutually exclusive'],
    ),
    (
        "Invalid: SubGroup minSubGroup exceeds child count",
        [sub("parent", msg=3), sub("child-1", "parent", mm=4), sub("child-2", "parent", mm=4)],
        False,
        ['subgroup "parent": minSubGroup (3) exceeds the number of direct child SubGroups (2)'],
    ),
    (
        "Valid: minSubGroup equals child count",
        PARENT_OF_TWO,
        False,
        [],
    ),
    (
        "Invalid: minSubGroup = 0 on leaf SubGroup",
        [sub("A", msg=0)],
        False,
        [LEAF_MIN_SUB_GROUP.format("A"), MIN_MEMBER_REQUIRED.format("A")],
    ),
    (
        "Valid: 2-level hierarchy with minSubGroup at both levels",
        TWO_LEVELS,
        False,
        [],
    ),
]


@pytest.mark.parametrize(
    ("subs", "structural", "findings"), [c[1:] for c in SUB_GROUP_CASES], ids=[c[0] for c in SUB_GROUP_CASES]
)
def test_validate_sub_groups(subs: list[SubGroup], structural: bool, findings: list[str]) -> None:
    pod_group_spec = spec(*subs)
    if not structural:
        assert [f.message for f in min_findings(pod_group_spec)] == findings
    elif findings:  # KAI's structural error is one of the minimum rules: its words
        assert [f.message for f in min_findings(pod_group_spec)] == findings
        assert min_findings(pod_group_spec)[0].severity is Severity.STRUCTURAL
    refused = refused_on_create(pod_group_spec)
    # Everything KAI finds here but a minSubGroup above the child count is refused on create.
    assert (refused is not None) == (structural or any("exceeds" not in f for f in findings))


BOTH = (
    "minMember and minSubGroup are mutually exclusive: set minMember (24) to schedule a fixed number of "
    "pods, or set minSubGroup to require a minimum number of child SubGroups, but not both"
)

SPEC_CASES: list[tuple[str, PodGroupSpec, list[str]]] = [
    ("Valid: minMember only, no subgroups", spec(mm=4), []),
    (
        "Valid: minSubGroup with leaf subgroups using minMember",
        spec(*(sub(f"prefill-{i}", mm=8) for i in range(4)), msg=3),
        [],
    ),
    ("Valid: minSubGroup equals subgroup count", spec(sub("a", mm=4), sub("b", mm=4), msg=2), []),
    (
        "Invalid: both minMember and minSubGroup set on PodGroup",
        spec(sub("a", mm=8), sub("b", mm=8), sub("c", mm=8), mm=24, msg=3),
        [BOTH],
    ),
    (
        "Invalid: minSubGroup exceeds root subgroup count",
        spec(*(sub(n, mm=8) for n in "abcd"), msg=5),
        ["minSubGroup (5) exceeds the number of direct child SubGroups (4)"],
    ),
    (
        "Valid: 2-level hierarchy",
        spec(*TWO_LEVELS, msg=2),
        [],
    ),
    (
        "Invalid: subgroup validation error propagates",
        spec(sub("leaf", msg=1), msg=1),
        [LEAF_MIN_SUB_GROUP.format("leaf"), MIN_MEMBER_REQUIRED.format("leaf")],
    ),
    ("Valid: no subgroups, no minMember, no minSubGroup", spec(), []),
    (
        "Invalid: minSubGroup with no subgroups defined",
        spec(msg=1),
        ["minSubGroup (1) exceeds the number of direct child SubGroups (0)"],
    ),
]


@pytest.mark.parametrize(
    ("pod_group_spec", "findings"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES]
)
def test_validate_pod_group_spec(pod_group_spec: PodGroupSpec, findings: list[str]) -> None:
    assert [f.message for f in min_findings(pod_group_spec)] == findings


def test_a_pod_group_min_sub_group_below_one_is_refused() -> None:
    # validatePodGroupSpec's own rule (the CRD's minimum 1 refuses it first in a real cluster).
    found = min_findings(spec(sub("a", mm=1), msg=0))
    assert [(f.message, f.severity) for f in found] == [
        ("minSubGroup at the podgroup level must be equal to or greater than 1", Severity.ERROR)
    ]


def test_create_rejects_what_update_warns() -> None:
    group = PodGroup.model_construct(
        metadata=ObjectMeta(name="pg"), spec=spec(sub("parent", mm=2), sub("child", "parent", mm=1))
    )
    with pytest.raises(InvalidField) as refused:
        check_sub_groups(group)
    assert refused.value.message == MID_MIN_MEMBER
    check_sub_groups(group, update=True)
    assert pod_group_warnings(group, update=True) == [("spec.subGroups[0].minMember", MID_MIN_MEMBER)]
    assert pod_group_warnings(group) == []


def manifest(spec_fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": spec_fields,
    }


def test_the_schema_takes_kais_new_fields_and_keeps_its_bounds() -> None:
    group = PodGroup.model_validate(
        manifest(
            {
                "minSubGroup": 1,
                "subGroups": [{"name": "p", "minSubGroup": 0}, {"name": "l", "parent": "p", "minMember": 0}],
            }
        )
    )
    assert group.spec.min_member is None and group.spec.min_sub_group == 1
    assert [(s.min_member, s.min_sub_group) for s in group.spec.sub_groups] == [(None, 0), (0, None)]
    for bad in ({"minSubGroup": 0}, {"minMember": 0}, {"subGroups": [{"name": "Upper", "minMember": 1}]}):
        with pytest.raises(ValueError):
            PodGroup.model_validate(manifest(bad))
