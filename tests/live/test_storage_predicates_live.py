"""KAI's ConfigMap, volume-binding and MaxNodePoolResources predicates in live mode, against the fake API
server: the scheduler watches ConfigMaps, claims, volumes and classes (storage_state.py), a pod waits with
KAI's words until what it needs exists, and the binder binds a WaitForFirstConsumer claim on the node it
chose (volume_binding.py) before binding the pod."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer

ZONE = "topology.kubernetes.io/zone"


def pod_scheduled_message(server: FakeApiServer, name: str) -> str | None:
    conditions = (server.store.get("pods", name).get("status") or {}).get("conditions") or []
    found = next((cond for cond in conditions if cond.get("type") == "PodScheduled"), None)
    return None if found is None else str(found.get("message"))


def node_name(server: FakeApiServer, name: str) -> str | None:
    return (server.store.get("pods", name).get("spec") or {}).get("nodeName")


def zoned(name: str, zone: str) -> dict[str, Any]:
    manifest = node_manifest(name, gpus=0)
    manifest["metadata"].setdefault("labels", {})[ZONE] = zone
    return manifest


def test_pods_wait_for_their_config_maps_and_claims_then_bind_where_the_claim_can(
    server: FakeApiServer,
) -> None:
    store = server.store
    store.create(zoned("a-east", "east"))
    store.create(zoned("b-west", "west"))
    store.create(queue_manifest("q"))
    reads = pod_manifest("reads-config")
    reads["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    store.create(reads)
    wants = pod_manifest("wants-volume")
    wants["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    store.create(wants)
    store.create(pod_manifest("too-big", cpu="500"))

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None) as live:
            await live.until(lambda: pod_scheduled_message(server, "reads-config") is not None)
            await live.until(lambda: pod_scheduled_message(server, "wants-volume") is not None)
            await live.until(lambda: pod_scheduled_message(server, "too-big") is not None)
            assert "Missing required configmaps: [settings]" in str(
                pod_scheduled_message(server, "reads-config")
            )
            assert 'persistentvolumeclaim "data" not found' in str(
                pod_scheduled_message(server, "wants-volume")
            )
            assert (
                "Max CPU resources available in a single node in the default node-pool is topped at"
                in str(pod_scheduled_message(server, "too-big"))
            )

            store.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "settings", "namespace": "default"},
                }
            )
            await live.until(lambda: node_name(server, "reads-config") is not None)

            store.create(
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "StorageClass",
                    "metadata": {"name": "west-ssd"},
                    "provisioner": "ebs.csi.aws.com",
                    "volumeBindingMode": "WaitForFirstConsumer",
                    "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["west"]}]}],
                }
            )
            store.create(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data", "namespace": "default"},
                    "spec": {
                        "storageClassName": "west-ssd",
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            )
            await live.until(lambda: node_name(server, "wants-volume") is not None)

    run(body(), timeout=20.0)
    # Provisioned where the class allows (west), not on the first node by name; the claim says where.
    assert node_name(server, "wants-volume") == "b-west"
    claim = server.store.get("persistentvolumeclaims", "data")
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "b-west"
    assert node_name(server, "too-big") is None


def test_the_binder_binds_a_local_volume_on_the_chosen_node(server: FakeApiServer) -> None:
    store = server.store
    store.create(zoned("a-east", "east"))
    store.create(zoned("b-west", "west"))
    store.create(queue_manifest("q"))
    store.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    for name, node, size in (("big-b", "b-west", "100Gi"), ("small-b", "b-west", "10Gi")):
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        store.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": size},
                    "storageClassName": "local",
                    "accessModes": ["ReadWriteOnce"],
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                },
            }
        )
    store.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "scratch", "namespace": "default"},
            "spec": {
                "storageClassName": "local",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "5Gi"}},
            },
        }
    )
    pod = pod_manifest("local-user")
    pod["spec"]["volumes"] = [{"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}}]
    store.create(pod)

    async def body() -> None:
        async with Live(server, gpus=False, reservation=None) as live:
            await live.until(lambda: node_name(server, "local-user") is not None)

    run(body(), timeout=20.0)
    assert node_name(server, "local-user") == "b-west"
    claim = server.store.get("persistentvolumeclaims", "scratch")
    ref = server.store.get("persistentvolumes", "small-b")["spec"]["claimRef"]  # the smallest that fits
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "scratch", claim["metadata"]["uid"])
    assert not server.store.get("persistentvolumes", "big-b")["spec"].get("claimRef")
