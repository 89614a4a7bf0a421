"""The dashboard's numbers of a cycle (`k8s/scheduler/cycle_gauges.py`): where the idle GPUs are (an idle
node, a partly used one, the unused parts of shared GPUs) and the jobs that wait, by queue and reason."""

from __future__ import annotations

from helpers import node, pod, queue, snapshot_of
from kai_scheduler.api.reasons import OVER_LIMIT, WaitReason
from kai_scheduler.k8s.scheduler.cycle_gauges import gpu_allocation, waiting_by_queue


def test_idle_gpus_by_placement_and_allocation() -> None:
    snapshot = snapshot_of(
        [
            node("idle", gpus=8),
            node("partial", gpus=8),
            node("cpu-only", gpus=0),
            queue("q"),
            pod("whole", "q", gpus=2, node_name="partial"),
            pod("quarter", "q", fraction=0.25, node_name="partial", labels={"runai-gpu-group": "g1"}),
            pod("half", "q", fraction=0.5, node_name="partial", labels={"runai-gpu-group": "g1"}),
        ]
    )
    allocation = gpu_allocation(snapshot.nodes)
    assert allocation.capacity == 16
    assert allocation.allocated == 2.75  # two whole GPUs, three quarters of the shared one
    assert allocation.shared == 1
    # The partly used node: 8 - 2 whole - 1 shared = 5 whole GPUs idle, a quarter of the shared GPU.
    assert allocation.idle == {"idle_node": 8, "partial_node": 5, "shared_gpu": 0.25}


def test_waiting_jobs_by_queue_and_reason_count_their_pending_pods() -> None:
    snapshot = snapshot_of(
        [node("n", gpus=1), queue("a"), queue("b"), pod("a1", "a", gpus=4), pod("b1", "b", gpus=4)]
    )
    jobs = {job.queue: key for key, job in snapshot.jobs.items()}
    waiting = waiting_by_queue(snapshot, {jobs["a"]: "does not fit", jobs["b"]: WaitReason("x", OVER_LIMIT)})
    assert {key: (w.pod_groups, w.pods) for key, w in waiting.items()} == {
        ("a", "Unschedulable"): (1, 1),
        ("b", "OverLimit"): (1, 1),
    }
