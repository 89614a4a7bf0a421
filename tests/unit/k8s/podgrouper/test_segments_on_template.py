"""Segment annotations where KAI v0.17's docs put them: on the Worker pod template of a PyTorchJob (and the
worker template of a LeaderWorkerSet), read on the pod first, then the template; the topology name also on
the top owner (and a LeaderWorkerSet's segment size on it, before the template).

Ported by name from KAI v0.17.0 (f218c69b)
`pkg/podgrouper/podgrouper/plugins/kubeflow/pytorch/pytorch_grouper_test.go` and
`pkg/podgrouper/podgrouper/plugins/leaderworkerset/lws_grouper_test.go`. KAI names a PyTorchJob's
segments `worker-<i>`, ours are `worker-segment-<i>`; the names are the grouper's own, nothing reads them.
"""

from __future__ import annotations

from typing import Any

import pytest
from pg_objects import kubeflow_pod, lws, lws_pods, pytorchjob

from kai_scheduler.controlplane.podgrouper import (
    SubGroupPlan,
    TopologyConstraintPlan,
    plan_pod_group,
    pod_group_manifest,
)

SIZE = "kai.scheduler/segment-size"
TOPOLOGY = "kai.scheduler/topology"
REQUIRED = "kai.scheduler/segment-topology-required-placement"
PREFERRED = "kai.scheduler/segment-topology-preferred-placement"


def job_with_worker_template(template: dict[str, str], root: dict[str, str] | None = None) -> dict[str, Any]:
    """KAI's getPytorchJobWithSegmentTopology: 1 master, 4 workers, `template` the Worker template's
    annotations, `root` the PyTorchJob's."""
    job = pytorchjob(workers=4, annotations=root)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] = dict(template)
    return job


def segments_of(plan: Any) -> dict[str, SubGroupPlan]:
    return {g.name: g for g in plan.sub_groups if g.parent == "worker"}


def test_segment_size_from_pod_template() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_SegmentSizeFromPodTemplate (a worker pod without annotations).
    job = job_with_worker_template({SIZE: "2"})
    plan = plan_pod_group(kubeflow_pod(job, "worker", 1), [job])
    assert sorted(segments_of(plan)) == ["worker-segment-0", "worker-segment-1"]
    assert plan.pod_subgroup == "worker-segment-0"


def test_the_master_pod_sees_the_same_segments() -> None:
    # Every pod of the job plans the same PodGroup: the master reads the Worker template too.
    job = job_with_worker_template({SIZE: "2"})
    master = plan_pod_group(kubeflow_pod(job, "master", 0), [job])
    worker = plan_pod_group(kubeflow_pod(job, "worker", 3), [job])
    assert master.sub_groups == worker.sub_groups
    assert (master.pod_subgroup, worker.pod_subgroup) == ("master", "worker-segment-1")


def test_topology_from_template() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_TopologyFromTemplate.
    job = job_with_worker_template({SIZE: "2", TOPOLOGY: "cluster-topology", REQUIRED: "rack"})
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    for segment in segments_of(plan).values():
        assert segment.topology_constraint == TopologyConstraintPlan("cluster-topology", "rack", None)


def test_topology_from_root_annotation() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_TopologyFromRootAnnotation: segment keys on the template, the
    # topology's name on the PyTorchJob (the doc's multi-level example).
    job = job_with_worker_template({SIZE: "2", REQUIRED: "rack"}, {TOPOLOGY: "cluster-topology"})
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    assert segments_of(plan)["worker-segment-0"].topology_constraint == TopologyConstraintPlan(
        "cluster-topology", "rack", None
    )


def test_only_preferred_placement_on_the_template() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_OnlyPreferredPlacement.
    job = job_with_worker_template({SIZE: "2", TOPOLOGY: "cluster-topology", PREFERRED: "node"})
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    assert segments_of(plan)["worker-segment-0"].topology_constraint == TopologyConstraintPlan(
        "cluster-topology", None, "node"
    )


def test_only_required_placement() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_OnlyRequiredPlacement.
    job = job_with_worker_template({SIZE: "2", TOPOLOGY: "cluster-topology", REQUIRED: "rack"})
    plan = plan_pod_group(kubeflow_pod(job, "worker", 0), [job])
    assert segments_of(plan)["worker-segment-0"].topology_constraint == TopologyConstraintPlan(
        "cluster-topology", "rack", None
    )


def test_zero_workers_falls_back_to_leaf() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_ZeroWorkersFallsBackToLeaf: no workers, minAvailable 1, a
    # segment size: no segments, and `worker` stays a leaf (a minMember, no minSubGroup).
    job = job_with_worker_template({SIZE: "2"})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 0
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 1}}
    master = kubeflow_pod(job, "master", 0)
    master["metadata"]["annotations"] = {SIZE: "2"}
    manifest = pod_group_manifest(plan_pod_group(master, [job]))
    worker = next(g for g in manifest["spec"]["subGroups"] if g["name"] == "worker")
    assert "minSubGroup" not in worker
    assert segments_of(plan_pod_group(master, [job])) == {}


def test_pod_annotations_come_before_the_template() -> None:
    # KAI: getSegmentSize and getWorkerAnnotationValue read the pod before the template
    # (TestGetPodGroupMetadata_Segments_WithTopologyConstraints gives them on the pod).
    job = job_with_worker_template({SIZE: "4", TOPOLOGY: "cluster-topology", REQUIRED: "zone"})
    worker = kubeflow_pod(job, "worker", 2)
    worker["metadata"]["annotations"] = {SIZE: "2", REQUIRED: "rack", PREFERRED: "node"}
    plan = plan_pod_group(worker, [job])
    assert sorted(segments_of(plan)) == ["worker-segment-0", "worker-segment-1"]
    assert plan.pod_subgroup == "worker-segment-1"
    assert segments_of(plan)["worker-segment-1"].topology_constraint == TopologyConstraintPlan(
        "cluster-topology", "rack", "node"
    )


@pytest.mark.parametrize(
    ("workers", "min_replicas", "needs"),
    [
        # KAI: TestGetPodGroupMetadata_Segments_ElasticMinReplicas: 1 master + 8 workers, minReplicas 5,
        # segments of 2: the 4 workers of the minimum fill two mandatory segments, two are optional.
        (8, 5, [2, 2, 0, 0]),
        # A minimum that ends inside a segment takes the whole segment (KAI's mandatorySegments rounds up).
        (8, 4, [2, 2, 0, 0]),
        # KAI: TestGetPodGroupMetadata_Segments_5Workers_2PerSegment: the last segment is the partial one.
        (5, None, [2, 2, 1]),
        # KAI: TestGetPodGroupMetadata_Segments_HappyFlow_4Workers_2PerSegment.
        (4, None, [2, 2]),
    ],
)
def test_segments_min_available(workers: int, min_replicas: int | None, needs: list[int]) -> None:
    ptj = job_with_worker_template({SIZE: "2"})
    ptj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    if min_replicas is not None:
        ptj["spec"]["elasticPolicy"] = {"minReplicas": min_replicas}
    plan = plan_pod_group(kubeflow_pod(ptj, "worker", 0), [ptj])
    assert [g.min_member for g in segments_of(plan).values()] == needs
    assert plan.min_member == (min_replicas or workers + 1)


def lws_with_policy(size: int, sub_group_size: int, policy: str | None = None) -> dict[str, Any]:
    """KAI's lwsOwner: a LeaderWorkerSet with spec.leaderWorkerTemplate.subGroupPolicy."""
    ws = lws(size=size)
    sub_group_policy: dict[str, Any] = {"subGroupSize": sub_group_size}
    if policy is not None:
        sub_group_policy["subGroupPolicyType"] = policy
    ws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = sub_group_policy
    return ws


def on_worker_template(ws: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """The LeaderWorkerSet with `annotations` on its worker template (keys by their short names)."""
    keys = {"size": SIZE, "topology": TOPOLOGY, "required": REQUIRED, "preferred": PREFERRED}
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        keys[k]: v for k, v in annotations.items()
    }
    return ws


def lws_groups(plan: Any) -> dict[str, tuple[int, str | None, int | None]]:
    return {g.name: (g.min_member, g.parent, g.min_sub_group) for g in plan.sub_groups}


# KAI: TestBuildSubGroups_Segmentation_Divisible_{LeaderPod,WorkerInFirstSegment,WorkerInLaterSegment}:
# size 5, segments of 2; 4 workers divide evenly, so segment-0 = {leader, w1, w2}, segment-1 = {w3, w4}.
DIVISIBLE = {
    "segment-0": (0, None, 2),
    "leader": (1, "segment-0", None),
    "workers": (2, "segment-0", None),
    "segment-1": (2, None, None),
}


@pytest.mark.parametrize(("worker", "subgroup"), [(0, "leader"), (1, "workers"), (3, "segment-1")])
def test_leaderworker_divisible(worker: int, subgroup: str) -> None:
    p, owners = lws_pods(lws_with_policy(5, 2), 0, worker)
    plan = plan_pod_group(p, owners)
    assert lws_groups(plan) == DIVISIBLE
    assert plan.pod_subgroup == subgroup


def test_leaderworker_not_divisible_leader_pod() -> None:
    # KAI: TestBuildSubGroups_Segmentation_NotDivisible_LeaderPod: size 4, segments of 2; 3 workers do not
    # divide, so the leader is the first pod of segment-0 = {leader, w1}, segment-1 = {w2, w3}.
    p, owners = lws_pods(lws_with_policy(4, 2), 0, 0)
    plan = plan_pod_group(p, owners)
    assert lws_groups(plan) == {
        "segment-0": (0, None, 2),
        "leader": (1, "segment-0", None),
        "workers": (1, "segment-0", None),
        "segment-1": (2, None, None),
    }
    assert plan.pod_subgroup == "leader"


def test_leaderworker_topology_preferred_only_not_divisible() -> None:
    # KAI: TestBuildSubGroups_Segmentation_TopologyPreferredOnly_LeaderIncluded_NotDivisible: size 5,
    # segments of 3: segment-0 = {leader, w1, w2}, segment-1 = {w3, w4}; the segments carry the placement,
    # the leader and workers under segment-0 do not.
    ws = lws_with_policy(5, 3)
    ws["metadata"]["annotations"] = {TOPOLOGY: "rack"}
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {PREFERRED: "node"}
    p, owners = lws_pods(ws, 0, 1)
    plan = plan_pod_group(p, owners)
    assert lws_groups(plan) == {
        "segment-0": (0, None, 2),
        "leader": (1, "segment-0", None),
        "workers": (2, "segment-0", None),
        "segment-1": (2, None, None),
    }
    tc = TopologyConstraintPlan("rack", None, "node")
    by_name = {g.name: g.topology_constraint for g in plan.sub_groups}
    assert by_name == {"segment-0": tc, "leader": None, "workers": None, "segment-1": tc}
    assert plan.pod_subgroup == "workers"


@pytest.mark.parametrize(("worker", "subgroup"), [(1, "segment-0"), (3, "segment-1")])
def test_leader_excluded(worker: int, subgroup: str) -> None:
    # KAI: TestBuildSubGroups_Segmentation_LeaderExcluded_{WorkerInFirstSegment,WorkerInLaterSegment}: the
    # leader in a sub-group of its own, beside the segments of workers (w1, w2) and (w3, w4).
    p, owners = lws_pods(lws_with_policy(5, 2, "LeaderExcluded"), 0, worker)
    plan = plan_pod_group(p, owners)
    assert [(g.name, g.min_member, g.parent) for g in plan.sub_groups] == [
        ("leader", 1, None),
        ("segment-0", 2, None),
        ("segment-1", 2, None),
    ]
    assert plan.pod_subgroup == subgroup


def test_topology_both_placement_keys_leader_excluded() -> None:
    # KAI: TestBuildSubGroups_Segmentation_TopologyBothPlacementKeys_LeaderExcluded: the segments carry the
    # whole constraint, the leader none.
    ws = on_worker_template(
        lws_with_policy(5, 2, "LeaderExcluded"), topology="rack", required="rack-unit", preferred="node"
    )
    p, owners = lws_pods(ws, 0, 1)
    plan = plan_pod_group(p, owners)
    tc = TopologyConstraintPlan("rack", "rack-unit", "node")
    assert {g.name: g.topology_constraint for g in plan.sub_groups} == {
        "leader": None,
        "segment-0": tc,
        "segment-1": tc,
    }
    assert plan.pod_subgroup == "segment-0"


def test_leaderworkerset_segment_size_from_worker_template_annotation() -> None:
    # KAI: TestBuildSubGroups_SegmentSizeFromWorkerTemplateAnnotation (size and placements on the worker
    # template, the topology on the LeaderWorkerSet).
    ws = on_worker_template(
        lws(size=5, annotations={TOPOLOGY: "rack"}), size="2", required="rack-unit", preferred="node"
    )
    p, owners = lws_pods(ws, 0, 1)
    plan = plan_pod_group(p, owners)
    assert lws_groups(plan) == DIVISIBLE
    tc = TopologyConstraintPlan("rack", "rack-unit", "node")
    assert [g.name for g in plan.sub_groups if g.topology_constraint == tc] == ["segment-0", "segment-1"]
    assert plan.pod_subgroup == "workers"


def test_leaderworkerset_sub_group_size_comes_first() -> None:
    # KAI's getSegmentSize (lws_grouper.go): spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize, then the
    # annotations; with it, the worker template's placement needs no segment-size annotation.
    ws = lws_with_policy(5, 2)
    ws["metadata"]["annotations"] = {SIZE: "4"}
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        TOPOLOGY: "rack-topo",
        REQUIRED: "rack",
    }
    p, owners = lws_pods(ws, 0, 3)
    plan = plan_pod_group(p, owners)
    assert lws_groups(plan) == DIVISIBLE
    assert plan.pod_subgroup == "segment-1"
