"""The fake API server's workload controllers: workloads created through the store get their pods, a pod
deleted from a Deployment is made again, and a workload's status is written back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kai_fakeapi import Store
from kai_fakeapi.controllers import WorkloadControllers
from kai_fakeapi.seed import try_it_seed

CONTAINER = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}


@pytest.fixture
def store() -> Iterator[Store]:
    store = Store(kubelet=True)
    store.load(try_it_seed())
    controllers = WorkloadControllers(store)
    controllers.start()
    try:
        yield store
    finally:
        controllers.stop()


def pods_of(store: Store, prefix: str) -> list[dict[str, Any]]:
    return [p for p in store.list("pods", "default") if p["metadata"]["name"].startswith(prefix)]


def test_a_deployment_makes_its_replicas_and_replaces_a_deleted_pod(store: Store) -> None:
    store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [CONTAINER]}},
            },
        }
    )
    assert store.wait_until(lambda: len(pods_of(store, "web-")) == 2, timeout=20)
    (replica_set,) = store.list("replicasets", "default")
    for pod in pods_of(store, "web-"):
        assert pod["metadata"]["ownerReferences"][0]["uid"] == replica_set["metadata"]["uid"]
    doomed = pods_of(store, "web-")[0]["metadata"]["name"]
    store.delete("pods", doomed, "default")
    assert store.wait_until(
        lambda: (
            len(pods_of(store, "web-")) == 2
            and doomed not in {p["metadata"]["name"] for p in pods_of(store, "web-")}
        ),
        timeout=20,
    )


def test_a_job_with_parallelism_makes_that_many_pods_and_reports_them_active(store: Store) -> None:
    store.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "batch", "namespace": "default"},
            "spec": {
                "parallelism": 3,
                "completions": 3,
                "template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}},
            },
        }
    )
    assert store.wait_until(lambda: len(pods_of(store, "batch-")) == 3, timeout=20)
    assert store.wait_until(
        lambda: (store.get("jobs", "batch", "default").get("status") or {}).get("active") == 3, timeout=20
    )


def test_the_try_it_seed_is_a_small_cluster_with_kai_installed() -> None:
    store = Store()
    store.load(try_it_seed())
    assert [n["metadata"]["name"] for n in store.list("nodes")] == ["gpu-node-1", "gpu-node-2"]
    assert {p["metadata"]["name"] for p in store.list("priorityclasses")} >= {"train", "build", "inference"}
    assert {q["metadata"]["name"] for q in store.list("queues")} == {"default-parent-queue", "default-queue"}
