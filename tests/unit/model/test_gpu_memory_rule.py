"""The one rule for what a gpu-memory request counts as in GPUs (`api.gpu_request.gpu_memory_gpus`), which
every queue number goes through; the surfaces are tested with it in `tests/gpu_memory_clusters.py`."""

from __future__ import annotations

from kai_scheduler.api.gpu_request import gpu_memory_gpus
from kai_scheduler.model.resources import PodRequest


def test_on_a_node_a_pod_takes_its_share_of_each_of_the_nodes_gpus() -> None:
    assert gpu_memory_gpus(20000, 2, 80000.0) == 0.5
    assert gpu_memory_gpus(90000, 1, 80000.0) == 1.0  # at most the GPU it holds
    assert gpu_memory_gpus(20000, 2, 0.0) == 2.0  # the node does not report its memory: whole GPUs


def test_not_on_a_node_it_asks_devices_times_memory_over_the_clusters_gpu() -> None:
    assert gpu_memory_gpus(90000, 1, None, 40000.0) == 2.25  # not capped at one GPU
    assert gpu_memory_gpus(20000, 2, None, 80000.0) == 0.5
    assert gpu_memory_gpus(20000, 1, None, 0.0) == 0.0  # no node reports GPU memory: KAI's nil


def test_a_pods_queue_gpus_weigh_only_gpu_memory_by_the_rule() -> None:
    memory = PodRequest(gpu_memory_mib=20000, gpu_devices=2)
    assert memory.queue_gpus(40000.0) == 1.0
    assert memory.queue_resources(None, 80000.0).gpu == 0.5
    fraction = PodRequest(gpu_portion=0.5, gpu_devices=2)
    assert fraction.queue_gpus(40000.0) == fraction.queue_gpus(None, 0.0) == 1.0  # no memory involved
