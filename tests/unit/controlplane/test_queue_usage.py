"""Who holds a queue's resources (`kubectl kai usage`, issue #25): the pod groups in the order reclaim takes
them, each standing where KAI's reclaim rules put it, with its user; the plugin server's answers about
one queue, and the queue it does not know."""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import pytest

from helpers import cluster_state, node_manifest, objects_of, pod_group_manifest, pod_manifest, queue_manifest
from kai_scheduler.controlplane.queue_usage import UnknownQueue, queue_usage
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.scheduler.plugin_server import CycleState, NotServed, fair_share, usage
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.snapshot import ClusterState


def _running(name: str, gpus: int, **metadata: Any) -> list[dict[str, Any]]:
    group = pod_group_manifest(name, "a")
    pod = pod_manifest(f"{name}-0", "a", gpus=gpus, group=name, node_name="n0")
    for key, where in (("group_labels", group), ("pod_annotations", pod)):
        if key in metadata:
            target = "labels" if key.endswith("labels") else "annotations"
            where["metadata"].setdefault(target, {}).update(metadata[key])
    return [group, pod]


def _state() -> ClusterState:
    """8 GPUs; queue a (quota 2) runs three 2-GPU training jobs, oldest first; queue b (quota 6) waits for
    4. Fair share: a 2 + b 4 by quota, the 2 left to a, which asks for more: a's share is 4."""
    objects = [
        node_manifest("n0", gpus=8, cpu="64", memory="256Gi"),
        queue_manifest("a", gpu=2),
        queue_manifest("b", gpu=6),
        *_running("old", 2, group_labels={"user": "alice"}),
        *_running("mid", 2, pod_annotations={"user": "bob"}),
        *_running("new", 2),
        pod_manifest("wait", "b", gpus=4),
    ]
    return cluster_state(objects_of(*objects))


def test_pod_groups_in_reclaim_order_stand_against_fair_share_then_quota() -> None:
    answer = queue_usage(SchedulerConfig(), _state(), "a", None, cycle=1, now=0.0)
    assert (answer["quota"]["gpu"], answer["fairShare"]["gpu"], answer["allocated"]["gpu"]) == (2, 4, 6)
    rows = [
        (g["podGroup"], g["user"], g["allocated"]["gpu"], g["standing"], g["reclaimOrder"])
        for g in answer["podGroups"]
    ]
    # The newest first; a holds 6 > its share 4 before "new" goes, 4 > quota 2 before "mid", 2 before "old".
    assert rows == [
        ("default/new", None, 2, "over fair share", 1),
        ("default/mid", "bob", 2, "over quota", 2),
        ("default/old", "alice", 2, "within quota", 3),
    ]
    assert answer["users"] == [
        {"user": "-", "allocated": {"gpu": 2, "cpu": 1, "memory": 2**30}},
        {"user": "alice", "allocated": {"gpu": 2, "cpu": 1, "memory": 2**30}},
        {"user": "bob", "allocated": {"gpu": 2, "cpu": 1, "memory": 2**30}},
    ]
    with pytest.raises(UnknownQueue):
        queue_usage(SchedulerConfig(), _state(), "nobody", None, cycle=1, now=0.0)


def test_the_plugin_server_answers_from_the_cycle_s_record() -> None:
    state = _state()
    result = Scheduler(SchedulerConfig()).run(build_snapshot(state), cycle=7, now=0.0, record_fair_share=True)
    cycle = CycleState(7, 0.0, datetime(2026, 1, 1, tzinfo=UTC), state, result.fair_share_record)
    explained = fair_share(cycle, "a")
    assert explained["cycle"] == 7 and explained["resources"]["gpu"]["fairShare"] == result.fair_share["a"][0]
    assert usage(cycle, SchedulerConfig(), "a")["fairShare"]["gpu"] == 4
    for answer in (lambda: fair_share(cycle, "nobody"), lambda: usage(cycle, SchedulerConfig(), "nobody")):
        with pytest.raises(NotServed) as refused:
            answer()
        assert refused.value.status == HTTPStatus.NOT_FOUND
        assert str(refused.value) == "queue nobody: not in scheduling cycle 7"
    unrecorded = CycleState(7, 0.0, datetime(2026, 1, 1, tzinfo=UTC), state)
    with pytest.raises(NotServed) as refused:
        fair_share(unrecorded, "a")
    assert refused.value.status == HTTPStatus.SERVICE_UNAVAILABLE
