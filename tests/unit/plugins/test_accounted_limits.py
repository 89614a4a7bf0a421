"""Accounted-resource limits in a cycle (KAI's AccountedResource design, phase 1): what a pod charges
depends on its node, the check runs per candidate node, a queue naming a resource that does not exist
blocks its jobs, and a cluster without accounted resources opens none of it."""

from __future__ import annotations

from typing import Any

import yaml

from helpers import groups_by_name, pods_by_name, simulate
from kai_scheduler.api.manifests import parse_object

_UNLIMITED = (
    "{gpu: {quota: -1, limit: -1, overQuotaWeight: 1}, cpu: {quota: -1, limit: -1, overQuotaWeight: 1}, "
    "memory: {quota: -1, limit: -1, overQuotaWeight: 1}}"
)
GPU_H200 = """
apiVersion: scheduling.run.ai/v1alpha1
kind: AccountedResource
metadata: {name: gpu-h200}
spec:
  sources:
  - resourceName: nvidia.com/gpu
    match: {nodeLabels: {nvidia.com/gpu.product: H200}}
"""


def _node(name: str, product: str, gpus: int = 4) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{nvidia.com/gpu.product: {product}}}}}
status: {{allocatable: {{cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "{gpus}"}}}}
"""


def _queue(name: str, accounted: str = "[]") -> str:
    return f"""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {{name: {name}}}
spec: {{resources: {_UNLIMITED}, accountedResources: {accounted}}}
"""


def _pod(name: str, queue: str, *, gpus: str = "1", annotations: str = "{}") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{kai.scheduler/queue: {queue}}}, annotations: {annotations}}}
spec:
  schedulerName: kai-scheduler
  containers: [{{name: main, resources: {{requests: {{nvidia.com/gpu: "{gpus}"}}}}}}]
"""


def _shared_pod(name: str, queue: str, fraction: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{kai.scheduler/queue: {queue}}}
  annotations: {{gpu-fraction: "{fraction}"}}
spec: {{schedulerName: kai-scheduler, containers: [{{name: main}}]}}
"""


def _run(*documents: str, **options: Any) -> dict[str, Any]:
    objects = [parse_object(yaml.safe_load(text), "test", i + 1) for i, text in enumerate(documents)]
    return simulate(objects, **options)


def test_a_fraction_charges_its_part_of_the_gpu_on_the_node_it_lands() -> None:
    # Limit 1 H200 GPU: two halves fit on H200 (0.5 + 0.5), a third half would take it to 1.5, so it goes
    # to the A100 node; a whole GPU on top would not have fit the H200 limit even as the first pod.
    document = _run(
        GPU_H200,
        _node("a-h200", "H200"),
        _node("b-a100", "A100"),
        _queue("team-a", '[{resourceRef: gpu-h200, limit: "1"}]'),
        _shared_pod("half-0", "team-a", "0.5"),
        _shared_pod("half-1", "team-a", "0.5"),
        _shared_pod("half-2", "team-a", "0.5"),
    )
    nodes = {name: pod["node"] for name, pod in pods_by_name(document).items()}
    assert nodes == {"half-0": "a-h200", "half-1": "a-h200", "half-2": "b-a100"}


def test_the_limit_of_one_queue_does_not_hold_back_the_same_shape_of_another() -> None:
    # team-a may hold no H200 GPU and the A100 node is full: its pod waits (no room it may use); team-b's
    # pod, of the same shape and tried after it (team-b already holds more), still takes an H200 GPU.
    document = _run(
        GPU_H200,
        _node("a-h200", "H200"),
        _node("b-a100", "A100", gpus=1),
        _queue("team-a", '[{resourceRef: gpu-h200, limit: "0"}]'),
        _queue("team-b"),
        _pod("b-running", "team-b", gpus="2").replace("spec: {", "spec: {nodeName: a-h200, "),
        _pod("a-0", "team-a"),
        _pod("a-1", "team-a"),
        _pod("b-0", "team-b"),
        cycles=1,  # within the one allocate action that tries both
    )
    pods = pods_by_name(document)
    assert (pods["a-0"]["node"], pods["a-1"]["phase"], pods["b-0"]["node"]) == ("b-a100", "Pending", "a-h200")
    reason = groups_by_name(document)["pg-a-1"]["unschedulableReason"]
    assert "1 node(s) would take the queue over an accounted-resource limit" in reason


def test_a_queue_naming_a_missing_accounted_resource_blocks_its_jobs() -> None:
    # The design: an unresolved reference blocks scheduling for the queue, even with limit -1.
    document = _run(
        _node("a-h200", "H200"),
        _queue("team-a", '[{resourceRef: gpu-b300, limit: "-1"}]'),
        _queue("team-b"),
        _pod("a-0", "team-a"),
        _pod("b-0", "team-b"),
    )
    group = groups_by_name(document)["pg-a-0"]
    assert group["unschedulableCode"] == "AccountedResourceNotFound"
    assert group["unschedulableReason"].startswith(
        "AccountedResourceNotFound: queue team-a names AccountedResource gpu-b300, which does not exist"
    )
    assert pods_by_name(document)["b-0"]["phase"] == "Running"


def test_a_default_limit_holds_for_queues_that_name_none() -> None:
    default = GPU_H200.replace("spec:\n", 'spec:\n  defaults: {limit: "1"}\n')
    document = _run(
        default,
        _node("a-h200", "H200"),
        _queue("team-a"),
        _pod("a-0", "team-a"),
        _pod("a-1", "team-a"),
    )
    group = groups_by_name(document)["pg-a-1"]
    assert group["unschedulableReason"].startswith(
        "OverLimit: queue team-a would exceed its accounted gpu-h200 limit (1 used + 1 requested > limit 1)"
    )


def test_dra_gpus_charge_the_gpu_resource_once() -> None:
    # A claim for 2 GPUs through DRA (KAI counts them as whole GPUs of the pod) against a `gpu` limit of
    # 2: it fits; counted twice it would not.
    gpu = GPU_H200.replace("gpu-h200", "gpu").replace(
        "    match: {nodeLabels: {nvidia.com/gpu.product: H200}}\n", ""
    )
    document = _run(
        gpu,
        """
apiVersion: v1
kind: Node
metadata: {name: node0}
status: {allocatable: {cpu: "32", memory: "256Gi", pods: "110"}}
""",
        _queue("team-a", '[{resourceRef: gpu, limit: "2"}]'),
        """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nvidia.com/gpu}
""",
        """
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node0-gpu}
spec: {driver: nvidia.com/gpu, nodeName: node0, pool: {name: node0}, devices: [{name: "0"}, {name: "1"}]}
""",
        """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: claim-0, labels: {kai.scheduler/queue: team-a}}
spec: {devices: {requests: [{name: request, exactly: {deviceClassName: nvidia.com/gpu, count: 2}}]}}
""",
        """
apiVersion: v1
kind: Pod
metadata: {name: dra-0, labels: {kai.scheduler/queue: team-a}}
spec:
  schedulerName: kai-scheduler
  containers: [{name: main, resources: {requests: {cpu: "1"}}}]
  resourceClaims: [{name: claim-0, resourceClaimName: claim-0}]
""",
    )
    assert pods_by_name(document)["dra-0"]["phase"] == "Running"
    (queue,) = document["queues"]
    assert queue["accountedResources"] == {"gpu": {"used": 2.0, "limit": 2.0}}
