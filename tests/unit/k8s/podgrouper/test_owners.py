"""Following controller owner references to the object a pod is grouped by."""

from __future__ import annotations

import pytest
from pg_objects import controller_ref, obj, pod

from kai_scheduler.controlplane.podgrouper import GroupingError, owner_chain, plan_pod_group, top_owner


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
    assert plan_pod_group(p, [job]).name == "pg-j-uid-j"


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


def test_scheduled_workflow_and_its_workflow_are_both_skipped() -> None:
    swf = obj(
        "kubeflow.org/v1beta1",
        "ScheduledWorkflow",
        "nightly",
        "uid-swf",
        labels={"kai.scheduler/queue": "from-swf"},
        spec={"enabled": True, "trigger": {"cronSchedule": {"cron": "0 0 2 * * *"}}},
    )
    wf = obj("argoproj.io/v1alpha1", "Workflow", "nightly-1735700000", "uid-wf", owner=swf)
    steps = [
        pod(f"nightly-1735700000-step-{i}", f"uid-st{i}", owner=wf, labels={"kai.scheduler/queue": "etl"})
        for i in (1, 2)
    ]
    assert top_owner(steps[0], [wf, swf]) is steps[0]
    assert [o.kind for o in owner_chain(steps[0], [wf, swf])] == ["Pod", "Workflow", "ScheduledWorkflow"]
    plans = [plan_pod_group(s, [wf, swf]) for s in steps]
    assert [p.name for p in plans] == [
        "pg-nightly-1735700000-step-1-uid-st1",
        "pg-nightly-1735700000-step-2-uid-st2",
    ]
    assert [p.owner_reference["uid"] for p in plans] == ["uid-st1", "uid-st2"]
    # The skipped owners' labels are not read: the queue is the pod's.
    assert plans[0].queue == "etl"
    assert plans[0].min_member == 1


def test_skipping_stops_at_the_first_kind_that_is_not_skipped() -> None:
    # A Workflow step that creates a JobSet (an Argo resource template), the Workflow started by a
    # ScheduledWorkflow: ScheduledWorkflow -> Workflow -> JobSet -> Job -> pod is grouped by the JobSet.
    swf = obj("kubeflow.org/v1beta1", "ScheduledWorkflow", "nightly", "uid-swf")
    wf = obj("argoproj.io/v1alpha1", "Workflow", "nightly-1", "uid-wf", owner=swf)
    js = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "uid-js", owner=wf)
    job = obj("batch/v1", "Job", "train-workers-0", "uid-job", owner=js)
    p = pod("train-workers-0-0", "uid-p", owner=job)
    assert top_owner(p, [job, js, wf, swf]) is js


def test_dynamo_deployment_part_is_grouped_as_a_deployment() -> None:
    dgd = obj(
        "nvidia.com/v1alpha1",
        "DynamoGraphDeployment",
        "graph",
        "uid-dgd",
        labels={"kai.scheduler/queue": "from-dgd"},
        spec={"services": {"Frontend": {"replicas": 1}}},
    )
    deploy = obj("apps/v1", "Deployment", "graph-frontend", "uid-dep", owner=dgd, labels={"app": "fe"})
    rs = obj("apps/v1", "ReplicaSet", "graph-frontend-5d8", "uid-rs", owner=deploy)
    p = pod("graph-frontend-5d8-q1w2e", "uid-fe", owner=rs)
    plan = plan_pod_group(p, [rs, deploy, dgd])
    # The Deployment grouper: one inference group per pod, owned by the pod, labels from the Deployment.
    assert plan.name == "pg-graph-frontend-5d8-q1w2e-uid-fe"
    assert plan.owner_reference["kind"] == "Pod"
    assert plan.priority_class_name == "inference"
    assert plan.labels == {"app": "fe"}
    assert plan.queue == "default-queue"
    assert '"kind":"Deployment"' in plan.annotations["kai.scheduler/top-owner-metadata"]
