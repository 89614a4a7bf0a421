"""The live state builder hands out creation ranks in creation order (issue #23, the live row): a batch of
new pods read in any other order put most of them between two others, and making room there moved other
pods' ranks, each such pod then handed to the cache again and its job made again for nothing."""

from __future__ import annotations

import random
from typing import Any, cast

from helpers import pod_manifest
from kai_scheduler.k8s.runtime.client import KubeClient, WatchEvent
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.state import StateBuilder
from kai_scheduler.model.snapshot import PodState

PODS = 2000


def test_a_batch_of_new_pods_moves_no_rank_and_each_pod_is_handed_over_once() -> None:
    informers = InformerSet(cast(KubeClient, None))
    for informer in informers:
        informer.apply_event(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "1"}}))
    builder = StateBuilder(informers, SessionClock())
    handed: list[str] = []
    upsert = builder.cache.upsert_pod

    def counted(state: PodState) -> Any:
        handed.append(state.pod.key)
        return upsert(state)

    builder.cache.upsert_pod = counted  # type: ignore[method-assign]
    names = [f"pod-{i:05d}" for i in range(PODS)]
    random.Random(7).shuffle(names)  # as many clients create them: one second's pods in any order
    for version, name in enumerate(names, start=2):
        made = pod_manifest(name)
        made["metadata"] |= {
            "uid": f"uid-{name}",
            "resourceVersion": str(version),
            "creationTimestamp": "2026-12-05T19:00:00Z",
        }
        informers.pods.apply_event(WatchEvent("ADDED", made))
    builder.build()
    assert sorted(handed) == sorted(f"default/{name}" for name in names)  # each once: no rank moved
    ranks = {key: state.rank for key in handed if (state := builder.cache.pod(key)) is not None}
    assert sorted(ranks, key=ranks.__getitem__) == sorted(ranks)  # one second's pods: by name
