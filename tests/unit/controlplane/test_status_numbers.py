"""PodGroup and Queue status numbers (cluster.status): the rules both `simulate --output json` and live
mode's status controllers report by."""

from __future__ import annotations

from kai_scheduler.controlplane.status import Numbers, PodFacts, pod_group_numbers, queue_numbers
from kai_scheduler.model.resources import PodRequest, Resources

GIB = 1024**3


def request(gpus: int = 0, cpu: float = 1000, memory: float = GIB, gpu_memory_mib: int = 0) -> PodRequest:
    return PodRequest(
        cpu=cpu,
        memory=memory,
        whole_gpus=gpus,
        gpu_portion=0.0,
        gpu_memory_mib=gpu_memory_mib,
        gpu_devices=1 if gpu_memory_mib else 0,
        scalars=(),
    )


def test_bound_pods_hold_unfinished_pods_ask_finished_pods_count_only() -> None:
    pods = [
        PodFacts("Running", True, 0.0, request(gpus=2)),
        PodFacts("Pending", False, 0.0, request(gpus=1)),
        PodFacts(None, False, 0.0, request(gpus=1)),  # no phase yet: pending
        PodFacts("Succeeded", True, 0.0, request(gpus=4)),
        PodFacts("Failed", False, 0.0, request(gpus=4)),
        PodFacts("Running", True, 0.0, None),  # unreadable request: counted, asks for nothing
    ]
    numbers = pod_group_numbers(pods, preemptible=True, min_gpu_memory_mib=0.0)
    assert (numbers.running, numbers.pending, numbers.succeeded, numbers.failed) == (2, 2, 1, 1)
    assert numbers.allocated == Resources(2, 1000, GIB)
    assert numbers.requested == Resources(4, 3000, 3 * GIB)
    assert numbers.allocated_non_preemptible == Resources()
    held = pod_group_numbers(pods, preemptible=False, min_gpu_memory_mib=0.0)
    assert held.allocated_non_preemptible == held.allocated


def test_gpu_memory_is_a_share_of_the_bound_node_or_of_the_smallest_gpu() -> None:
    pods = [
        PodFacts("Running", True, 80000.0, request(gpu_memory_mib=20000)),
        PodFacts("Pending", False, 0.0, request(gpu_memory_mib=20000)),
    ]
    numbers = pod_group_numbers(pods, preemptible=True, min_gpu_memory_mib=40000.0)
    assert numbers.allocated.gpu == 0.25
    assert numbers.requested.gpu == 0.75


def test_queues_sum_their_pod_groups_and_their_children() -> None:
    parents = {"dept": None, "a": "dept", "b": "dept", "lone": None}
    one = Numbers(Resources(1, 0, 0), Resources(1, 0, 0), Resources(2, 0, 0))
    two = Numbers(Resources(3, 0, 0), Resources(), Resources(5, 0, 0))
    totals = queue_numbers(parents, [("a", one), ("b", two), ("a", two), ("missing", one)])
    assert totals["a"].allocated == Resources(4, 0, 0) and totals["a"].requested == Resources(7, 0, 0)
    assert totals["b"].allocated == Resources(3, 0, 0)
    assert totals["dept"].allocated == Resources(7, 0, 0)
    assert totals["dept"].allocated_non_preemptible == Resources(1, 0, 0)
    assert totals["dept"].requested == Resources(12, 0, 0)
    assert totals["lone"] == Numbers()
