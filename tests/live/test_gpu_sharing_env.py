"""A fractional-GPU pod learns its GPU: the mutating webhook points its container's environment at the
shared-GPU ConfigMaps, the binder writes them (with the UUID the reservation pod published) before it
binds the pod, and the references resolve as a kubelet resolves them.

The fake API server calls no webhooks: each pod goes through the mutating webhook's review function (the
one the HTTPS server routes to) and then the validating one, as the API server would, and is created with
the patch applied."""

from __future__ import annotations

import copy
import re
from functools import partial
from typing import Any

from live_support import Live, mutated, pod_review, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store
from kai_scheduler.k8s.admission.review import MUTATE_POD_PATH, VALIDATE_POD_PATH
from kai_scheduler.k8s.admission.server import webhook_routes
from kai_scheduler.k8s.binder.reservations import RESERVED_GPU_ANNOTATION

PREFIX_ANNOTATION = "runai/shared-gpu-configmap"
RESERVATIONS = "kai-resource-reservation"


def admitted(manifest: dict[str, Any]) -> dict[str, Any]:
    """The pod after the admission chain: mutated, then validated."""
    routes = webhook_routes()
    review = pod_review(manifest)
    patched = mutated(review, routes[MUTATE_POD_PATH])
    validated = routes[VALIDATE_POD_PATH]({**review, "request": {**review["request"], "object": patched}})
    assert validated["response"]["allowed"], validated
    return patched


def container_env(store: Store, namespace: str, container: dict[str, Any]) -> dict[str, str]:
    """The environment a kubelet gives the container: its `envFrom` ConfigMaps in order, then its `env`
    entries, which win. A ConfigMap or key that does not exist fails (the container would not start)."""

    def data(name: str) -> dict[str, str]:
        config = store.try_get("configmaps", name, namespace)
        assert config is not None, f"the container refers to ConfigMap {name}, which does not exist"
        return dict(config.get("data") or {})

    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        env.update(data(source["configMapRef"]["name"]))
    for entry in container.get("env") or []:
        if "valueFrom" not in entry:
            env[entry["name"]] = entry.get("value", "")
            continue
        ref = entry["valueFrom"]["configMapKeyRef"]
        values = data(ref["name"])
        assert ref["key"] in values, f"ConfigMap {ref['name']} has no key {ref['key']}"
        env[entry["name"]] = values[ref["key"]]
    return env


def configmap_creates_before_binding(server: FakeApiServer, pod: str) -> int:
    count = 0
    for record in server.requests():
        if record.resource == "pods" and record.subresource == "binding" and record.name == pod:
            return count
        if record.resource == "configmaps" and record.verb == "create" and record.code == 201:
            count += 1
    raise AssertionError(f"{pod} was never bound")


def bound_by_binder(live: Live, name: str) -> bool:
    return live.binder.stats.outcomes.get(f"default/{name}") == "Succeeded"


def test_a_fractional_pod_gets_its_gpu_through_the_webhook_and_the_binder(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=2, gpu_memory=40000))
    store.create(queue_manifest("q"))

    # A named pod whose GPU goes to its second container, `main` (a sidecar comes first).
    named = pod_manifest("frac", fraction=0.5, annotations={"gpu-fraction-container-name": "main"})
    named["spec"]["containers"].insert(0, {"name": "logger", "image": "fluentbit"})
    named["spec"]["containers"][1]["env"] = [{"name": "EPOCHS", "value": "3"}]
    # A pod created from generateName (no name at admission), asking for GPU memory.
    generated = pod_manifest("unused", gpu_memory=10000)
    del generated["metadata"]["name"]
    generated["metadata"]["generateName"] = "sweep-"

    async def body() -> list[dict[str, Any]]:
        pods = []
        async with Live(server) as live:
            # One at a time, so that each bind can be checked to come after its pod's ConfigMaps.
            for manifest in (named, generated):
                created = store.create(admitted(manifest))
                name = created["metadata"]["name"]
                await live.until(partial(bound_by_binder, live, name))
                pods.append(store.get("pods", name, "default"))
        return pods

    frac, sweep = run(body(), timeout=20.0)
    assert re.fullmatch(r"sweep-[a-z0-9]{5}", sweep["metadata"]["name"])
    for index, (pod, target) in enumerate(((frac, 1), (sweep, 0))):
        meta, spec = pod["metadata"], pod["spec"]
        prefix = meta["annotations"][PREFIX_ANNOTATION]
        base = "frac" if pod is frac else "sweep"
        assert re.fullmatch(rf"{base}-[a-z0-9]{{7}}", prefix), prefix
        # The GPU's UUID, as the group's reservation pod published it (FakeGpuNodes: GPU-<node>-<i>).
        group = meta["labels"]["runai-gpu-group"]
        [reservation] = store.list("pods", RESERVATIONS, labels=f"runai-gpu-group={group}")
        device = reservation["metadata"]["annotations"][RESERVED_GPU_ANNOTATION]
        assert re.fullmatch(rf"GPU-{spec['nodeName']}-\d", device)

        env = container_env(store, "default", spec["containers"][target])
        portion = "0.50" if pod is frac else "0.25"  # 10000 of the node's 40000 MiB
        assert {k: env[k] for k in ("NVIDIA_VISIBLE_DEVICES", "GPU_PORTION", "RUNAI_NUM_OF_GPUS")} == {
            "NVIDIA_VISIBLE_DEVICES": device,
            "GPU_PORTION": portion,
            "RUNAI_NUM_OF_GPUS": portion,
        }
        if pod is frac:
            assert env["EPOCHS"] == "3"
            assert container_env(store, "default", spec["containers"][0]) == {}  # the sidecar: no GPU

        # The ConfigMaps KAI names, owned by the pod, written before the pod was bound; not `<pod>-gpu`.
        for name in (f"{prefix}-{target}", f"{prefix}-{target}-evar"):
            owner = store.get("configmaps", name, "default")["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", meta["name"], meta["uid"])
        assert store.try_get("configmaps", f"{meta['name']}-gpu", "default") is None
        assert configmap_creates_before_binding(server, meta["name"]) == 2 * (index + 1)


def test_a_copied_pod_does_not_take_another_pods_gpu_env(server: FakeApiServer) -> None:
    """A pod created from another's admitted manifest (`kubectl get -o yaml`, renamed) carries the same
    prefix: the binder refuses to take over the ConfigMaps of the pod that still runs, and says why."""
    store = server.store
    store.create(node_manifest("n1", gpus=2, gpu_memory=40000))
    store.create(queue_manifest("q"))
    original = admitted(pod_manifest("frac", fraction=0.5))

    async def body() -> None:
        async with Live(server) as live:
            store.create(copy.deepcopy(original))
            await live.until(partial(bound_by_binder, live, "frac"))
            copied = copy.deepcopy(original)
            copied["metadata"]["name"] = "frac-copy"
            store.create(admitted(copied))

            def refused() -> bool:
                request = store.try_get("bindrequests", "frac-copy", "default")
                return "holds the GPU environment of pod default/frac" in str(
                    ((request or {}).get("status") or {}).get("reason")
                )

            await live.until(refused)

    run(body(), timeout=20.0)
    prefix = original["metadata"]["annotations"][PREFIX_ANNOTATION]
    frac = store.get("pods", "frac", "default")
    for name in (f"{prefix}-0", f"{prefix}-0-evar"):
        assert (
            store.get("configmaps", name, "default")["metadata"]["ownerReferences"][0]["uid"]
            == (frac["metadata"]["uid"])
        )
    assert not store.get("pods", "frac-copy", "default")["spec"].get("nodeName")
