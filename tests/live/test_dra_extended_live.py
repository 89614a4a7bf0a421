"""DRA-backed extended resources (KEP-5004) against the strict fake API server: a pod asking nvidia.com/gpu
on a node whose GPUs come only from a ResourceSlice, with a DeviceClass mapping that name, is placed with a
claim of its own, which the binder creates, allocates and names in the pod's status (KAI v0.17.0
`test/e2e/suites/allocate/resources/dra_extended_resources_test.go`, and its binder's `dra_test.go`
rollback)."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest, resource_slice_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.k8s.binder.extended_claims import bind_extended_claim, roll_back_extended_claim

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def seed(store: Store, devices: int) -> None:
    """Node n1 with no device-plugin GPUs and a slice of `devices` GPUs; a class mapping nvidia.com/gpu."""
    store.create(node_manifest("n1", gpus=0))
    store.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {
                "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                "extendedResourceName": "nvidia.com/gpu",
            },
        }
    )
    store.create(resource_slice_manifest("n1-gpus", "n1", devices))
    store.create(queue_manifest("team"))


def node_of(store: Store, pod: str) -> str | None:
    node: str | None = store.get("pods", pod, "default")["spec"].get("nodeName")
    return node


def extended_claims(store: Store) -> list[dict[str, Any]]:
    claims = store.list("resourceclaims", "default")
    return [c for c in claims if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"]


def devices(allocation: dict[str, Any]) -> list[str]:
    return [r["device"] for r in allocation["devices"]["results"]]


def test_a_gpu_pod_is_bound_with_a_claim_the_binder_makes(server: FakeApiServer) -> None:
    """It "should schedule pod requesting DRA-backed extended resource"."""
    store = server.store
    seed(store, devices=2)
    store.create(pod_manifest("p", "team", gpus=2))

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None) as live:
            await live.until(lambda: node_of(store, "p") == "n1")

    run(body())
    wanted = store.get("bindrequests", "p", "default")["spec"]["extendedResourceClaimAllocation"]
    assert [r["name"] for r in wanted["deviceRequests"]] == ["container-0-request-2"]
    (claim,) = extended_claims(store)
    meta = claim["metadata"]
    pod = store.get("pods", "p", "default")
    assert (
        meta["name"].startswith("p-extended-resources-") and meta["generateName"] == "p-extended-resources-"
    )
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "p",
        pod["metadata"]["uid"],
        True,
    )
    assert claim["spec"]["devices"]["requests"] == wanted["deviceRequests"]
    assert sorted(devices(claim["status"]["allocation"])) == ["gpu-0", "gpu-1"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    assert pod["status"]["extendedResourceClaimStatus"] == {
        "resourceClaimName": meta["name"],
        "requestMappings": [
            {
                "containerName": "main",
                "resourceName": "nvidia.com/gpu",
                "requestName": "container-0-request-2",
            }
        ],
    }


def test_devices_of_a_bind_on_its_way_are_not_given_twice(server: FakeApiServer) -> None:
    """It "should allocate distinct devices to multiple pods", with no binder yet: the first pod's claim
    does not exist, and its devices are taken all the same."""
    store = server.store
    seed(store, devices=2)
    store.create(pod_manifest("p1", "team", gpus=1))

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None, binder=False) as live:
            await live.until(lambda: store.try_get("bindrequests", "p1", "default") is not None)
            store.create(pod_manifest("p2", "team", gpus=1))
            await live.until(lambda: store.try_get("bindrequests", "p2", "default") is not None)

    run(body())
    chosen = [
        devices(
            store.get("bindrequests", p, "default")["spec"]["extendedResourceClaimAllocation"]["allocation"]
        )
        for p in ("p1", "p2")
    ]
    assert sorted(d for ds in chosen for d in ds) == ["gpu-0", "gpu-1"]


def test_a_failed_bind_deletes_its_claim_and_the_next_attempt_makes_one(server: FakeApiServer) -> None:
    """KAI v0.17.0 pkg/binder/plugins/k8s-plugins/dynamicresources/dra_test.go "rolls back the created claim
    and clears pod status after a later bind failure": the Binding fails once after the claim was made; the
    claim goes and the pod's status no longer names it; the retry makes a claim anew and binds."""
    store = server.store
    seed(store, devices=1)
    store.create(pod_manifest("p", "team", gpus=1))
    server.fail_next(1, 500, verb="create", resource="pods/binding", name="p")
    made: set[str] = set()

    def seen() -> bool:
        made.update(c["metadata"]["name"] for c in extended_claims(store))
        return node_of(store, "p") == "n1"

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None) as live:
            await live.until(seen)

    run(body())
    (claim,) = extended_claims(store)
    status = store.get("pods", "p", "default")["status"]["extendedResourceClaimStatus"]
    assert status["resourceClaimName"] == claim["metadata"]["name"]
    assert store.get("bindrequests", "p", "default")["status"]["failedAttempts"] == 1
    # (the first attempt's claim, when the test saw it, is gone: only the one named is left)
    assert claim["metadata"]["name"] in made


# --- the binder's rollback, as KAI's binder test has it (dra_test.go, Describe "dynamicResourcesPlugin
# extended-resource rollback"), with the binder's own ServiceAccount ---------------------------------


def _bound_claim(server: FakeApiServer, make_client: Any) -> dict[str, Any]:
    """Pod p with the claim the binder made for it (as a bind does, before the Binding failed)."""
    store = server.store
    seed(store, devices=1)
    store.create(pod_manifest("p", "team", gpus=1))
    request = {
        "spec": {
            "extendedResourceClaimAllocation": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}
                        ]
                    }
                },
                "deviceRequests": [
                    {"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                ],
                "containerMappings": [
                    {"containerName": "main", "resourceName": "nvidia.com/gpu", "requestName": "r"}
                ],
            }
        }
    }

    async def body() -> None:
        async with make_client("binder") as client:
            pod = store.get("pods", "p", "default")
            assert await bind_extended_claim(client, request, pod) is None

    run(body())
    return store.get("pods", "p", "default")


def test_rollback_deletes_the_claim_and_clears_the_pods_status(
    server: FakeApiServer, make_client: Any
) -> None:
    """It "rolls back the created claim and clears pod status after a later bind failure"."""
    pod = _bound_claim(server, make_client)
    assert pod["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    assert len(extended_claims(server.store)) == 1

    async def body() -> None:
        async with make_client("binder") as client:
            await roll_back_extended_claim(client, pod)

    run(body())
    assert extended_claims(server.store) == []
    assert "extendedResourceClaimStatus" not in server.store.get("pods", "p", "default")["status"]


def test_rollback_twice_changes_nothing_more(server: FakeApiServer, make_client: Any) -> None:
    """It "is idempotent when rollback runs more than once"."""
    pod = _bound_claim(server, make_client)

    async def body() -> None:
        async with make_client("binder") as client:
            await roll_back_extended_claim(client, pod)
            await roll_back_extended_claim(client, server.store.get("pods", "p", "default"))

    run(body())
    assert extended_claims(server.store) == []


def test_rollback_without_a_claim_does_nothing(server: FakeApiServer, make_client: Any) -> None:
    """It "does nothing when there is no extended-resource claim to roll back"."""
    store = server.store
    seed(store, devices=1)
    store.create(pod_manifest("p", "team", gpus=1))
    before = store.get("pods", "p", "default")

    async def body() -> None:
        async with make_client("binder") as client:
            await roll_back_extended_claim(client, before)

    run(body())
    assert (
        store.get("pods", "p", "default")["metadata"]["resourceVersion"]
        == before["metadata"]["resourceVersion"]
    )
    assert extended_claims(store) == []


def test_claims_of_a_finished_pods_bind_request_are_not_assumed(server: FakeApiServer) -> None:
    """KAI #1456 (v0.15.0) "Do not assume dra claims for completed/failure pods": a BindRequest of a pod
    that has Succeeded holds no devices, for its claims nor its extended-resource claim."""
    store = server.store
    seed(store, devices=1)
    store.create(pod_manifest("done", "team", gpus=1, node_name="n1", phase="Succeeded"))
    results = [{"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]
    store.create(
        {
            "apiVersion": "scheduling.run.ai/v1alpha2",
            "kind": "BindRequest",
            "metadata": {"name": "done", "namespace": "default"},
            "spec": {
                "podName": "done",
                "selectedNode": "n1",
                "extendedResourceClaimAllocation": {"allocation": {"devices": {"results": results}}},
            },
        }
    )
    store.create(pod_manifest("next", "team", gpus=1))

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None, binder=False) as live:
            await live.until(lambda: store.try_get("bindrequests", "next", "default") is not None)

    run(body())
    wanted = store.get("bindrequests", "next", "default")["spec"]["extendedResourceClaimAllocation"]
    assert devices(wanted["allocation"]) == ["gpu-0"]
