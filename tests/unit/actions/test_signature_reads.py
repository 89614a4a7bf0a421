"""Allocate's and the victim actions' shortcuts (an attempt shaped like one that failed is not made
again) hold only where the attempts would fare alike: what a node filter reads of a pod beyond its request
and placement is part of its shape. Pods that differ only in an annotation an accounted `podAnnotation`
source counts are not alike (one over its limit does not hold back a smaller one, in allocate or in
reclaim), nor are gpu-memory pods of queues whose limits weigh their memory differently on each node (one
queue's pod without room does not hold back another queue's)."""

from __future__ import annotations

from typing import Any

import yaml

from helpers import config, node, pod, pods_by_name, queue, simulate
from kai_scheduler.api.manifests import parse_object

ALLOCATE = config(actions="allocate")


def _objects(*documents: str) -> list[Any]:
    return [parse_object(yaml.safe_load(text), "test", i + 1) for i, text in enumerate(documents)]


def _team_a_counting_compute(*, gpu_quota: float) -> list[Any]:
    """gpu-compute, counting the pods' gpu-compute annotation (percent), and queue team-a that may hold
    100 of it, with `gpu_quota` GPUs deserved (-1: none set)."""
    return _objects(
        """
apiVersion: scheduling.run.ai/v1alpha1
kind: AccountedResource
metadata: {name: gpu-compute}
spec: {sources: [{podAnnotation: {key: gpu-compute, unit: percent}}]}
""",
        f"""
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {{name: team-a}}
spec:
  resources:
    gpu: {{quota: {gpu_quota}, limit: -1}}
    cpu: {{quota: -1, limit: -1}}
    memory: {{quota: -1, limit: -1}}
  accountedResources: [{{resourceRef: gpu-compute, limit: "100"}}]
""",
    )


def test_a_pod_over_its_annotation_limit_does_not_hold_back_a_smaller_one() -> None:
    # gpu-compute counts the pods' gpu-compute annotation; team-a may hold 100. big-0 (80) runs, big-1
    # (80) would take it to 160 and waits; small-0 (20), alike in all but the annotation, fits (100).
    accounted = _team_a_counting_compute(gpu_quota=-1)
    pods = [
        pod(name, "team-a", gpus=1, annotations={"gpu-compute": compute})
        for name, compute in (("big-0", "80"), ("big-1", "80"), ("small-0", "20"))
    ]
    document = simulate([*accounted, node("n0", gpus=8), *pods], ALLOCATE, cycles=1)
    phases = {name: p["phase"] for name, p in pods_by_name(document).items()}
    assert phases == {"big-0": "Running", "big-1": "Pending", "small-0": "Running"}


def test_a_gpu_memory_pod_without_room_in_one_queue_does_not_hold_back_another_queues() -> None:
    # 8000 MiB is 0.8 of the small node's GPU and 0.1 of the big node's. a-limited may hold 0.5 GPU: its
    # pod may only use the big node, which is full; b-free's pod of the same shape, tried after it (a-limited
    # has the higher priority), takes the small node.
    objects = [
        node("a-small", gpus=1, gpu_memory=10000),
        node("b-big", gpus=1, gpu_memory=80000),
        queue("a-limited", gpu_limit=0.5, priority=200),
        queue("b-free"),
        queue("other"),
        pod("hog", "other", gpus=1, node_name="b-big", phase="Running"),
        pod("limited-0", "a-limited", gpu_memory=8000),
        pod("free-0", "b-free", gpu_memory=8000),
    ]
    document = simulate(objects, ALLOCATE, cycles=1)
    pods = pods_by_name(document)
    assert pods["limited-0"]["phase"] == "Pending"
    assert (pods["free-0"]["phase"], pods["free-0"].get("node")) == ("Running", "a-small")


def test_a_reclaimer_over_its_annotation_limit_does_not_hold_back_a_smaller_one() -> None:
    # team-a deserves 2 of n0's 3 GPUs and holds 1 (big-0, 80 of its 100 gpu-compute); team-b holds 2 and
    # deserves none. big-1 (80) would take team-a to 160: reclaim passes it over. small-0 (20), alike in
    # all but the annotation, takes 100 and may reclaim a GPU from team-b.
    accounted = _team_a_counting_compute(gpu_quota=2)
    running = [
        pod("big-0", "team-a", gpus=1, annotations={"gpu-compute": "80"}, node_name="n0", phase="Running"),
        *(pod(f"b-{i}", "team-b", gpus=1, node_name="n0", phase="Running") for i in range(2)),
    ]
    pending = [
        pod(name, "team-a", gpus=1, annotations={"gpu-compute": compute})
        for name, compute in (("big-1", "80"), ("small-0", "20"))
    ]
    objects = [*accounted, queue("team-b", gpu=0), node("n0", gpus=3), *running, *pending]
    document = simulate(objects, config(actions="allocate, reclaim"), cycles=3)
    pods = pods_by_name(document)
    assert (pods["small-0"]["phase"], pods["big-1"]["phase"]) == ("Running", "Pending")
    assert sorted(pods[name]["evictions"] for name in ("b-0", "b-1")) == [0, 1]
