"""An informer's indexes follow each event: a value an update moves, one it keeps, and a deletion (an update
that moves no value leaves the index as it was)."""

from __future__ import annotations

from typing import Any, cast

from kai_scheduler.k8s.runtime.client import PODS, KubeClient, WatchEvent
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.informers import INDEXERS, POD_GROUP_INDEX, POD_NODE_INDEX


def pod(version: int, node: str | None = None, phase: str = "Pending") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "resourceVersion": str(version)}
    meta["annotations"] = {"pod-group-name": "g"}
    spec = {"nodeName": node} if node else {}
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_indexes_follow_updates_and_deletions() -> None:
    informer = Informer(cast(KubeClient, None), PODS, indexers=INDEXERS[PODS])
    informer.apply_event(WatchEvent("ADDED", pod(2)))
    assert informer.index_keys(POD_NODE_INDEX, "n1") == set()
    assert informer.index_keys(POD_GROUP_INDEX, "default/g") == {"default/p"}
    informer.apply_event(WatchEvent("MODIFIED", pod(3, node="n1")))
    assert informer.index_keys(POD_NODE_INDEX, "n1") == {"default/p"}
    informer.apply_event(WatchEvent("MODIFIED", pod(4, node="n1", phase="Running")))
    assert [p["status"]["phase"] for p in informer.by_index(POD_NODE_INDEX, "n1")] == ["Running"]
    assert informer.index_keys(POD_GROUP_INDEX, "default/g") == {"default/p"}
    informer.apply_event(WatchEvent("DELETED", pod(5, node="n1", phase="Running")))
    assert informer.index_keys(POD_NODE_INDEX, "n1") == set()
    assert informer.index_keys(POD_GROUP_INDEX, "default/g") == set()
    assert informer._indexes == {name: {} for name in INDEXERS[PODS]}
