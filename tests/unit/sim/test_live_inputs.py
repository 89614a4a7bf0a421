"""What the simulator reads from manifests taken from a live cluster (a `/get-snapshot`, or `kubectl get
-o yaml`) besides the contract's basics: KAI's bookkeeping annotations on PodGroups
(`kai.scheduler/last-start-timestamp`, `kai.scheduler/stale-podgroup-timestamp`, RFC 3339 on the
`--start` clock) and the binder's labels of a pod on several shared GPUs (`runai-gpu-group/<i>`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from helpers import (
    START,
    config_with,
    node,
    pod,
    pod_group,
    pods_by_name,
    queue,
    run,
    simulate,
    stale_evictions,
)
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import PodGroup


def annotated(group: PodGroup, **annotations: str) -> PodGroup:
    meta = group.metadata.model_copy(update={"annotations": {**group.metadata.annotations, **annotations}})
    return group.model_copy(update={"metadata": meta})


def at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def stale_gang(group: PodGroup) -> list[Any]:
    """Gang g (minMember 2) runs g-0 only; g-1 waits for the GPU the blocker holds: stale."""
    return [
        node("n0", gpus=2),
        queue("q"),
        group,
        pod("g-0", "q", group="g", gpus=1, node_name="n0"),
        pod("blocker", "q", gpus=1, node_name="n0"),
        pod("g-1", "q", group="g", gpus=1),
    ]


def test_a_gang_stale_since_before_the_start_is_evicted_when_its_grace_period_ends() -> None:
    # Stale for 50s at second 0: the default grace period (60s) ends at 10s, not at 60s.
    group = annotated(pod_group("g", "q", min_member=2), **{c.STALE_PODGROUP_TIMESTAMP_ANNOTATION: at(-50)})
    assert stale_evictions(run(stale_gang(group))) == [(10.0, "g-0")]
    # Without the annotation the first cycle only notices the staleness.
    assert stale_evictions(run(stale_gang(pod_group("g", "q", min_member=2)))) == [(60.0, "g-0")]


def test_a_recent_last_start_protects_a_job_for_its_min_runtime() -> None:
    # a's job started 20s before second 0; with a reclaim min runtime of 60s it is protected until 40s.
    objects: list[Any] = [
        node("n0", gpus=1),
        queue("a", gpu=0, gpu_weight=0),
        queue("b", gpu=1),
        annotated(pod_group("ja", "a"), **{c.LAST_START_TIMESTAMP_ANNOTATION: at(-20)}),
        pod("a-0", "a", group="ja", gpus=1, node_name="n0"),
        pod("b-0", "b", gpus=1),
    ]
    result = run(objects, config_with({"minruntime": {"defaultReclaimMinRuntime": "60s"}}))
    evictions = [(r.time, d.pod) for r in result.cycles for d in r.decisions if d.type == "evict"]
    assert evictions == [(40.0, "default/a-0")]


def test_a_pod_on_several_shared_gpus_names_them_with_indexed_labels() -> None:
    two = pod("two", gpu_memory=20000, num_devices=2, node_name="n0")
    labels = {
        **two.metadata.labels,
        "runai-gpu-group": "g-a",
        "runai-gpu-group/0": "g-a",
        "runai-gpu-group/1": "g-b",
    }
    two = two.model_copy(update={"metadata": two.metadata.model_copy(update={"labels": labels})})
    # g-b is half used by `two`; a 0.5 pod fits on it (or on g-a) next to it, not on a fresh GPU.
    objects = [node("n0", gpus=2, gpu_memory=40000), queue("q"), two, pod("half", fraction=0.5)]
    document = simulate(objects, cycles=1)
    pods = pods_by_name(document)
    assert pods["two"]["gpuGroups"] == ["g-a", "g-b"]
    assert pods["half"]["phase"] == "Running" and pods["half"]["gpuGroups"][0] in ("g-a", "g-b")
