"""Two small clusters with gpu-memory pods, and the GPUs every surface (the scheduler's queue accounting,
PodGroup and Queue status, the queue metrics, `simulate`'s result, the kubectl plugin) must report for
them: the rule of `SharedGpuRequest.queue_gpus`.

In each, queue `q` holds one PodGroup `work` with a pod `held` bound to a node and a pod `asks` that no
node can take (it stays pending):

* `TWO_SIZES`: a 40000 MiB GPU and an 80000 MiB GPU. `held` (20000 MiB on the large GPU) holds a quarter
  GPU, not half of the smallest; `asks` (90000 MiB) asks 90000 / 40000 = 2.25 GPUs of its queue, not
  capped at one GPU.
* `NO_MEMORY`: no node reports its GPU memory. `held` holds its whole GPU; `asks` asks nothing of its
  queue (KAI v0.17's nil), not a whole GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest


@dataclass(frozen=True)
class GpuMemoryCluster:
    manifests: list[dict[str, Any]]
    held_node: str
    held: float  # GPUs the bound pod holds
    asks: float  # GPUs the pending pod asks of its queue
    memory_mib: int  # the GPU memory both ask for (KAI's status lists it in `requested`)

    @property
    def allocated(self) -> float:
        return self.held

    @property
    def requested(self) -> float:
        return self.held + self.asks


def _cluster(
    nodes: list[dict[str, Any]], held_node: str, held_mib: int, asks_mib: int
) -> list[dict[str, Any]]:
    return [
        *nodes,
        queue_manifest("q"),
        pod_group_manifest("work", "q", min_member=1),
        pod_manifest(
            "held",
            "q",
            group="work",
            gpu_memory=held_mib,
            node_name=held_node,
            phase="Running",
            labels={"runai-gpu-group": "gpu-1"},  # the shared GPU the binder gave it
        ),
        pod_manifest("asks", "q", group="work", gpu_memory=asks_mib),
    ]


TWO_SIZES = GpuMemoryCluster(
    _cluster(
        [node_manifest("small", gpus=1, gpu_memory=40000), node_manifest("large", gpus=1, gpu_memory=80000)],
        "large",
        20000,
        90000,
    ),
    held_node="large",
    held=0.25,
    asks=2.25,
    memory_mib=110000,
)

NO_MEMORY = GpuMemoryCluster(
    _cluster([node_manifest("plain", gpus=1)], "plain", 20000, 20000),
    held_node="plain",
    held=1.0,
    asks=0.0,
    memory_mib=40000,
)

CLUSTERS = {"two GPU memory sizes": TWO_SIZES, "no node reports GPU memory": NO_MEMORY}
