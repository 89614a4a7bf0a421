"""DRA against the fake API server: pods with GPU claims are placed, counted toward their queue and bound
(the binder writes each claim's allocation and reservation before the Binding), as KAI does."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import (
    claim_template_manifest,
    device_class_manifest,
    node_manifest,
    pod_manifest,
    queue_manifest,
    resource_claim_manifest,
    resource_slice_manifest,
)
from kai_fakeapi import FakeApiServer, Store

SELECTOR = "device.driver == 'gpu.nvidia.com'"


def seed(store: Store, devices: int) -> None:
    """One node whose GPUs come only from a ResourceSlice of `devices` devices, and queue team."""
    store.create(node_manifest("n1", gpus=0))
    store.create(device_class_manifest("gpu.nvidia.com", SELECTOR))
    store.create(resource_slice_manifest("n1-gpus", "n1", devices))
    store.create(queue_manifest("team", gpu=2, gpu_limit=2))


def claim_pod(store: Store, name: str, claim: str) -> None:
    store.create(pod_manifest(name, "team", claims={"gpu": claim}))


def template_pod(store: Store, name: str) -> None:
    """A pod with a claim from template `one-gpu`, and the claim Kubernetes' resourceclaim controller
    makes for it (this test plays that controller)."""
    store.create(claim_template_manifest("one-gpu"))
    pod = pod_manifest(name, "team", claim_templates={"gpu": "one-gpu"})
    store.create(pod)
    made = resource_claim_manifest(f"{name}-gpu")
    made["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid(store, name), "controller": True}
    ]
    store.create(made)
    store.set_status(
        "pods",
        name,
        {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]},
        "default",
    )


def uid(store: Store, pod: str) -> str:
    return str(store.get("pods", pod, "default")["metadata"]["uid"])


def node_of(store: Store, pod: str) -> str | None:
    node: str | None = store.get("pods", pod, "default")["spec"].get("nodeName")
    return node


def claim(store: Store, name: str) -> dict[str, Any]:
    return store.get("resourceclaims", name, "default")


def devices(obj: dict[str, Any]) -> list[str]:
    allocation = (obj.get("status") or {}).get("allocation") or {}
    return [f"{r['pool']}/{r['device']}" for r in allocation.get("devices", {}).get("results", [])]


def test_claimed_gpus_are_placed_counted_and_bound(server: FakeApiServer) -> None:
    store = server.store
    seed(store, devices=3)
    store.create(resource_claim_manifest("shared", queue="team"))
    store.create(resource_claim_manifest("third", queue="team"))
    claim_pod(store, "a", "shared")
    template_pod(store, "b")
    claim_pod(store, "c", "third")

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None) as live:
            await live.until(lambda: node_of(store, "a") == "n1" and node_of(store, "b") == "n1")
            # Queue team may hold 2 GPUs: the claims' GPUs count, so c waits although a device is free.
            await live.until(lambda: _unschedulable_message(store, "c") is not None)

    run(body())
    request = store.get("bindrequests", "a", "default")
    (allocation,) = request["spec"]["resourceClaimAllocations"]
    assert allocation["name"] == "gpu"
    assert request["spec"]["receivedResourceType"] == "Regular"
    assert request["spec"]["receivedGPU"] == {"count": 0, "portion": "0.00"}
    for pod, name in (("a", "shared"), ("b", "b-gpu")):
        written = claim(store, name)
        assert len(devices(written)) == 1, name
        assert [(r["name"], r["uid"]) for r in written["status"]["reservedFor"]] == [(pod, uid(store, pod))]
        selector = written["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
        assert selector["values"] == ["n1"]
    assert devices(claim(store, "shared")) != devices(claim(store, "b-gpu"))
    assert devices(claim(store, "shared")) == devices({"status": {"allocation": allocation["allocation"]}})
    assert node_of(store, "c") is None and "status" not in claim(store, "third")
    message = _unschedulable_message(store, "c")
    assert message is not None and "OverLimit" in message


def _unschedulable_message(store: Store, pod: str) -> str | None:
    for condition in (store.get("pods", pod, "default").get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or "")
    return None


def test_a_claim_being_bound_keeps_its_devices(server: FakeApiServer) -> None:
    """KAI's assumePendingClaims (and its statement case "Evict then unevict pod in Binding state with
    BindRequest and DRA claim"): while a BindRequest carries a claim's allocation that no binder wrote yet,
    the claim counts as allocated so: the next pod gets the other device."""
    store = server.store
    seed(store, devices=2)
    store.create(resource_claim_manifest("first", queue="team"))
    store.create(resource_claim_manifest("second", queue="team"))
    claim_pod(store, "p1", "first")

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None, binder=False) as live:
            await live.until(lambda: store.try_get("bindrequests", "p1", "default") is not None)
            claim_pod(store, "p2", "second")
            await live.until(lambda: store.try_get("bindrequests", "p2", "default") is not None)

    run(body())
    chosen = [
        devices(
            {
                "status": {
                    "allocation": store.get("bindrequests", p, "default")["spec"]["resourceClaimAllocations"][
                        0
                    ]["allocation"]
                }
            }
        )
        for p in ("p1", "p2")
    ]
    assert chosen[0] != chosen[1] and sorted(chosen) == [["n1/gpu-0"], ["n1/gpu-1"]]
    assert "status" not in claim(store, "first")  # no binder ran: nothing was written to the claims
