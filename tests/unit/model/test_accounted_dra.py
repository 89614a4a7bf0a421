"""What DRA claims charge an AccountedResource's `dra` source (KAI's AccountedResource design, phase 1):
a shared claim counts once for its queue, a quantity read from the claim's opaque configuration, the
devices' own memory for `gpu-memory` without counting their GPUs' memory again."""

from __future__ import annotations

from typing import Any

import yaml

from helpers import groups_by_name, pods_by_name, simulate
from kai_scheduler.api.manifests import parse_object

_UNLIMITED = (
    "{gpu: {quota: -1, limit: -1, overQuotaWeight: 1}, cpu: {quota: -1, limit: -1, overQuotaWeight: 1}, "
    "memory: {quota: -1, limit: -1, overQuotaWeight: 1}}"
)
CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec: {selectors: [{cel: {expression: device.driver == "gpu.nvidia.com"}}]}
"""


def _node(labels: str = "{}") -> str:
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: node0, labels: {labels}}}
status: {{allocatable: {{cpu: "32", memory: 256Gi, pods: "110"}}}}
"""


def _slice(devices: int) -> str:
    listed = ", ".join(
        f"{{name: gpu-{i}, attributes: {{productName: {{string: GB200}}}}, "
        "capacity: {memory: {value: 192Gi}}}"
        for i in range(devices)
    )
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: node0-gpus}}
spec: {{driver: gpu.nvidia.com, nodeName: node0, pool: {{name: node0}}, devices: [{listed}]}}
"""


def _resource(name: str, source: str) -> str:
    return f"""
apiVersion: scheduling.run.ai/v1alpha1
kind: AccountedResource
metadata: {{name: {name}}}
spec: {{sources: [{source}]}}
"""


def _queue(accounted: str) -> str:
    return f"""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {{name: team-a}}
spec: {{resources: {_UNLIMITED}, accountedResources: {accounted}}}
"""


def _claim(name: str, count: int, extra: str = "") -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}, labels: {{kai.scheduler/queue: team-a}}}}
spec:
  devices: {{requests: [{{name: gpus, exactly: {{deviceClassName: gpu.nvidia.com, count: {count}}}}}]{extra}}}
"""


def _pod(name: str, claim: str, spec: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{kai.scheduler/queue: team-a}}}}
spec: {{schedulerName: kai-scheduler, {spec}
  containers: [{{name: main, resources: {{requests: {{cpu: "1"}}}}}}],
  resourceClaims: [{{name: gpus, resourceClaimName: {claim}}}]}}
"""


def _run(*documents: str, **options: Any) -> dict[str, Any]:
    objects = [parse_object(yaml.safe_load(text), "test", i + 1) for i, text in enumerate(documents)]
    return simulate(objects, **options)


def _used(document: dict[str, Any], name: str) -> float:
    (queue,) = [q for q in document["queues"] if q["name"] == "team-a"]
    return float(queue["accountedResources"][name]["used"])


def test_a_shared_claim_charges_its_queue_once() -> None:
    # held-0 runs with an allocated 1-device claim; join-0 uses the same claim. Limit 1: joining charges
    # nothing (the device is the queue's once), so join-0 runs and the queue still holds 1.
    allocated = _claim("shared", 1).rstrip() + (
        "\nstatus: {allocation: {devices: {results: [{request: gpus, driver: gpu.nvidia.com, pool: node0,"
        " device: gpu-0}]}}, reservedFor: [{resource: pods, name: held-0, uid: held-0}]}\n"
    )
    document = _run(
        _resource("gpu-gb200", "{dra: {deviceClassName: gpu.nvidia.com}}"),
        _node(),
        CLASS,
        _slice(2),
        _queue('[{resourceRef: gpu-gb200, limit: "1"}]'),
        allocated,
        _pod("held-0", "shared", "nodeName: node0, ").replace("spec:", "status: {phase: Running}\nspec:"),
        _pod("join-0", "shared"),
    )
    assert pods_by_name(document)["join-0"]["phase"] == "Running"
    assert _used(document, "gpu-gb200") == 1.0


def test_an_opaque_config_field_charges_each_device_its_amount() -> None:
    # The design's MPS source: 10240Mi of pinned memory a device, from the claim's own configuration. Two
    # 2-device claims against 30Gi: the first takes 20Gi, the second would take 40Gi and waits.
    mps = (
        ", config: [{opaque: {driver: gpu.nvidia.com, parameters: "
        "{sharing: {mpsConfig: {defaultPinnedDeviceMemoryLimit: 10240}}}}}]"
    )
    source = (
        "{dra: {deviceClassName: gpu.nvidia.com}, quantity: {dra: {opaqueConfigField: "
        "{driver: gpu.nvidia.com, path: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit, unit: Mi}}}}"
    )
    document = _run(
        _resource("mps-memory", source),
        _node(),
        CLASS,
        _slice(4),
        _queue('[{resourceRef: mps-memory, limit: "30Gi"}]'),
        _claim("claim-0", 2, mps),
        _claim("claim-1", 2, mps),
        _pod("a-0", "claim-0"),
        _pod("a-1", "claim-1"),
    )
    assert pods_by_name(document)["a-0"]["phase"] == "Running"
    assert groups_by_name(document)["pg-a-1"]["unschedulableReason"].startswith(
        "OverLimit: queue team-a would exceed its accounted mps-memory limit (20Gi used + 20Gi requested > "
        "limit 30Gi)"
    )


def test_gpu_memory_from_dra_capacity_is_not_counted_again_from_the_node_label() -> None:
    # gpu-memory by the devices' selected capacity, on a node that also labels its GPU memory: a 2-device
    # claim holds 2 x 192Gi, not that plus 2 x the label's 80Gi.
    source = (
        "{dra: {deviceClassName: gpu.nvidia.com}, "
        "quantity: {dra: {selectedCapacity: {capacityName: memory}}}}"
    )
    document = _run(
        _resource("gpu-memory", source),
        _node('{nvidia.com/gpu.memory: "81920"}'),
        CLASS,
        _slice(2),
        _queue('[{resourceRef: gpu-memory, limit: "-1"}]'),
        _claim("claim-0", 2),
        _pod("a-0", "claim-0"),
    )
    assert pods_by_name(document)["a-0"]["phase"] == "Running"
    assert _used(document, "gpu-memory") == 2 * 192 * 2**30


def test_device_attributes_narrow_the_devices_counted() -> None:
    # A GB200-only resource does not count devices of another product: an H100 limit of 0 lets the GB200
    # claim run.
    source = (
        "{dra: {deviceClassName: gpu.nvidia.com}, "
        "match: {dra: {deviceAttributes: {productName: {string: H100}}}}}"
    )
    document = _run(
        _resource("gpu-h100", source),
        _node(),
        CLASS,
        _slice(2),
        _queue('[{resourceRef: gpu-h100, limit: "0"}]'),
        _claim("claim-0", 2),
        _pod("a-0", "claim-0"),
    )
    assert pods_by_name(document)["a-0"]["phase"] == "Running"
