"""DRA GPU counts that would overflow KAI's int64 (#1874, KAI v0.17.0): Python's integers do not wrap, so
an absurd claim only makes its own pod unschedulable; these are KAI's cases, ported by name."""

from __future__ import annotations

from helpers import (
    device_class_manifest,
    groups_by_name,
    node,
    objects_of,
    pod_manifest,
    queue,
    resource_claim_manifest,
    resource_slice_manifest,
    simulate,
)
from kai_scheduler.api.objects import ResourceClaim
from kai_scheduler.model.dra import claim_gpus

INT64_MAX = 2**63 - 1


def test_get_dra_gpus_count_saturates_on_overflow() -> None:
    """KAI pkg/scheduler/api/resource_info/gpu_dra_overflow_test.go TestGetDraGpusCount_saturatesOnOverflow
    and TestGpuResourceRequirementAdd_draGpuCountsSaturate: counts at the int64 ceiling, added, stay
    non-negative (here: exact)."""
    huge = ResourceClaim.model_validate(resource_claim_manifest("c", INT64_MAX))
    assert claim_gpus(huge.spec) == INT64_MAX
    assert claim_gpus(huge.spec) + claim_gpus(huge.spec) == 2 * INT64_MAX > 0


def test_overflowing_dra_request_does_not_block_reclaim_for_a_valid_request_in_the_same_queue() -> None:
    """KAI pkg/scheduler/actions/integration_tests/reclaim/reclaim_dra_overflow_test.go
    TestDRAOverflowDoesNotBlockReclaimInSameQueue."""
    objects = [
        node("node0", gpus=0),
        queue("reclaiming-queue", gpu=2),
        queue("victim-queue", gpu=0),
        *objects_of(
            device_class_manifest(),
            resource_slice_manifest("node0-gpu", "node0", 2),
            resource_claim_manifest("valid-claim", 2, queue="reclaiming-queue"),
            resource_claim_manifest("overflow-claim-0", INT64_MAX, queue="reclaiming-queue"),
            resource_claim_manifest("overflow-claim-1", INT64_MAX, queue="reclaiming-queue"),
            resource_claim_manifest(
                "victim-claim",
                2,
                queue="victim-queue",
                allocated=["gpu-0", "gpu-1"],
                node="node0",
                reserved_for=["victim-job-0"],
            ),
            pod_manifest("valid-job-0", "reclaiming-queue", claims={"gpu": "valid-claim"}),
            pod_manifest(
                "overflow-job-0",
                "reclaiming-queue",
                claims={"gpu-0": "overflow-claim-0", "gpu-1": "overflow-claim-1"},
            ),
            pod_manifest(
                "victim-job-0",
                "victim-queue",
                node_name="node0",
                phase="Running",
                claims={"gpu": "victim-claim"},
            ),
        ),
    ]
    document = simulate(objects, cycles=3)
    pods = {p["name"]: p for p in document["pods"]}
    assert pods["valid-job-0"]["phase"] == "Running" and pods["valid-job-0"]["node"] == "node0"
    assert pods["overflow-job-0"]["phase"] == "Pending"
    assert pods["victim-job-0"]["phase"] != "Running"
    assert groups_by_name(document)["pg-overflow-job-0"]["unschedulableReason"]
