"""Following controller owner references to the object a pod is grouped by."""

from __future__ import annotations

import pytest
from pg_objects import controller_ref, obj, pod

from kai_scheduler.k8s.podgrouper import GroupingError, owner_chain, plan_pod_group, top_owner


def test_a_pod_without_owner_is_its_own_top_owner() -> None:
    p = pod("solo", "uid-solo")
    del p["apiVersion"], p["kind"]  # as in a list response
    top = top_owner(p, [])
    assert (top["apiVersion"], top["kind"], top["metadata"]["name"]) == ("v1", "Pod", "solo")


def test_owners_in_any_order_unrelated_ignored() -> None:
    deploy = obj("apps/v1", "Deployment", "web", "uid-d")
    rs = obj("apps/v1", "ReplicaSet", "web-1", "uid-r", owner=deploy)
    stranger = obj("apps/v1", "Deployment", "other", "uid-x")
    p = pod("web-1-a", "uid-p", owner=rs)
    assert top_owner(p, [stranger, deploy, rs]) is deploy
    assert [o.kind for o in owner_chain(p, [deploy, rs])] == ["Pod", "ReplicaSet", "Deployment"]


def test_non_controller_references_are_not_followed() -> None:
    cm = obj("v1", "ConfigMap", "cfg", "uid-cm")
    p = pod("x", "uid-x")
    p["metadata"]["ownerReferences"] = [{**controller_ref(cm), "controller": False}]
    assert top_owner(p, [cm]) is p


def test_owner_without_kind_takes_it_from_the_reference() -> None:
    job = obj("batch/v1", "Job", "j", "uid-j")
    p = pod("j-0", "uid-j0", owner=job)
    del job["apiVersion"], job["kind"]
    top = top_owner(p, [job])
    assert (top["apiVersion"], top["kind"]) == ("batch/v1", "Job")
    assert plan_pod_group(p, [job]).name == "pg-j-0-uid-j"


def test_owner_fetched_at_another_version_is_accepted() -> None:
    rc = obj("ray.io/v1", "RayCluster", "rc", "uid-rc")
    p = pod("rc-head", "uid-h", owner={**rc, "apiVersion": "ray.io/v1alpha1"})
    assert top_owner(p, [rc])["apiVersion"] == "ray.io/v1"


def test_missing_owner_is_a_clear_error() -> None:
    job = obj("batch/v1", "Job", "j", "uid-j")
    with pytest.raises(GroupingError) as err:
        plan_pod_group(pod("j-0", "uid-j0", owner=job), [])
    assert str(err.value) == (
        "Pod team-a/j-0: metadata.ownerReferences[0]: the owner Job j (uid uid-j) was not provided"
    )


def test_reference_and_object_of_different_kinds_is_an_error() -> None:
    job = obj("batch/v1", "Job", "j", "uid-j")
    impostor = obj("apps/v1", "Deployment", "j", "uid-j")
    with pytest.raises(
        GroupingError, match="points at a batch/v1 Job, but the object is a apps/v1 Deployment"
    ):
        top_owner(pod("j-0", "uid-j0", owner=job), [impostor])


def test_cycle_is_an_error() -> None:
    a = obj("example.com/v1", "A", "a", "uid-a")
    b = obj("example.com/v1", "B", "b", "uid-b", owner=a)
    a["metadata"]["ownerReferences"] = [controller_ref(b)]
    with pytest.raises(GroupingError, match="cycle"):
        top_owner(pod("p", "uid-p", owner=b), [a, b])


def test_two_controllers_is_an_error() -> None:
    a = obj("example.com/v1", "A", "a", "uid-a")
    b = obj("example.com/v1", "B", "b", "uid-b")
    p = pod("p", "uid-p")
    p["metadata"]["ownerReferences"] = [controller_ref(a), controller_ref(b)]
    with pytest.raises(GroupingError, match=r"ownerReferences\[1\]: more than one"):
        top_owner(p, [a, b])


def test_reference_without_uid_is_an_error() -> None:
    p = pod("p", "uid-p")
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True}
    ]
    with pytest.raises(GroupingError, match=r"Pod team-a/p: metadata.ownerReferences\[0\].uid: is missing"):
        top_owner(p, [])


def test_argo_workflow_pods_are_grouped_one_by_one() -> None:
    wf = obj("argoproj.io/v1alpha1", "Workflow", "etl-x9", "uid-wf", labels={"kai.scheduler/queue": "etl"})
    steps = [
        pod(f"etl-x9-step-{i}", f"uid-st{i}", owner=wf, labels={"kai.scheduler/queue": "etl"}) for i in (1, 2)
    ]
    assert top_owner(steps[0], [wf]) is steps[0]
    plans = [plan_pod_group(s, [wf]) for s in steps]
    assert [p.name for p in plans] == ["pg-etl-x9-step-1-uid-st1", "pg-etl-x9-step-2-uid-st2"]
    assert plans[0].owner_reference["kind"] == "Pod"
    assert plans[0].queue == "etl"


def test_a_skipped_kind_below_the_top_is_not_skipped() -> None:
    # Only the topmost owner is skipped.
    wf = obj("argoproj.io/v1alpha1", "Workflow", "inner", "uid-wf")
    outer = obj("example.com/v1", "Pipeline", "outer", "uid-out")
    wf["metadata"]["ownerReferences"] = [controller_ref(outer)]
    assert top_owner(pod("s", "uid-s", owner=wf), [wf, outer]) is outer


def test_not_a_pod_is_an_error() -> None:
    with pytest.raises(GroupingError, match="expected a v1 Pod, got apps/v1 Deployment"):
        plan_pod_group(obj("apps/v1", "Deployment", "d", "uid-d"), [])
