"""GPU reservation pods (the binder's `reservation`, on by default): one per shared GPU, its published GPU
UUID in the pod's ConfigMap, left out of the ClusterState, removed when no pod holds the GPU any more."""

from __future__ import annotations

from typing import Any

import pytest
from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.k8s.binder.reservations import RESERVED_GPU_ANNOTATION

NAMESPACE = "kai-resource-reservation"


def reservations(store: Store) -> list[dict[str, Any]]:
    return store.list("pods", NAMESPACE)


def test_reservation_pod_lifecycle(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=2, gpu_memory=40000))
    store.create(queue_manifest("q"))

    async def body() -> None:
        # No fake GPU nodes: the test plays the reservation pod itself.
        async with Live(server, gpus=False) as live:
            store.create(pod_manifest("frac", fraction=0.5))
            await live.until(lambda: len(reservations(store)) == 1)
            reservation = reservations(store)[0]
            assert not store.get("pods", "frac")["spec"].get("nodeName")  # waits for the reservation
            # A reservation pod is not a pod of the cluster state (not counted as another scheduler's).
            reservation_key = f"{NAMESPACE}/{reservation['metadata']['name']}"
            await live.until(lambda: reservation_key in live.informers.pods.cache)
            state = live.loop.states.build()
            assert reservation_key not in state.pods
            assert [p.pod.metadata.namespace for p in state.state.pods] == ["default"]
            # Play the reservation pod: publish the GPU's UUID.
            store.patch(
                "pods",
                reservation["metadata"]["name"],
                {"metadata": {"annotations": {RESERVED_GPU_ANNOTATION: "GPU-1234"}}},
                namespace=NAMESPACE,
            )
            await live.until(lambda: store.get("pods", "frac")["spec"].get("nodeName") == "n1")
            config = store.get("configmaps", "frac-gpu")
            assert config["data"]["NVIDIA_VISIBLE_DEVICES"] == "GPU-1234"
            frac = store.get("pods", "frac")
            group = frac["metadata"]["labels"]["runai-gpu-group"]

            meta, spec = reservation["metadata"], reservation["spec"]
            assert (
                meta["name"].startswith("gpu-reservation-n1-")
                and len(meta["name"]) == len("gpu-reservation-n1-") + 5
            )
            assert meta["labels"] == {"app": "kai-resource-reservation", "runai-gpu-group": group}
            assert meta["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
            assert spec["nodeName"] == "n1" and spec["runtimeClassName"] == "nvidia"
            assert spec["serviceAccountName"] == "kai-resource-reservation"
            container = spec["containers"][0]
            assert container["command"] == ["kai-scheduler", "reserve"]
            assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]} == {
                "POD_NAME": "metadata.name",
                "POD_NAMESPACE": "metadata.namespace",
            }
            resources = spec["containers"][0]["resources"]
            assert resources["requests"]["nvidia.com/gpu"] in ("1", 1)
            assert resources["limits"]["nvidia.com/gpu"] in ("1", 1)
            await live.until(lambda: live.binder.stats.outcomes.get("default/frac") == "Succeeded")

            # The pod goes: its GPU is free, and the sweep removes the reservation pod.
            store.delete("pods", "frac", grace_period_seconds=0)
            await live.until(lambda: reservations(store) == [], timeout=4.0)

    run(body(), timeout=8.0)
    assert server.requests(resource="namespaces", verb="create") == []  # the namespace is the chart's


@pytest.mark.refusals_expected
def test_without_its_namespace_a_reservation_pod_fails_the_bind_saying_so(server: FakeApiServer) -> None:
    """The binder does not create the reservation namespace (the chart does): when it is missing, so is the
    chart's Role there that lets the binder create pods in it, and the API server's refusal, naming the
    namespace, is the BindRequest's failure reason and the pod's FailedBinding event."""
    store = server.store
    store.create(node_manifest("n1", gpus=1, gpu_memory=40000))
    store.create(queue_manifest("q"))

    failures: list[str] = []

    def seen(_: dict[str, Any], request: dict[str, Any]) -> None:
        if (request.get("status") or {}).get("phase") == "Failed":
            failures.append(request["status"]["reason"])

    async def body() -> None:
        async with Live(server, gpus=False) as live:
            store.delete("namespaces", NAMESPACE)
            live.informers.bind_requests.add_handler(on_update=seen)
            store.create(pod_manifest("half", fraction=0.5))
            await live.until(lambda: bool(failures))

    run(body(), timeout=15.0)
    reason = failures[0]
    refused = f'cannot create resource "pods" in API group "" in the namespace "{NAMESPACE}"'
    assert reason.startswith("cannot create the reservation pod for GPU group ") and refused in reason
    assert "the chart makes the namespace and the binder's Role there" in reason
    failed = [e for e in store.list("events", "default") if e["reason"] == "FailedBinding"]
    assert failed and refused in failed[0]["message"]
    assert reservations(store) == [] and server.requests(resource="namespaces", verb="create") == []
    assert {(r.verb, r.resource, r.namespace) for r in server.forbidden()} == {("create", "pods", NAMESPACE)}


def test_pods_sharing_a_gpu_get_one_reservation_pod(server: FakeApiServer) -> None:
    """Pods placed on one shared GPU in the same cycle are bound concurrently; the GPU still gets exactly
    one reservation pod, and every pod gets its UUID."""
    store = server.store
    store.create(node_manifest("n1", gpus=1, gpu_memory=40000))
    store.create(queue_manifest("q"))
    names = [f"quarter-{i}" for i in range(4)]
    for name in names:
        store.create(pod_manifest(name, fraction=0.25))

    async def body() -> None:
        async with Live(server) as live:
            await live.until(
                lambda: all(live.binder.stats.outcomes.get(f"default/{n}") == "Succeeded" for n in names)
            )

    run(body(), timeout=15.0)
    [reservation] = reservations(store)
    uuid = reservation["metadata"]["annotations"][RESERVED_GPU_ANNOTATION]
    assert {store.get("configmaps", f"{n}-gpu")["data"]["NVIDIA_VISIBLE_DEVICES"] for n in names} == {uuid}


def test_with_cdi_the_gpu_is_named_as_a_cdi_device(server: FakeApiServer) -> None:
    """KAI's --cdi-enabled: NVIDIA_VISIBLE_DEVICES names the reserved GPU as a CDI device."""
    store = server.store
    store.create(node_manifest("n1", gpus=1, gpu_memory=40000))
    store.create(queue_manifest("q"))

    async def body() -> None:
        async with Live(server) as live:
            live.binder.cdi = True
            store.create(pod_manifest("half", fraction=0.5))
            await live.until(lambda: live.binder.stats.outcomes.get("default/half") == "Succeeded")

    run(body(), timeout=15.0)
    [reservation] = reservations(store)
    uuid = reservation["metadata"]["annotations"][RESERVED_GPU_ANNOTATION]
    data = store.get("configmaps", "half-gpu")["data"]
    assert data["NVIDIA_VISIBLE_DEVICES"] == f"k8s.device-plugin.nvidia.com/gpu={uuid}"
