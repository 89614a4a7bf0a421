"""Segment input KAI v0.17's pod grouper passes over, and segment input it refuses.

KAI's PyTorchJob and LeaderWorkerSet groupers (v0.17.0, `pytorch_grouper.go`, `lws_grouper.go`) make the
segments without a constraint when no `kai.scheduler/topology` names the topology of a segment placement
(`getSegmentTopologyConstraints` returns nil), and make no segments when there is no segment size: neither
stops the grouping, and KAI says nothing. Here the PodGroup is the same, and the plan lists what it was
made without (`PodGroupPlan.dropped`), one line naming the object and the key, for the edges to say.
A segment size that is no integer, a negative replica index, more than 10,000 segments
(`maxAllowedSegmentation`), and for a LeaderWorkerSet a segment size below 2 or above the group, or
LeaderExcluded with workers that do not divide evenly, are errors in KAI and stay errors here.

Ported by name from KAI v0.17.0 `pkg/podgrouper/podgrouper/plugins/kubeflow/pytorch/pytorch_grouper_test.go`
and `pkg/podgrouper/podgrouper/plugins/leaderworkerset/lws_grouper_test.go`; our PyTorchJob segments are
named `worker-segment-<i>` where KAI's are `worker-<i>` (test_segments_on_template.py says why).
"""

from __future__ import annotations

from typing import Any

import pytest
from pg_objects import kubeflow_pod, lws, lws_pods, pytorchjob

from kai_scheduler.controlplane.podgrouper import DroppedInput, GroupingError, plan_pod_group

SIZE = "kai.scheduler/segment-size"
TOPOLOGY = "kai.scheduler/topology"
REQUIRED = "kai.scheduler/segment-topology-required-placement"
PREFERRED = "kai.scheduler/segment-topology-preferred-placement"
WORKER_ANNOTATIONS = 'spec.pytorchReplicaSpecs.Worker.template.metadata.annotations["{}"]'
LWS_WORKER_ANNOTATIONS = 'spec.leaderWorkerTemplate.workerTemplate.metadata.annotations["{}"]'


def job(template: dict[str, str], workers: int = 4) -> dict[str, Any]:
    """KAI's getPytorchJobWithSegmentTopology: one master, `workers` workers, `template` the annotations
    of the Worker template (where KAI's docs put the segment keys)."""
    ptj = pytorchjob(workers=workers)
    ptj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] = dict(template)
    return ptj


def worker(ptj: dict[str, Any], index: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A worker pod as the training operator makes it: the template's annotations copied, `annotations`
    over them."""
    p = kubeflow_pod(ptj, "worker", index)
    template = ptj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["metadata"].get("annotations", {})
    p["metadata"]["annotations"] = {**template, **(annotations or {})}
    return p


def segments(plan: Any) -> dict[str, Any]:
    return {g.name: g.topology_constraint for g in plan.sub_groups if g.parent == "worker"}


# --- PyTorchJob ------------------------------------------------------------------------------------


def test_segments_no_topology_when_missing() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_NoTopologyWhenMissing: segment size 2 and a required placement
    # on the template and the pod, no topology name anywhere: four sub-groups (master, worker and its two
    # segments), the segments without a constraint, no error.
    ptj = job({SIZE: "2", REQUIRED: "rack"})
    plan = plan_pod_group(worker(ptj), [ptj])
    assert len(plan.sub_groups) == 4
    assert segments(plan) == {"worker-segment-0": None, "worker-segment-1": None}
    assert plan.pod_subgroup == "worker-segment-0"
    # The pod's annotation is the template's: the line names the template, where the user wrote it.
    (dropped,) = plan.dropped
    assert dropped.object_ref == "PyTorchJob team-a/mnist"
    assert dropped.field == WORKER_ANNOTATIONS.format(REQUIRED)
    assert f"no {TOPOLOGY} names the topology" in dropped.message
    assert "\n" not in str(dropped)


def test_both_placements_without_topology_are_each_named() -> None:
    ptj = job({SIZE: "2", REQUIRED: "rack", PREFERRED: "node"})
    plan = plan_pod_group(worker(ptj), [ptj])
    assert segments(plan) == {"worker-segment-0": None, "worker-segment-1": None}
    assert [d.field for d in plan.dropped] == [WORKER_ANNOTATIONS.format(k) for k in (REQUIRED, PREFERRED)]


def test_placement_without_segment_size_makes_no_segments() -> None:
    # KAI's buildWorkerSubGroups: no segment size (getSegmentSize found nothing) is one worker sub-group;
    # the placement is never read.
    ptj = job({TOPOLOGY: "cluster-topology", REQUIRED: "rack"})
    plan = plan_pod_group(worker(ptj), [ptj])
    assert [(g.name, g.min_member) for g in plan.sub_groups] == [("master", 1), ("worker", 4)]
    assert plan.pod_subgroup == "worker"
    assert plan.dropped == (
        DroppedInput(
            "PyTorchJob team-a/mnist",
            WORKER_ANNOTATIONS.format(REQUIRED),
            f"dropped: a segment placement without {SIZE} makes no segments (KAI's pod grouper passes "
            "over it)",
        ),
    )


def test_a_placement_only_on_the_pod_is_named_on_the_pod() -> None:
    ptj = job({SIZE: "2"})
    plan = plan_pod_group(worker(ptj, 1, {PREFERRED: "node"}), [ptj])
    assert [(d.object_ref, d.field) for d in plan.dropped] == [
        ("Pod team-a/mnist-worker-1", f'metadata.annotations["{PREFERRED}"]')
    ]


def test_segments_with_their_topology_drop_nothing() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_TopologyFromTemplate.
    ptj = job({SIZE: "2", TOPOLOGY: "cluster-topology", REQUIRED: "rack"})
    plan = plan_pod_group(worker(ptj), [ptj])
    assert all(tc is not None for tc in segments(plan).values())
    assert plan.dropped == ()


@pytest.mark.parametrize(
    ("name", "template", "pod_annotations", "message"),
    [
        # KAI: TestGetPodGroupMetadata_Segments_MalformedAnnotation ("invalid segment size", on the pod).
        (
            "MalformedAnnotation",
            {SIZE: "invalid"},
            {SIZE: "not-a-number"},
            f'Pod team-a/mnist-worker-0: metadata.annotations["{SIZE}"]: expected an integer, '
            "got 'not-a-number'",
        ),
        # KAI: TestGetPodGroupMetadata_Segments_MalformedAnnotationInTemplate (on the template only).
        (
            "MalformedAnnotationInTemplate",
            {SIZE: "invalid-size"},
            None,
            f"PyTorchJob team-a/mnist: {WORKER_ANNOTATIONS.format(SIZE)}: "
            "expected an integer, got 'invalid-size'",
        ),
    ],
)
def test_segments_malformed(
    name: str, template: dict[str, str], pod_annotations: dict[str, str] | None, message: str
) -> None:
    ptj = job(template)
    p = kubeflow_pod(ptj, "worker", 0)
    p["metadata"]["annotations"] = pod_annotations or {}
    with pytest.raises(GroupingError) as err:
        plan_pod_group(p, [ptj])
    assert str(err.value) == message, name


def test_segments_negative_replica_index() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_NegativeReplicaIndex ("is not valid. It must be bigger than 0").
    ptj = job({SIZE: "2"})
    p = worker(ptj)
    p["metadata"]["labels"]["training.kubeflow.org/replica-index"] = "-1"
    with pytest.raises(GroupingError, match=r"replica-index\"\]: must be at least 0, got -1"):
        plan_pod_group(p, [ptj])


def test_segments_exceeds_max_allowed_segmentation() -> None:
    # KAI: TestGetPodGroupMetadata_Segments_ExceedsMaxAllowedSegmentation: 10,001 workers in segments of one.
    ptj = job({SIZE: "1"}, workers=10_001)
    with pytest.raises(GroupingError) as err:
        plan_pod_group(worker(ptj), [ptj])
    assert str(err.value) == (
        f"PyTorchJob team-a/mnist: {WORKER_ANNOTATIONS.format(SIZE)}: number of subgroups created for the "
        "segmentation 10001 is greater than max allowed segmentation 10000"
    )


def test_ten_thousand_segments_are_allowed() -> None:
    # KAI's check is `numSegments > maxAllowedSegmentation`: the cap itself is made.
    ptj = job({SIZE: "1"}, workers=10_000)
    assert len(segments(plan_pod_group(worker(ptj), [ptj]))) == 10_000


# --- LeaderWorkerSet -------------------------------------------------------------------------------


def lws_with(size: int, template: dict[str, str], policy: dict[str, Any] | None = None) -> dict[str, Any]:
    ws = lws(size=size)
    ws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = dict(template)
    if policy is not None:
        ws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = policy
    return ws


def test_lws_placement_without_topology_makes_segments_without_one() -> None:
    # KAI's getSegmentTopologyConstraints (lws_grouper.go): no topology name, no constraint, no error.
    ws = lws_with(5, {SIZE: "2", REQUIRED: "rack"})
    p, owners = lws_pods(ws, 0, 3)
    plan = plan_pod_group(p, owners)
    assert [g.name for g in plan.sub_groups] == ["segment-0", "leader", "workers", "segment-1"]
    assert all(g.topology_constraint is None for g in plan.sub_groups)
    assert plan.pod_subgroup == "segment-1"
    assert [(d.object_ref, d.field) for d in plan.dropped] == [
        ("LeaderWorkerSet team-a/vllm", LWS_WORKER_ANNOTATIONS.format(REQUIRED))
    ]


def test_lws_placement_without_segment_size_makes_no_segments() -> None:
    ws = lws_with(5, {TOPOLOGY: "cluster-topology", PREFERRED: "node"})
    p, owners = lws_pods(ws, 0, 3)
    plan = plan_pod_group(p, owners)
    assert [(g.name, g.min_member) for g in plan.sub_groups] == [("leader", 1), ("workers", 4)]
    assert [d.field for d in plan.dropped] == [LWS_WORKER_ANNOTATIONS.format(PREFERRED)]
    assert "makes no segments" in plan.dropped[0].message


def test_lws_segmentation_exceeds_max_allowed_segmentation() -> None:
    # KAI: TestBuildSubGroups_Segmentation_ExceedsMaxAllowedSegmentation: size 2 * 10,000 + 3 in segments
    # of 2 (the leader in the first).
    ws = lws_with(20_003, {}, {"subGroupSize": 2})
    p, owners = lws_pods(ws, 0, 0)
    with pytest.raises(GroupingError, match="greater than max allowed segmentation 10000"):
        plan_pod_group(p, owners)


def test_lws_leader_excluded_exceeds_max_allowed_segmentation() -> None:
    ws = lws_with(20_003, {}, {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"})
    p, owners = lws_pods(ws, 0, 1)
    with pytest.raises(GroupingError, match="segmentation 10001 is greater than max allowed segmentation"):
        plan_pod_group(p, owners)


@pytest.mark.parametrize(
    ("segment_size", "message"),
    [
        (1, "segmentSize 1 is not valid. It must be greater than 1"),
        (0, "segmentSize 0 is not valid. It must be greater than 1"),
        (6, "segmentSize 6 is greater than replicasSize 5"),
    ],
)
def test_lws_segment_size_refused_as_kai_refuses_it(segment_size: int, message: str) -> None:
    # KAI's getSegmentSize (lws_grouper.go).
    p, owners = lws_pods(lws_with(5, {}, {"subGroupSize": segment_size}), 0, 1)
    with pytest.raises(GroupingError) as err:
        plan_pod_group(p, owners)
    assert str(err.value) == (
        f"LeaderWorkerSet team-a/vllm: spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize: {message}"
    )


def test_lws_segment_size_annotation_of_one_is_refused() -> None:
    p, owners = lws_pods(lws_with(5, {SIZE: "1"}), 0, 1)
    with pytest.raises(GroupingError, match=r"segment-size\"\]: segmentSize 1 is not valid"):
        plan_pod_group(p, owners)


def test_lws_leader_excluded_refuses_workers_that_do_not_divide() -> None:
    # KAI's addExcludedLeaderSegments: size 6 (5 workers) in segments of 2.
    p, owners = lws_pods(lws_with(6, {}, {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}), 0, 1)
    with pytest.raises(GroupingError) as err:
        plan_pod_group(p, owners)
    assert str(err.value) == (
        "LeaderWorkerSet team-a/vllm: spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType: "
        "replicasSize 6 is not divisible by segmentSize 2 (its 5 workers are not). LeaderExcluded policy is "
        "only supported when replicasSize is divisible by segmentSize."
    )


# --- segment keys where KAI does not read them -------------------------------------------------------


def test_segment_keys_on_the_pytorchjob_itself_are_not_read() -> None:
    # KAI's getSegmentSize and getWorkerAnnotationValue read the pod and the Worker template only; the
    # topology name (getTopology) is also read on the PyTorchJob.
    ptj = pytorchjob(annotations={SIZE: "2", REQUIRED: "rack", TOPOLOGY: "cluster-topology"})
    plan = plan_pod_group(worker(ptj), [ptj])
    assert [g.name for g in plan.sub_groups] == ["master", "worker"]
    assert [(d.object_ref, d.field) for d in plan.dropped] == [
        ("PyTorchJob team-a/mnist", f'metadata.annotations["{SIZE}"]'),
        ("PyTorchJob team-a/mnist", f'metadata.annotations["{REQUIRED}"]'),
    ]
    assert "only on the Worker pod template or the pod" in plan.dropped[0].message


def test_lws_placement_on_the_leaderworkerset_itself_is_not_read() -> None:
    # KAI's LeaderWorkerSet grouper reads the size (and the topology name) on the LeaderWorkerSet, the
    # placements on the pod and the worker template only.
    ws = lws(size=5, annotations={SIZE: "2", TOPOLOGY: "cluster-topology", PREFERRED: "node"})
    p, owners = lws_pods(ws, 0, 1)
    plan = plan_pod_group(p, owners)
    assert [g.name for g in plan.sub_groups] == ["segment-0", "leader", "workers", "segment-1"]
    assert all(g.topology_constraint is None for g in plan.sub_groups)
    assert [d.field for d in plan.dropped] == [f'metadata.annotations["{PREFERRED}"]']


def test_lws_negative_worker_index() -> None:
    # KAI: TestGetPodGroupMetadata_NegativeWorkerIndex (validateWorkerIndex: "is not valid. It must be
    # bigger than 0"), size 3 without segments.
    p, owners = lws_pods(lws(size=3), 0, 1)
    p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = "-1"
    with pytest.raises(GroupingError, match=r"worker-index\"\]: must be at least 0, got -1"):
        plan_pod_group(p, owners)
