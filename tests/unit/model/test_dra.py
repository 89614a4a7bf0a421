"""DRA in the scheduling model (model/dra.py): what a pod's claims count as, which devices each node
reaches, and how one node's devices meet a claim's requests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import (
    GPU_DRIVER,
    claim_spec,
    device_class_manifest,
    node,
    objects_of,
    pod,
    pod_manifest,
    queue,
    resource_claim_manifest,
    resource_slice_manifest,
    snapshot_of,
)
from kai_scheduler.api.objects import DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceSlice
from kai_scheduler.model.dra import ClaimInfo, claim_gpus, node_dra_gpus
from kai_scheduler.model.dra_devices import DeviceCatalog, allocation_result, assign_devices
from kai_scheduler.model.nodes import NodeSpecInfo

H100 = {"productName": {"string": "H100"}}
A100 = {"productName": {"string": "A100"}}


def spec(*requests: dict[str, Any]) -> ResourceClaimSpec:
    return ResourceClaimSpec.model_validate({"devices": {"requests": list(requests)}})


def request(name: str, device_class: str = "nvidia.com/gpu", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **exactly}}


# --- what claims count as (KAI pkg/common/resources/dra_gpu_test.go, countGPUDevicesFromClaim) -------


@pytest.mark.parametrize(
    ("claim", "gpus"),
    [
        # "should count devices with ExactCount mode and explicit count"
        (spec(request("r", allocationMode="ExactCount", count=2)), 2),
        # "should default to 1 when ExactCount mode has no count specified"
        (spec(request("r", allocationMode="ExactCount")), 1),
        # "should count devices with AllocationModeAll" (a conservative 1)
        (spec(request("r", allocationMode="All")), 1),
        # "should sum multiple GPU device requests"
        (spec(request("a", count=2), request("b", count=3)), 5),
        # "should ignore non-GPU device requests"
        (spec(request("a", "other-device-class", count=5), request("b", count=2)), 2),
        # "should return 0 for empty claim"
        (spec(), 0),
        # "should return 0 for claim with no Exactly field"
        (spec({"name": "r", "firstAvailable": [{"name": "s", "deviceClassName": "nvidia.com/gpu"}]}), 0),
    ],
)
def test_a_claims_gpus_as_kai_counts_them(claim: ResourceClaimSpec, gpus: int) -> None:
    assert claim_gpus(claim) == gpus


def _pod_gpus(*manifests: dict[str, Any]) -> int:
    objects = [node("n0", gpus=0), queue("q"), *objects_of(*manifests)]
    snapshot = snapshot_of(objects)
    return snapshot.tasks["default/p"].request.dra_gpus


def _pod(claims: dict[str, str] | None = None, templates: dict[str, str] | None = None) -> dict[str, Any]:
    return pod_manifest("p", claims=claims, claim_templates=templates)


def test_a_pods_dra_gpus_are_its_claims_gpus() -> None:
    """KAI dra_gpu_test.go, ExtractDRAGPUResources: the GPUs of a pod are summed over its claims, GPU
    classes only; a claim made from a template is found through the pod's resourceClaimStatuses; a pod
    without claims, or whose claim is not there (yet), has none."""
    assert _pod_gpus(_pod()) == 0
    assert _pod_gpus(_pod({"gpu": "c1"}), resource_claim_manifest("c1", 2, "nvidia.com/gpu")) == 2
    two = [
        resource_claim_manifest("c1", 2, "nvidia.com/gpu"),
        resource_claim_manifest("c2", 3, "nvidia.com/gpu"),
    ]
    assert _pod_gpus(_pod({"a": "c1", "b": "c2"}), *two) == 5
    mixed = [resource_claim_manifest("c1", 2, "nvidia.com/gpu"), resource_claim_manifest("c2", 10, "nic")]
    assert _pod_gpus(_pod({"a": "c1", "b": "c2"}), *mixed) == 2
    assert _pod_gpus(_pod({"a": "c2"}), mixed[1]) == 0
    every = resource_claim_manifest("c3", device_class="nvidia.com/gpu", all_devices=True)
    assert _pod_gpus(_pod({"a": "c1", "b": "c3"}), mixed[0], every) == 3
    made = _pod(templates={"gpu": "t"})
    made["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}
    assert _pod_gpus(made, resource_claim_manifest("p-gpu", 1, "nvidia.com/gpu")) == 1
    assert _pod_gpus(_pod({"gpu": "missing"})) == 0


def test_dra_gpus_count_toward_the_node_and_the_queue_as_whole_gpus() -> None:
    objects = [
        node("n0", gpus=0),
        queue("q"),
        *objects_of(
            device_class_manifest(),
            resource_slice_manifest("s", "n0", 4),
            resource_claim_manifest("c", 3),
            _pod({"gpu": "c"}),
        ),
    ]
    snapshot = snapshot_of(objects)
    request = snapshot.tasks["default/p"].request
    assert (request.whole_gpus, request.dra_gpus, request.device_plugin_gpus) == (3, 3, False)
    assert request.queue_resources(0.0).gpu == 3.0
    assert snapshot.nodes.cap_gpus.tolist() == [4.0]
    assert request.describe() == "3 GPU as DRA claims, 1 CPU, 1Gi memory"


# --- devices --------------------------------------------------------------------------------------


def test_a_nodes_dra_gpus_are_the_devices_of_its_local_gpu_slices() -> None:
    """KAI cluster_info.go populateDRAGPUs: node-local slices of a driver with "gpu" in its name."""
    slices = [
        ResourceSlice.model_validate(resource_slice_manifest("a", "n0", 2)),
        ResourceSlice.model_validate(
            resource_slice_manifest("b", "n0", 1, driver="gpu.example.com", pool="x")
        ),
        ResourceSlice.model_validate(resource_slice_manifest("c", "n1", 3, driver="nic.example.com")),
        ResourceSlice.model_validate(resource_slice_manifest("d", None, 5, pool="shared")),
    ]
    assert node_dra_gpus(slices) == {"n0": 3}


def _catalog(*slices: dict[str, Any], classes: tuple[dict[str, Any], ...] = ()) -> DeviceCatalog:
    specs = [NodeSpecInfo(name, {"kubernetes.io/hostname": name}, False) for name in ("n0", "n1")]
    published = [ResourceSlice.model_validate(s) for s in slices]
    return DeviceCatalog(
        published,
        [DeviceClass.model_validate(c) for c in (classes or (device_class_manifest(),))],
        specs,
        node_dra_gpus(published),
    )


def _claim(*selectors: str, count: int = 1, all_devices: bool = False) -> ClaimInfo:
    manifest = resource_claim_manifest("c", count, GPU_DRIVER, *selectors, all_devices=all_devices)
    return ClaimInfo.of(ResourceClaim.model_validate(manifest))


def test_nodes_reach_their_own_devices_and_shared_ones_of_the_newest_pool_generation() -> None:
    catalog = _catalog(
        resource_slice_manifest("old", "n0", 3, pool="p0", generation=1),
        resource_slice_manifest("new", "n0", 1, pool="p0", generation=2),
        resource_slice_manifest("n1", "n1", 1),
        resource_slice_manifest("everywhere", None, 1, pool="shared"),
    )
    names = [catalog.ids[d].pool + "/" + catalog.ids[d].name for d in catalog.node_devices[0]]
    assert names == ["p0/gpu-0", "shared/gpu-0"]
    assert [catalog.ids[d].pool for d in catalog.node_devices[1]] == ["n1", "shared"]
    assert catalog.gpu_nodes.tolist() == [True, True]


def test_requests_take_free_matching_devices_in_order() -> None:
    catalog = _catalog(resource_slice_manifest("s", "n0", 3, attributes=H100))
    free = np.ones(catalog.count, dtype=np.bool_)
    claim = _claim(count=2)
    assert assign_devices(catalog, claim.requests, 0, free) == [[0, 1]]
    free[0] = False
    assert assign_devices(catalog, claim.requests, 0, free) == [[1, 2]]
    free[1] = False
    assert assign_devices(catalog, claim.requests, 0, free) is None
    assert assign_devices(catalog, claim.requests, 1, np.ones(catalog.count, dtype=np.bool_)) is None


def test_a_request_gives_up_a_device_another_request_needs() -> None:
    """The first request (any GPU) would take the H100 first; the second needs exactly that one: the
    first takes the A100 instead (an assignment exists, so it is found)."""
    catalog = _catalog(
        resource_slice_manifest(
            "s", "n0", [{"name": "h100", "attributes": H100}, {"name": "a100", "attributes": A100}]
        )
    )
    any_gpu = _claim()
    only_h100 = _claim('device.attributes["gpu.nvidia.com"].productName == "H100"')
    free = np.ones(catalog.count, dtype=np.bool_)
    assert assign_devices(catalog, [*any_gpu.requests, *only_h100.requests], 0, free) == [[1], [0]]


def test_an_all_request_takes_every_matching_device_and_needs_them_all_free() -> None:
    catalog = _catalog(
        resource_slice_manifest(
            "s", "n0", [{"name": "h", "attributes": H100}, {"name": "a", "attributes": A100}]
        )
    )
    every_h100 = _claim('device.attributes["gpu.nvidia.com"].productName == "H100"', all_devices=True)
    free = np.ones(catalog.count, dtype=np.bool_)
    assert assign_devices(catalog, every_h100.requests, 0, free) == [[0]]
    free[0] = False
    assert assign_devices(catalog, every_h100.requests, 0, free) is None
    nothing = _claim('device.attributes["gpu.nvidia.com"].productName == "B200"', all_devices=True)
    assert assign_devices(catalog, nothing.requests, 0, np.ones(catalog.count, dtype=np.bool_)) is None


def test_a_selector_that_fails_to_evaluate_on_a_reachable_device_fails_the_node() -> None:
    catalog = _catalog(
        resource_slice_manifest("s0", "n0", [{"name": "h", "attributes": H100}, {"name": "bare"}]),
        resource_slice_manifest("s1", "n1", [{"name": "h", "attributes": H100}]),
    )
    claim = _claim('device.attributes["gpu.nvidia.com"].productName == "H100"')
    free = np.ones(catalog.count, dtype=np.bool_)
    assert assign_devices(catalog, claim.requests, 0, free) is None
    assert assign_devices(catalog, claim.requests, 1, free) == [[2]]


def test_the_allocation_names_the_devices_the_configs_and_the_nodes_that_reach_them() -> None:
    device_class = device_class_manifest()
    device_class["spec"]["config"] = [{"opaque": {"driver": GPU_DRIVER, "parameters": {"sharing": "none"}}}]
    catalog = _catalog(
        resource_slice_manifest("s", "n0", 2),
        resource_slice_manifest("any", None, 1, pool="shared"),
        classes=(device_class,),
    )
    claim = _claim(count=1)
    local = allocation_result(catalog, claim.requests, claim.config, [[1]], "n0")
    assert [(r.request, r.driver, r.pool, r.device) for r in local.devices.results] == [
        ("gpu", GPU_DRIVER, "n0", "gpu-1")
    ]
    assert [(c.source, c.requests) for c in local.devices.config] == [("FromClass", ["gpu"])]
    assert local.node_selector is not None
    field = local.node_selector.node_selector_terms[0].match_fields[0]
    assert (field.key, field.operator, field.values) == ("metadata.name", "In", ["n0"])
    shared = allocation_result(catalog, claim.requests, claim.config, [[2]], "n0")
    assert shared.node_selector is None


def test_unsupported_claim_features_are_named() -> None:
    claim = ResourceClaim.model_validate(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c"},
            "spec": {
                "devices": {
                    **claim_spec(2),
                    "constraints": [{"requests": ["gpu"], "matchAttribute": "gpu.nvidia.com/numa"}],
                }
            },
        }
    )
    assert ClaimInfo.of(claim).problem == "spec.devices.constraints (matchAttribute) is not supported"


def test_pods_without_claims_leave_the_snapshot_without_dra() -> None:
    assert snapshot_of([node("n0"), queue("q"), pod("p")]).dra is None
