"""The PodGroup webhook applies KAI v0.17's minimum rules as KAI's does: refuses on create what it only
warns of on update (a mid-level minMember, TestCreateRejectsWhatUpdateWarns), and passes KAI's warnings on
(a minSubGroup above the number of children) with the answer, admitted or not."""

from __future__ import annotations

from typing import Any

from kai_scheduler.k8s.admission.review import review_podgroup_validation

MID_LEVEL = (
    'spec.subGroups[0].minMember: subgroup "parent": minMember cannot be set on a mid-level SubGroup (has '
    "child SubGroups); use minSubGroup instead"
)


def review(spec: dict[str, Any], operation: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ml"},
        "spec": {"queue": "team-a", **spec},
    }
    kind = {"group": "scheduling.run.ai", "version": "v2alpha2", "kind": "PodGroup"}
    request = {
        "uid": "u",
        "operation": operation,
        "object": obj,
        "kind": kind,
        "resource": {"group": kind["group"], "version": kind["version"], "resource": "podgroups"},
    }
    answer: dict[str, Any] = review_podgroup_validation(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )["response"]
    return answer


def test_a_mid_level_min_member_is_refused_on_create_and_a_warning_on_update() -> None:
    spec = {
        "subGroups": [
            {"name": "parent", "minMember": 2},
            {"name": "child", "parent": "parent", "minMember": 1},
        ]
    }
    created = review(spec, "CREATE")
    assert created["allowed"] is False
    assert created["status"]["message"] == MID_LEVEL
    updated = review(spec, "UPDATE")
    assert updated["allowed"] is True
    assert updated["warnings"] == [MID_LEVEL]


def test_a_min_sub_group_above_the_children_is_admitted_with_kais_warning() -> None:
    answer = review({"minSubGroup": 3, "subGroups": [{"name": "a", "minMember": 1}]}, "CREATE")
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "spec.minSubGroup: minSubGroup (3) exceeds the number of direct child SubGroups (1)"
    ]


def test_both_thresholds_on_the_pod_group_are_refused_with_kais_words() -> None:
    answer = review(
        {"minMember": 2, "minSubGroup": 1, "subGroups": [{"name": "a", "minMember": 1}]}, "UPDATE"
    )
    assert answer["allowed"] is False
    assert (
        "minMember and minSubGroup are mutually exclusive: set minMember (2)" in answer["status"]["message"]
    )


def test_a_leaf_without_min_member_is_refused_and_warnings_still_come_back() -> None:
    answer = review({"minSubGroup": 2, "subGroups": [{"name": "a"}]}, "CREATE")
    assert answer["allowed"] is False
    assert answer["status"]["message"] == "spec.subGroups[0].minMember: subgroup a: minMember is required"
    assert answer["warnings"] == [
        "spec.minSubGroup: minSubGroup (2) exceeds the number of direct child SubGroups (1)"
    ]
