"""KAI v0.17.0 docs/dra/README.md: gpu-imex-pod.yaml (a ComputeDomain and a pod whose IMEX channel claim
comes from the ResourceClaimTemplate the ComputeDomain's controller makes); and the DRA-backed extended
resources of docs/developer/designs/dra-extended-resources/README.md (KEP-5004: a DeviceClass with
`extendedResourceName: nvidia.com/gpu`, and a pod asking `nvidia.com/gpu` on a node that only has DRA
GPUs). The nodes, and what NVIDIA's DRA driver would publish and create, are the test's."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import DEFAULT_QUEUES, nodes, simulate

GPU_IMEX_POD = """
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: imex-channel-injection
spec:
  numNodes: 1
  channel:
    resourceClaimTemplate:
      name: imex-channel-0
---
apiVersion: v1
kind: Pod
metadata:
  name: gpu-imex-pod
  labels:
    kai.scheduler/queue: default-queue
spec:
  schedulerName: kai-scheduler
  containers:
    - name: main
      image: ubuntu
      command: ["bash", "-c"]
      args: ["nvidia-smi; ls -la /dev/nvidia-caps-imex-channels; trap 'exit 0' TERM; sleep 9000 & wait"]
      resources:
        limits:
          nvidia.com/gpu: "1"
        claims:
        - name: imex-channel-0
  resourceClaims:
  - name: imex-channel-0
    resourceClaimTemplateName: imex-channel-0
"""

# What the driver gives once the ComputeDomain is reconciled: the channel's DeviceClass, a slice of
# channels on the node, and the ResourceClaimTemplate the ComputeDomain names.
IMEX_DRIVER_OBJECTS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: compute-domain-default-channel.nvidia.com}
spec:
  selectors:
  - cel: {expression: device.driver == 'compute-domain.nvidia.com'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-0-channels}
spec:
  driver: compute-domain.nvidia.com
  nodeName: gpu-node-0
  pool: {name: gpu-node-0, generation: 0}
  devices:
  - name: channel-0
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: imex-channel-0}
spec:
  spec:
    devices:
      requests:
      - name: channel
        exactly: {deviceClassName: compute-domain-default-channel.nvidia.com, count: 1}
"""

GPU_NODES = nodes("gpu-node-0", "gpu-node-1", **{"nvidia.com/gpu": "4"})


def test_as_written_the_pod_waits_for_the_template_only_the_compute_domain_makes(tmp_path: Path) -> None:
    run = simulate(tmp_path, GPU_NODES, DEFAULT_QUEUES, GPU_IMEX_POD)
    assert run.running() == {}
    assert any("ComputeDomain" in w and "imex-channel-injection" in w for w in run.warnings)
    assert any("Pod default/gpu-imex-pod waits" in w and "imex-channel-0" in w for w in run.warnings)


def test_with_the_drivers_channel_the_pod_runs_where_the_channel_is(tmp_path: Path) -> None:
    run = simulate(tmp_path, GPU_NODES, DEFAULT_QUEUES, GPU_IMEX_POD, IMEX_DRIVER_OBJECTS)
    assert run.running() == {"gpu-imex-pod": "gpu-node-0"}
    assert run.pods["gpu-imex-pod"]["gpu"] == 1.0


# KEP-5004, from the design doc: the DeviceClass and a pod `trainer-0` asking `nvidia.com/gpu: 1`.
EXTENDED_RESOURCE_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: nvidia-gpu
spec:
  extendedResourceName: nvidia.com/gpu
"""

# The test's: a node with no device-plugin GPUs and a slice of two DRA GPUs on it.
DRA_ONLY_NODE = (
    nodes("node-a")
    + """---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: node-a
  pool: {name: node-a, generation: 0}
  devices:
  - name: gpu-0
  - name: gpu-1
"""
)


def trainer(resource: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: trainer-0, labels: {{kai.scheduler/queue: default-queue}}}}
spec:
  schedulerName: kai-scheduler
  containers:
  - name: trainer
    image: trainer
    resources:
      limits:
        {resource}: "1"
"""


@pytest.mark.parametrize("resource", ["nvidia.com/gpu", "deviceclass.resource.kubernetes.io/nvidia-gpu"])
def test_extended_resource_is_allocated_from_dra_devices(tmp_path: Path, resource: str) -> None:
    run = simulate(tmp_path, DRA_ONLY_NODE, EXTENDED_RESOURCE_CLASS, DEFAULT_QUEUES, trainer(resource))
    assert run.running() == {"trainer-0": "node-a"}
    # The design counts the implicit name's GPUs as GPUs only in a follow-up; KAI v0.17's code keeps that
    # name an extended resource of its own (outside the GPU vector), so the pod's GPUs are 0 there.
    assert run.pods["trainer-0"]["gpu"] == (1.0 if resource == "nvidia.com/gpu" else 0.0)
