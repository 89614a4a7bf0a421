"""What `kai-fakeapi` starts with unless told otherwise (`--seed none`): a small GPU cluster ready for the
README's walk-through, as a cluster with KAI installed by its chart would be.

* two GPU nodes, `gpu-node-1` and `gpu-node-2`, 8 x `nvidia.com/gpu` (A100 80GB) each, 64 CPUs, 512Gi;
* KAI's priority classes (`train` 50, `build-preemptible` 75, `build` 100, `inference` 125), which the
  chart installs;
* KAI's default queues, `default-parent-queue` and `default-queue` under it, which the chart creates.
"""

from __future__ import annotations

from kai_scheduler.api.constants import BUILTIN_PRIORITY_CLASSES

from .meta import Obj

GPUS_PER_NODE = 8
NODES = ("gpu-node-1", "gpu-node-2")


def _node(name: str) -> Obj:
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(GPUS_PER_NODE)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.memory": "81920",
                "nvidia.com/gpu.count": str(GPUS_PER_NODE),
            },
        },
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": False,
    }


def _queue(name: str, parent: str | None) -> Obj:
    resource = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    spec: Obj = {"resources": {"cpu": dict(resource), "gpu": dict(resource), "memory": dict(resource)}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def try_it_seed() -> list[Obj]:
    """The objects of the try-it seed, in the order they are created."""
    return [
        *(_node(name) for name in NODES),
        *(_priority_class(name, value) for name, value in BUILTIN_PRIORITY_CLASSES.items()),
        _queue("default-parent-queue", None),
        _queue("default-queue", "default-parent-queue"),
    ]
