"""Volume binding as Kubernetes' VolumeBinding plugin decides it for KAI (model/storage.py): the pre-filter's
reasons, the nodes claims allow, and the binding that follows a bind."""

from __future__ import annotations

from typing import Any

from kai_scheduler.api.objects import PersistentVolume, PersistentVolumeClaim, StorageClass
from kai_scheduler.model.storage import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    Storage,
    bind_claims,
)

ZONE = "topology.kubernetes.io/zone"


def claim(name: str, storage_class: str | None, size: str = "1Gi", **spec: Any) -> PersistentVolumeClaim:
    body: dict[str, Any] = {
        "resources": {"requests": {"storage": size}},
        "accessModes": ["ReadWriteOnce"],
        **spec,
    }
    if storage_class is not None:
        body["storageClassName"] = storage_class
    return PersistentVolumeClaim.model_validate({"metadata": {"name": name}, "spec": body})


def volume(
    name: str, storage_class: str, size: str, *, node: str | None = None, **spec: Any
) -> PersistentVolume:
    body: dict[str, Any] = {
        "capacity": {"storage": size},
        "storageClassName": storage_class,
        "accessModes": ["ReadWriteOnce"],
        **spec,
    }
    if node is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        body["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return PersistentVolume.model_validate({"metadata": {"name": name}, "spec": body})


def storage_class(
    name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "csi", **more: Any
) -> StorageClass:
    return StorageClass.model_validate(
        {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode, **more}
    )


CLASSES = [
    storage_class("wffc"),
    storage_class("local", provisioner="kubernetes.io/no-provisioner"),
    storage_class(
        "zonal", allowedTopologies=[{"matchLabelExpressions": [{"key": ZONE, "values": ["east"]}]}]
    ),
    storage_class("now", mode="Immediate"),
]


def test_the_pre_filter_refuses_missing_deleted_and_unbound_immediate_claims() -> None:
    deleting = claim("going", "wffc").model_copy(
        update={
            "metadata": claim("going", "wffc").metadata.model_copy(
                update={"deletion_timestamp": "2024-01-01T00:00:00Z"}
            )
        }
    )
    storage = Storage.of(
        claims=[
            claim("now-1", "now"),
            claim("none", None),
            claim("ghost", "no-such-class"),
            claim("w", "wffc"),
            deleting,
        ],
        classes=CLASSES,
    )
    assert storage.claims_problem(["default/missing"]) == 'persistentvolumeclaim "missing" not found'
    assert storage.claims_problem(["default/going"]) == 'persistentvolumeclaim "going" is being deleted'
    for name in ("now-1", "none", "ghost"):  # Immediate, no class, or a class that does not exist
        assert (
            storage.claims_problem([f"default/{name}"]) == "pod has unbound immediate PersistentVolumeClaims"
        )
    assert storage.claims_problem(["default/w"]) is None


def test_bound_claims_follow_their_volumes_node_affinity() -> None:
    storage = Storage.of(
        claims=[claim("a", "wffc", volumeName="pv-a"), claim("b", "wffc", volumeName="pv-gone")],
        volumes=[volume("pv-a", "wffc", "1Gi", node="n1")],
        classes=CLASSES,
    )
    assert storage.bound_conflict(["default/a"], {}, "n1") is None
    assert storage.bound_conflict(["default/a"], {}, "n2") == NODE_CONFLICT
    assert storage.bound_conflict(["default/b"], {}, "n1") == PV_NOT_EXIST
    assert BIND_CONFLICT  # the third reason is the unbound claims'


def test_unbound_claims_take_the_smallest_fitting_volume_or_are_provisioned_where_allowed() -> None:
    storage = Storage.of(
        claims=[claim("x", "local", "5Gi"), claim("y", "local", "5Gi"), claim("z", "zonal")],
        volumes=[
            volume("big", "local", "100Gi", node="n1"),
            volume("small", "local", "10Gi", node="n1"),
            volume("tiny", "local", "1Gi", node="n1"),  # too small
            volume("other", "local", "10Gi", node="n2"),
            volume("taken", "local", "10Gi", claimRef={"namespace": "default", "name": "someone"}),
        ],
        classes=CLASSES,
    )
    assert storage.choose(["default/x"], {}, "n1") == {"default/x": storage.volumes["small"]}
    # Two claims on one node take two volumes.
    both = storage.choose(["default/x", "default/y"], {}, "n1")
    assert both is not None and [v.metadata.name for v in both.values() if v] == ["small", "big"]
    assert storage.choose(["default/x"], {}, "n3") is None  # no volume there, and none is provisioned
    assert storage.choose(["default/z"], {ZONE: "east"}, "n1") == {"default/z": None}  # provisioned
    assert storage.choose(["default/z"], {ZONE: "west"}, "n1") is None  # outside allowedTopologies


def test_binding_writes_the_claim_and_its_volume() -> None:
    storage = Storage.of(
        claims=[claim("x", "local", "5Gi"), claim("z", "zonal", "3Gi")],
        volumes=[volume("small", "local", "10Gi", node="n1")],
        classes=CLASSES,
    )
    written = bind_claims(storage, ["default/x", "default/z"], {ZONE: "east"}, "n1")
    claims = {o.metadata.name: o for o in written if isinstance(o, PersistentVolumeClaim)}
    volumes = {o.metadata.name: o for o in written if isinstance(o, PersistentVolume)}
    assert claims["x"].spec.volume_name == "small"
    assert volumes["small"].spec.claim_ref is not None and volumes["small"].spec.claim_ref.name == "x"
    provisioned = volumes[claims["z"].spec.volume_name]
    assert provisioned.spec.storage_class_name == "zonal"
    affinity = provisioned.spec.node_affinity
    assert affinity is not None and affinity.required is not None
    [term] = affinity.required.node_selector_terms
    assert [(e.key, e.values) for e in term.match_expressions] == [(ZONE, ["east"])]
    # Once written, the volumes are the claims': another claim finds none.
    after = Storage.of(
        claims=[*claims.values(), claim("w", "local", "5Gi")], volumes=list(volumes.values()), classes=CLASSES
    )
    assert after.choose(["default/w"], {}, "n1") is None
    assert after.bound_conflict(["default/z"], {ZONE: "west"}, "n2") == NODE_CONFLICT
