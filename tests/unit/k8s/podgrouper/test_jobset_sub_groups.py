"""A JobSet is one PodGroup with a parent sub-group per replicated job and a leaf per replica (KAI v0.16's
breaking change #1617), ported by test name from KAI v0.17's
`pkg/podgrouper/podgrouper/plugins/jobset/jobset_grouper_test.go`. Not ported: KAI's fallback to the flat
grouper for a JobSet whose PodGroup was made before the upgrade (`detectLegacyPodGroup`, "remove in
v0.17"): the grouper here decides from the pod and its owners only."""

from __future__ import annotations

from typing import Any

import pytest
from pg_objects import obj, pod

from kai_scheduler.controlplane.podgrouper import GroupingError, plan_pod_group, pod_group_manifest
from kai_scheduler.controlplane.podgrouper.plan import PodGroupPlan, SubGroupPlan

MIN_MEMBER = "kai.scheduler/batch-min-member"


def replicated_job(
    name: str, replicas: int | None, parallelism: int, template_min: str | None = None
) -> dict[str, Any]:
    job: dict[str, Any] = {"name": name, "template": {"spec": {"parallelism": parallelism}}}
    if replicas is not None:
        job["replicas"] = replicas
    if template_min is not None:
        job["template"]["metadata"] = {"annotations": {MIN_MEMBER: template_min}}
    return job


def jobset(
    *jobs: dict[str, Any], order: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": list(jobs)}
    if order is not None:
        spec["startupPolicy"] = {"startupPolicyOrder": order}
    return obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", "uid", annotations=annotations, spec=spec)


def plan_of(js: dict[str, Any], job_name: str | None, index: str | None, name: str = "p") -> PodGroupPlan:
    labels = {"kai.scheduler/queue": "test-queue"}
    if job_name is not None:
        labels["jobset.sigs.k8s.io/replicatedjob-name"] = job_name
    if index is not None:
        labels["jobset.sigs.k8s.io/job-index"] = index
    job = obj("batch/v1", "Job", f"js-{job_name}-{index}", f"uid-{job_name}-{index}", owner=js)
    return plan_pod_group(pod(name, f"uid-{name}", owner=job, labels=labels), [job, js])


def sub_group(plan: PodGroupPlan, name: str) -> SubGroupPlan:
    return next(group for group in plan.sub_groups if group.name == name)


def test_single_replicated_job_single_replica() -> None:
    plan = plan_of(jobset(replicated_job("worker", 1, 4)), "worker", "0")
    assert (plan.name, plan.min_sub_group) == ("pg-js-uid", 1)
    assert len(plan.sub_groups) == 2
    parent = sub_group(plan, "worker")
    assert (parent.min_sub_group, parent.parent) == (1, None)
    leaf = sub_group(plan, "worker-replica-0")
    assert (leaf.parent, leaf.min_member) == ("worker", 4)
    assert plan.pod_subgroup == "worker-replica-0"


def test_single_replicated_job_multiple_replicas() -> None:
    plan = plan_of(jobset(replicated_job("worker", 3, 4)), "worker", "2")
    assert len(plan.sub_groups) == 1 + 3
    assert sub_group(plan, "worker").min_sub_group == 3
    for index in range(3):
        leaf = sub_group(plan, f"worker-replica-{index}")
        assert (leaf.min_member, leaf.parent) == (4, "worker")
    assert plan.pod_subgroup == "worker-replica-2"


def test_multiple_replicated_jobs_any_order() -> None:
    js = jobset(replicated_job("leader", 1, 1), replicated_job("worker", 2, 4), order="AnyOrder")
    assert plan_of(js, "worker", "0").min_sub_group == 2


def test_startup_policy_in_order_root_min_sub_group() -> None:
    js = jobset(replicated_job("leader", 1, 1), replicated_job("worker", 2, 4), order="InOrder")
    assert plan_of(js, "leader", "0").min_sub_group == 1


@pytest.mark.parametrize(
    ("jobs", "order", "value", "want"),
    [
        pytest.param(("a", "b", "c"), "AnyOrder", "2", 2, id="TestJobSetAnnotationOverridesRoot"),
        pytest.param(("a", "b"), None, "9", 2, id="TestJobSetAnnotationClampedToReplicatedJobCount"),
        pytest.param(("a", "b"), "InOrder", "2", 2, id="TestJobSetAnnotationWinsOverInOrder"),
    ],
)
def test_jobset_annotation_sets_the_root_min_sub_group(
    jobs: tuple[str, ...], order: str | None, value: str, want: int
) -> None:
    js = jobset(*(replicated_job(name, 1, 1) for name in jobs), order=order, annotations={MIN_MEMBER: value})
    assert plan_of(js, "a", "0").min_sub_group == want


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("not-an-int", id="TestJobSetAnnotationUnparseable"),
        pytest.param("0", id="TestJobSetAnnotationBelowOne"),
    ],
)
def test_jobset_annotation_that_is_no_count_is_refused(value: str) -> None:
    js = jobset(replicated_job("a", 1, 1), annotations={MIN_MEMBER: value})
    with pytest.raises(GroupingError, match=MIN_MEMBER):
        plan_of(js, "a", "0")


def test_template_annotation_overrides_leaf_min_member() -> None:
    plan = plan_of(jobset(replicated_job("worker", 2, 8, "5")), "worker", "0")
    assert sub_group(plan, "worker-replica-0").min_member == 5


def test_template_annotation_greater_than_parallelism_accepted() -> None:
    plan = plan_of(jobset(replicated_job("worker", 1, 2, "10")), "worker", "0")
    assert sub_group(plan, "worker-replica-0").min_member == 10


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("abc", id="TestTemplateAnnotationUnparseable"),
        pytest.param("0", id="TestTemplateAnnotationBelowOne"),
    ],
)
def test_template_annotation_that_is_no_count_is_refused(value: str) -> None:
    with pytest.raises(GroupingError, match=MIN_MEMBER):
        plan_of(jobset(replicated_job("worker", 1, 2, value)), "worker", "0")


@pytest.mark.parametrize(
    ("job_name", "index", "missing"),
    [
        pytest.param(None, "0", "replicatedjob-name", id="TestPodMissingReplicatedJobLabel"),
        pytest.param("worker", None, "job-index", id="TestPodMissingJobIndexLabel"),
    ],
)
def test_pod_missing_a_jobset_label_is_refused(job_name: str | None, index: str | None, missing: str) -> None:
    with pytest.raises(GroupingError, match=missing):
        plan_of(jobset(replicated_job("worker", 1, 2)), job_name, index)


def test_pod_routing_finds_correct_leaf() -> None:
    js = jobset(replicated_job("leader", 1, 1), replicated_job("worker", 3, 4))
    assert plan_of(js, "leader", "0", "leader-pod").pod_subgroup == "leader-replica-0"
    assert plan_of(js, "worker", "1", "worker-pod").pod_subgroup == "worker-replica-1"


def test_empty_replicated_jobs() -> None:
    with pytest.raises(GroupingError, match="has no replicated jobs"):
        plan_of(jobset(), "worker", "0")


def test_root_min_sub_group_not_min_available() -> None:
    manifest = pod_group_manifest(plan_of(jobset(replicated_job("worker", 1, 1)), "worker", "0"))
    assert manifest["spec"]["minSubGroup"] == 1
    assert "minMember" not in manifest["spec"]
    assert manifest["spec"]["subGroups"] == [
        {"name": "worker", "minSubGroup": 1},
        {"name": "worker-replica-0", "minMember": 1, "parent": "worker"},
    ]


def test_distinct_topologies_at_jobset_and_replicated_job_levels() -> None:
    worker = replicated_job("worker", 2, 4)
    worker["template"]["metadata"] = {
        "annotations": {
            "kai.scheduler/topology": "leaf-topology",
            "kai.scheduler/topology-required-placement": "rack",
            "kai.scheduler/topology-preferred-placement": "zone",
        }
    }
    root = {
        "kai.scheduler/topology": "root-topology",
        "kai.scheduler/topology-required-placement": "datacenter",
    }
    plan = plan_of(jobset(worker, annotations=root), "worker", "0")
    assert plan.topology_constraint is not None
    assert plan.topology_constraint.to_manifest() == {
        "topology": "root-topology",
        "requiredTopologyLevel": "datacenter",
    }
    assert sub_group(plan, "worker").topology_constraint is None
    for index in range(2):
        constraint = sub_group(plan, f"worker-replica-{index}").topology_constraint
        assert constraint is not None
        assert constraint.to_manifest() == {
            "topology": "leaf-topology",
            "requiredTopologyLevel": "rack",
            "preferredTopologyLevel": "zone",
        }


def test_replicas_defaults_to_one() -> None:
    plan = plan_of(jobset(replicated_job("worker", None, 2)), "worker", "0")
    assert sub_group(plan, "worker").min_sub_group == 1
