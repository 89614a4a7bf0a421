"""Segment annotations where KAI v0.17's docs put them: on the Worker pod template of a PyTorchJob (and the
worker template of a LeaderWorkerSet), read on the pod first, then the template, then the top owner.

Ported by name from KAI v0.17.0 (f218c69b)
`pkg/podgrouper/podgrouper/plugins/kubeflow/pytorch/pytorch_grouper_test.go` and
`pkg/podgrouper/podgrouper/plugins/leaderworkerset/lws_grouper_test.go`; KAI names segments `worker-<i>`
(`segment-<i>` for a LeaderWorkerSet), ours are `worker-segment-<i>` / `workers-segment-<i>` (the names
are the grouper's own, nothing reads them).
"""

from __future__ import annotations

from typing import Any

from pg_objects import kubeflow_pod, lws, lws_pods, pytorchjob

from kai_scheduler.cluster.podgrouper import SubGroupPlan, TopologyConstraintPlan, plan_pod_group

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


def test_leaderworkerset_segment_size_from_worker_template_annotation() -> None:
    # KAI lws_grouper_test.go: TestBuildSubGroups_SegmentSizeFromWorkerTemplateAnnotation (size and
    # placements on the worker template, the topology on the LeaderWorkerSet). KAI also puts the leader in
    # segment 0 (its default LeaderWorker policy), which is not followed here (docs/podgrouper.md).
    ws = lws(size=5, annotations={TOPOLOGY: "rack"})
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        SIZE: "2",
        REQUIRED: "rack-unit",
        PREFERRED: "node",
    }
    p, owners = lws_pods(ws, 0, 1)
    plan = plan_pod_group(p, owners)
    segments = {g.name: g for g in plan.sub_groups if g.parent == "workers"}
    assert sorted(segments) == ["workers-segment-0", "workers-segment-1"]
    tc = TopologyConstraintPlan("rack", "rack-unit", "node")
    assert all(g.topology_constraint == tc for g in segments.values())
    assert plan.pod_subgroup == "workers-segment-0"


def test_leaderworkerset_sub_group_size_comes_first() -> None:
    # KAI's getSegmentSize (lws_grouper.go): spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize, then the
    # annotations; with it, the worker template's placement needs no segment-size annotation.
    ws = lws(size=5, annotations={SIZE: "4"})
    ws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {"subGroupSize": 2}
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
        TOPOLOGY: "rack-topo",
        REQUIRED: "rack",
    }
    p, owners = lws_pods(ws, 0, 2)
    plan = plan_pod_group(p, owners)
    segments = {g.name: g for g in plan.sub_groups if g.parent == "workers"}
    assert sorted(segments) == ["workers-segment-0", "workers-segment-1"]
    assert plan.pod_subgroup == "workers-segment-0"
