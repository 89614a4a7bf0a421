"""The binder's volume step, as KAI's binder runs Kubernetes' volume binder before binding a pod
(`volumebinding` PreBind): each of the pod's unbound `WaitForFirstConsumer` claims is bound on the chosen
node, to the smallest available PersistentVolume that fits it there (the volume's `spec.claimRef` is
written; the PV controller completes the binding) or, failing one, left to its class' provisioner on that
node (the claim's `volume.kubernetes.io/selected-node` annotation). The choice is `model.storage`'s, on
the objects as the API server has them now. Unlike Kubernetes, the binder does not wait for the claims to
be bound before binding the pod (the kubelet waits for the volumes).
"""

from __future__ import annotations

from typing import Final

from pydantic import ValidationError

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import PersistentVolume, PersistentVolumeClaim, Pod, StorageClass
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import (
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    ApiStatusError,
    JsonObject,
    KubeClient,
)
from kai_scheduler.model.storage import BIND_CONFLICT, Storage, claim_names

SELECTED_NODE_ANNOTATION: Final = "volume.kubernetes.io/selected-node"

# The pod's claims, every volume and class, the chosen node's labels; then a claim's selected node or a
# volume's claimRef.
ACCESS = (
    access(PERSISTENT_VOLUME_CLAIMS, "get", "patch"),
    access(PERSISTENT_VOLUMES, "list", "patch"),
    access(STORAGE_CLASSES, "list"),
    access(NODES, "get"),
)


def mounts_claims(pod: JsonObject) -> bool:
    return any("persistentVolumeClaim" in v for v in (pod.get("spec") or {}).get("volumes") or [])


async def bind_volumes(client: KubeClient, pod: JsonObject, node: str) -> str | None:
    """Bind the pod's claims that wait for it on `node`; None when done (or nothing to do), else why not."""
    try:
        needed = claim_names(Pod.model_validate(pod))
    except ValidationError as error:
        return f"cannot read the pod's volumes: {error.errors()[0]['msg']}"
    claims = []
    for key in needed:
        namespace, name = key.split("/", 1)
        try:
            claims.append(
                PersistentVolumeClaim.model_validate(
                    await client.get(PERSISTENT_VOLUME_CLAIMS, name, namespace)
                )
            )
        except ApiStatusError as error:
            if error.code == 404:
                return f'persistentvolumeclaim "{name}" not found'
            raise
    if all(claim.spec.volume_name for claim in claims):
        return None
    volumes, _ = await client.list_objects(PERSISTENT_VOLUMES)
    classes, _ = await client.list_objects(STORAGE_CLASSES)
    storage = Storage.of(
        claims=claims,
        volumes=[PersistentVolume.model_validate(v) for v in volumes],
        classes=[StorageClass.model_validate(sc) for sc in classes],
    )
    node_obj = await client.get(NODES, node)
    labels = {c.HOSTNAME_LABEL: node, **((node_obj.get("metadata") or {}).get("labels") or {})}
    chosen = storage.choose(needed, labels, node)
    if chosen is None:
        return f"volume binding failed on node {node}: {BIND_CONFLICT}"
    for key, volume in chosen.items():
        claim = storage.claims[key]
        if volume is None:
            annotations = {SELECTED_NODE_ANNOTATION: node}
            patch: JsonObject = {"metadata": {"annotations": annotations}}
            await client.patch(PERSISTENT_VOLUME_CLAIMS, claim.metadata.name, patch, claim.namespace)
            continue
        ref = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": claim.namespace,
            "name": claim.metadata.name,
            "uid": claim.metadata.uid,
        }
        await client.patch(PERSISTENT_VOLUMES, volume.metadata.name, {"spec": {"claimRef": ref}})
    return None
