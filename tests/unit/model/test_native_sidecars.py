"""A pod's request with native sidecars (init containers with `restartPolicy: Always`) as the kubelet's
AggregateContainerRequests sums it (KAI v0.17, #1556): sidecars add to the main containers, and a plain
init container runs together with the sidecars declared before it.

Ported by name from KAI v0.17.0 `pkg/scheduler/api/pod_info/pod_info_test.go` `TestGetPodResourceRequest`.
"""

from __future__ import annotations

from typing import Any

from helpers import pod_manifest
from kai_scheduler.api.objects import Pod
from kai_scheduler.model.builder import pod_request

MI = 2**20


def container(cpu: str, memory: str, gpus: str | None = None, *, sidecar: bool = False) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
    spec: dict[str, Any] = {"name": f"c-{cpu}", "image": "busybox", "resources": {"requests": requests}}
    if sidecar:
        spec["restartPolicy"] = "Always"
    return spec


def with_containers(init: list[dict[str, Any]], main: dict[str, Any]) -> Pod:
    manifest = pod_manifest("p", cpu=None, memory=None)
    manifest["spec"]["initContainers"] = init
    manifest["spec"]["containers"] = [main]
    return Pod.model_validate(manifest)


def test_pod_with_native_sidecar() -> None:
    """ "pod with native sidecar (initContainer with restartPolicy=Always)": 4000m + 250m, 8Gi + 256Mi; the
    plain init container (500m, 1G) is below that."""
    pod = with_containers(
        [container("250m", "256Mi", sidecar=True), container("500m", "1G")], container("4000m", "8Gi")
    )
    request = pod_request(pod)
    assert (request.cpu, request.memory) == (4250.0, 8858370048.0)


def test_regular_init_dominates_and_includes_preceding_native_sidecar() -> None:
    """ "regular init dominates and includes preceding native sidecar": 5000m + 500m, 1Gi + 256Mi."""
    pod = with_containers(
        [container("500m", "256Mi", sidecar=True), container("5000m", "1Gi")], container("1000m", "1Gi")
    )
    request = pod_request(pod)
    assert (request.cpu, request.memory) == (5500.0, 1342177280.0)


def test_native_sidecar_with_gpu_is_summed_into_pod_gpu_request() -> None:
    """ "native sidecar with GPU is summed into pod GPU request": 2 + 1 GPUs."""
    pod = with_containers([container("250m", "256Mi", "1", sidecar=True)], container("4000m", "8Gi", "2"))
    request = pod_request(pod)
    assert (request.whole_gpus, request.cpu, request.memory) == (3, 4250.0, 8 * 1024 * MI + 256 * MI)
