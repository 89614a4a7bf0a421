"""`kai.scheduler/skip-podgrouper: "true"` against the fake API server: the pod grouper leaves such a pod
alone, whether the pod or any of its owners carries it, so that the pod joins an external PodGroup. Ported
by test name from KAI v0.17's `pkg/podgrouper/pod_controller_test.go` (TestShouldSkipPodGrouper,
TestShouldSkipAnyOwner, TestReconcileSkipsAnnotatedPod, TestReconcileSkipsAnnotatedOwner,
TestReconcileSkipsIntermediateAnnotatedOwner, TestReconcileDoesNotSkipOnFalseAnnotationValue,
TestReconcileSkipsOwnerlessPodGroupPod); TestReconcileNoOpsOnNilMetadata is left out: this grouper always
plans a PodGroup (KAI's nil metadata comes from groupers of kinds it only skips)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from live_support import run

from helpers import pod_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.controlplane.podgrouper import skips_pod_grouper
from kai_scheduler.k8s.needs import podgrouper_needs
from kai_scheduler.k8s.podgrouper.controller import Outcome, PodGrouperController
from kai_scheduler.k8s.runtime.access import AccessGuard
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.informers import PODGROUPER_KINDS, InformerSet
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

MakeClient = Callable[..., LightkubeClient]
SKIP = "kai.scheduler/skip-podgrouper"


def with_annotations(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {**(obj["metadata"].get("annotations") or {}), **annotations}
    return obj


def test_should_skip_pod_grouper() -> None:
    pod = pod_manifest("p", None)
    assert not skips_pod_grouper(pod)
    assert not skips_pod_grouper(with_annotations(pod, {SKIP: "false"}))
    assert skips_pod_grouper(with_annotations(pod, {SKIP: "true"}))


def test_should_skip_any_owner() -> None:
    owner: dict[str, Any] = {"metadata": {}}
    assert not any(skips_pod_grouper(o) for o in [owner])
    assert any(skips_pod_grouper(o) for o in [with_annotations(owner, {SKIP: "true"})])


def owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    reference = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }
    obj["metadata"]["ownerReferences"] = [reference]
    return obj


def deployment(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations or {}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"spec": {"containers": []}}},
    }


def replica_set(deploy: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": "default", "annotations": annotations or {}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"spec": {"containers": []}}},
    }
    return owned_by(rs, deploy)


def reconcile(server: FakeApiServer, make_client: MakeClient, pod: dict[str, Any]) -> tuple[Outcome, int]:
    """One reconcile of `pod` (created in the store): what it did, and how many owners it read."""
    stored = server.store.create(pod)

    async def body() -> tuple[Outcome, int]:
        async with make_client("podgrouper") as raw:
            client = AccessGuard(raw, podgrouper_needs(), "podgrouper")
            async with InformerSet(client, backoff=FAST_BACKOFF, kinds=PODGROUPER_KINDS) as informers:
                assert await informers.wait_synced(5)
                controller = PodGrouperController(client, informers, backoff=FAST_BACKOFF)
                outcome = await controller.reconcile_pod(stored)
                return outcome, controller.stats.owner_reads

    return run(body())


def pod_groups(server: FakeApiServer) -> list[str]:
    return [group["metadata"]["name"] for group in server.store.list("podgroups")]


def test_reconcile_skips_annotated_pod(server: FakeApiServer, make_client: MakeClient) -> None:
    rs = server.store.create(replica_set(server.store.create(deployment())))
    pod = with_annotations(owned_by(pod_manifest("web-1-a", None), rs), {SKIP: "true"})
    assert reconcile(server, make_client, pod) == (Outcome.SKIPPED, 0)
    assert pod_groups(server) == []


@pytest.mark.parametrize(
    ("on_deployment", "on_replica_set"),
    [
        pytest.param({SKIP: "true"}, None, id="TestReconcileSkipsAnnotatedOwner"),
        pytest.param(None, {SKIP: "true"}, id="TestReconcileSkipsIntermediateAnnotatedOwner"),
    ],
)
def test_reconcile_skips_a_pod_an_owner_asks_to_skip(
    server: FakeApiServer,
    make_client: MakeClient,
    on_deployment: dict[str, str] | None,
    on_replica_set: dict[str, str] | None,
) -> None:
    rs = server.store.create(replica_set(server.store.create(deployment(on_deployment)), on_replica_set))
    outcome, owner_reads = reconcile(server, make_client, owned_by(pod_manifest("web-1-a", None), rs))
    assert outcome is Outcome.SKIPPED and owner_reads >= 1  # the owners are read to know
    assert pod_groups(server) == []


def test_reconcile_does_not_skip_on_false_annotation_value(
    server: FakeApiServer, make_client: MakeClient
) -> None:
    rs = server.store.create(replica_set(server.store.create(deployment({SKIP: "false"}))))
    pod = with_annotations(owned_by(pod_manifest("web-1-a", None), rs), {SKIP: "false"})
    outcome, _ = reconcile(server, make_client, pod)
    assert outcome is Outcome.GROUPED
    assert len(pod_groups(server)) == 1


def test_reconcile_skips_ownerless_pod_group_pod(server: FakeApiServer, make_client: MakeClient) -> None:
    pod = with_annotations(pod_manifest("solo", None), {"pod-group-name": "external-pg"})
    assert reconcile(server, make_client, pod) == (Outcome.SKIPPED, 0)
    assert pod_groups(server) == []
