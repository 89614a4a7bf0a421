"""Shared GPUs given to bound gpu-memory pods that name none (`model.shared_gpus`): a pod's part of each
GPU is what it holds there (`SharedGpuRequest.held_portion`), with the node's GPU memory read as the node
table reads it."""

from __future__ import annotations

from helpers import pod
from kai_scheduler.model.shared_gpus import BoundPod, assign_missing_gpu_groups


def _groups(memory_label: str | None, *memory_mib: int) -> list[tuple[str, ...]]:
    pods = [BoundPod(pod(f"p{i}", gpu_memory=m, node_name="n1"), "n1", ()) for i, m in enumerate(memory_mib)]
    labels = {"n1": memory_label} if memory_label is not None else {}
    assigned = assign_missing_gpu_groups(pods, labels)
    return [assigned[i] for i in range(len(pods))]


def test_pods_that_fit_one_gpu_together_share_it() -> None:
    assert _groups("40000", 20000, 20000) == [("n1-gpu-1",), ("n1-gpu-1",)]


def test_on_a_node_that_does_not_report_its_gpu_memory_each_pod_holds_a_gpu_of_its_own() -> None:
    # Its queue counts each pod as a whole GPU there, so two pods are on two GPUs, not packed on one.
    assert _groups(None, 20000, 20000) == [("n1-gpu-1",), ("n1-gpu-2",)]


def test_the_nodes_gpu_memory_is_floored_to_100_mib_as_placement_reads_it() -> None:
    # 81920 MiB reads as 81900: two halves of 81920 MiB overfill one such GPU.
    assert _groups("81920", 40960, 40960) == [("n1-gpu-1",), ("n1-gpu-2",)]
    assert _groups("82000", 40960, 40960) == [("n1-gpu-1",), ("n1-gpu-1",)]
