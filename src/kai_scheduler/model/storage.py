"""Volumes and ConfigMaps as KAI's predicates read them (pkg/scheduler/k8s_internal/predicates/
config_maps.go and volume_binding.go, the latter Kubernetes' VolumeBinding plugin).

* ConfigMaps: a pod needs every ConfigMap it mounts as a volume (or a projected source of one) and every
  one its containers (init, main, ephemeral) read through `envFrom` or an env var's `configMapKeyRef`,
  unless the reference is `optional` or the name starts with the pod's shared-GPU ConfigMap prefix (the
  binder makes those). A missing one: "Missing required configmaps: [a b]".
* PersistentVolumeClaims (`spec.volumes[].persistentVolumeClaim`): a claim that does not exist or is
  being deleted makes the pod unschedulable (`persistentvolumeclaim "x" not found` / `... is being
  deleted`); so does one that is not bound and whose StorageClass binds at once (or that has no class, or
  whose class does not exist): "pod has unbound immediate PersistentVolumeClaims". A bound claim (its
  `volumeName` set) allows only the nodes its PersistentVolume's node affinity selects. An unbound claim
  of a `WaitForFirstConsumer` class allows a node where an available PersistentVolume of its class fits
  it (capacity, access modes, node affinity; one volume per claim), or, failing that, a node its class can
  provision on (a provisioner other than `kubernetes.io/no-provisioner`, and the node within the class'
  `allowedTopologies`).
* `bind_claims` is the binding that follows (Kubernetes' volume binder, run by KAI's binder): each unbound
  claim gets the smallest fitting volume on the node, else a volume provisioned for it there (its node
  affinity: the node's values of the class' allowed-topology keys).

Ephemeral volumes (`spec.volumes[].ephemeral`) and storage capacity (CSIStorageCapacity) are not read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import (
    ConfigMap,
    ConfigMapRef,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    ObjectReference,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeSpec,
    Pod,
    StorageClass,
    VolumeNodeAffinity,
)
from kai_scheduler.model.matching import node_selector_term_matches

NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"
STORAGE: Final = "storage"

# The reasons Kubernetes' VolumeBinding filter gives.
NODE_CONFLICT: Final = "node(s) had volume node affinity conflict"
PV_NOT_EXIST: Final = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"


# --- what a pod needs --------------------------------------------------------------------------------


def required_config_maps(pod: Pod) -> tuple[str, ...]:
    """The ConfigMaps (`namespace/name`, sorted) the pod cannot start without (see the module doc)."""
    spec = pod.spec
    containers = [*spec.init_containers, *spec.containers, *spec.ephemeral_containers]
    refs: list[ConfigMapRef] = []
    if spec.volumes:
        mounted = {mount.name for container in containers for mount in container.volume_mounts}
        for volume in spec.volumes:
            if volume.name not in mounted:
                continue
            if volume.config_map is not None:
                refs.append(volume.config_map)
            if volume.projected is not None:
                refs.extend(s.config_map for s in volume.projected.sources if s.config_map is not None)
    for container in containers:
        for env in container.env:
            if env.value_from is not None and env.value_from.config_map_key_ref is not None:
                refs.append(env.value_from.config_map_key_ref)
        refs.extend(e.config_map_ref for e in container.env_from if e.config_map_ref is not None)
    if not refs:
        return ()
    shared_prefix = pod.metadata.annotations.get(c.SHARED_GPU_CONFIGMAP_ANNOTATION)
    names = {
        ref.name
        for ref in refs
        if not ref.optional and not (shared_prefix is not None and ref.name.startswith(shared_prefix))
    }
    return tuple(sorted(f"{pod.namespace}/{name}" for name in names))


def claim_names(pod: Pod) -> tuple[str, ...]:
    """The PersistentVolumeClaims (`namespace/name`, in volume order, once each) the pod mounts."""
    if not pod.spec.volumes:
        return ()
    names = (v.persistent_volume_claim.claim_name for v in pod.spec.volumes if v.persistent_volume_claim)
    return tuple(dict.fromkeys(f"{pod.namespace}/{name}" for name in names))


# --- the cluster's storage objects ------------------------------------------------------------------


def _request(claim: PersistentVolumeClaim) -> Fraction:
    return claim.spec.resources.effective_requests().get(STORAGE, Fraction(0))


def _capacity(volume: PersistentVolume) -> Fraction:
    return volume.spec.capacity.get(STORAGE, Fraction(0))


def _name(key: str) -> str:
    return key.split("/", 1)[1]


@dataclass(frozen=True, eq=False)
class Storage:
    """ConfigMaps, claims (by `namespace/name`), volumes and classes (by name), as one session reads them."""

    config_maps: frozenset[str] = frozenset()
    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)

    @staticmethod
    def of(
        config_maps: Iterable[ConfigMap] = (),
        claims: Iterable[PersistentVolumeClaim] = (),
        volumes: Iterable[PersistentVolume] = (),
        classes: Iterable[StorageClass] = (),
    ) -> Storage:
        return Storage(
            frozenset(cm.key for cm in config_maps),
            {claim.key: claim for claim in claims},
            {volume.metadata.name: volume for volume in volumes},
            {sc.metadata.name: sc for sc in classes},
        )

    def missing_config_maps(self, needed: Sequence[str]) -> str | None:
        """KAI's ConfigMap predicate: why a pod needing `needed` cannot be scheduled (None: it can)."""
        missing = [_name(key) for key in needed if key not in self.config_maps]
        return f"Missing required configmaps: [{' '.join(missing)}]" if missing else None

    def claims_problem(self, needed: Sequence[str]) -> str | None:
        """VolumeBinding's PreFilter: a claim missing, being deleted, or unbound and bound at once."""
        immediate = False
        for key in needed:
            claim = self.claims.get(key)
            if claim is None:
                return f'persistentvolumeclaim "{_name(key)}" not found'
            if claim.metadata.deletion_timestamp is not None:
                return f'persistentvolumeclaim "{_name(key)}" is being deleted'
            if not claim.spec.volume_name and not self.waits_for_consumer(claim):
                immediate = True
        return "pod has unbound immediate PersistentVolumeClaims" if immediate else None

    def waits_for_consumer(self, claim: PersistentVolumeClaim) -> bool:
        class_name = claim.spec.storage_class_name
        storage_class = self.classes.get(class_name) if class_name else None
        return storage_class is not None and storage_class.volume_binding_mode == "WaitForFirstConsumer"

    # --- per node ---------------------------------------------------------------------------------------

    def bound_conflict(self, needed: Sequence[str], labels: Mapping[str, str], node: str) -> str | None:
        """Why the bound claims' volumes keep the pod off the node (None: they do not)."""
        for key in needed:
            claim = self.claims.get(key)
            if claim is None or not claim.spec.volume_name:
                continue
            volume = self.volumes.get(claim.spec.volume_name)
            if volume is None:
                return PV_NOT_EXIST
            if not volume_fits_node(volume, labels, node):
                return NODE_CONFLICT
        return None

    def unbound_binds(self, needed: Sequence[str], labels: Mapping[str, str], node: str) -> bool:
        """Whether every unbound claim of the pod finds a volume or can be provisioned on the node."""
        return self.choose(needed, labels, node) is not None

    def choose(
        self, needed: Sequence[str], labels: Mapping[str, str], node: str
    ) -> dict[str, PersistentVolume | None] | None:
        """For each unbound claim: the available volume it would bind to on the node (the smallest that
        fits, then by name; one per claim), or None to be provisioned there; None when one can be neither."""
        chosen: dict[str, PersistentVolume | None] = {}
        taken: set[str] = set()
        for key in needed:
            claim = self.claims.get(key)
            if claim is None or claim.spec.volume_name:
                continue
            volume = self._available_volume(key, claim, labels, node, taken)
            if volume is not None:
                taken.add(volume.metadata.name)
                chosen[key] = volume
            elif self._provisions(claim, labels):
                chosen[key] = None
            else:
                return None
        return chosen

    def _available_volume(
        self, key: str, claim: PersistentVolumeClaim, labels: Mapping[str, str], node: str, taken: set[str]
    ) -> PersistentVolume | None:
        wanted, modes = _request(claim), set(claim.spec.access_modes)
        class_name = claim.spec.storage_class_name or ""
        best: PersistentVolume | None = None
        for volume in self.volumes.values():
            ref = volume.spec.claim_ref
            if ref is not None and f"{ref.namespace or 'default'}/{ref.name}" != key:
                continue
            if volume.metadata.name in taken or volume.metadata.deletion_timestamp is not None:
                continue
            if volume.spec.storage_class_name != class_name or _capacity(volume) < wanted:
                continue
            if not modes <= set(volume.spec.access_modes) or not volume_fits_node(volume, labels, node):
                continue
            if best is None or (_capacity(volume), volume.metadata.name) < (
                _capacity(best),
                best.metadata.name,
            ):
                best = volume
        return best

    def _provisions(self, claim: PersistentVolumeClaim, labels: Mapping[str, str]) -> bool:
        storage_class = self.classes.get(claim.spec.storage_class_name or "")
        if storage_class is None or storage_class.provisioner == NO_PROVISIONER:
            return False
        return topology_allows(storage_class, labels)


def volume_fits_node(volume: PersistentVolume, labels: Mapping[str, str], node: str) -> bool:
    """The volume's required node affinity (none: every node)."""
    affinity = volume.spec.node_affinity
    if affinity is None or affinity.required is None:
        return True
    return any(node_selector_term_matches(t, labels, node) for t in affinity.required.node_selector_terms)


def topology_allows(storage_class: StorageClass, labels: Mapping[str, str]) -> bool:
    """`allowedTopologies`: any term whose every expression the node's labels satisfy (none: anywhere)."""
    if not storage_class.allowed_topologies:
        return True
    return any(
        all(labels.get(e.key) in e.values for e in term.match_label_expressions)
        for term in storage_class.allowed_topologies
    )


# --- binding ------------------------------------------------------------------------------------------


def bind_claims(
    storage: Storage, needed: Sequence[str], labels: Mapping[str, str], node: str
) -> list[PersistentVolumeClaim | PersistentVolume]:
    """The claims and volumes to write once a pod is bound to `node`: its unbound claims bound to the
    volumes chosen for them, or to volumes provisioned for them there (see the module doc). Nothing when
    the pod has no unbound claim (or, the scheduler having checked, none can be bound)."""
    chosen = storage.choose(needed, labels, node)
    if not chosen:
        return []
    written: list[PersistentVolumeClaim | PersistentVolume] = []
    for key, volume in chosen.items():
        claim = storage.claims[key]
        ref = ObjectReference(namespace=claim.namespace, name=claim.metadata.name, uid=claim.metadata.uid)
        if volume is None:
            volume = _provisioned(claim, storage.classes[claim.spec.storage_class_name or ""], labels)
        volume = volume.model_copy(update={"spec": volume.spec.model_copy(update={"claim_ref": ref})})
        spec = claim.spec.model_copy(update={"volume_name": volume.metadata.name})
        written += [claim.model_copy(update={"spec": spec}), volume]
    return written


def _provisioned(
    claim: PersistentVolumeClaim, storage_class: StorageClass, labels: Mapping[str, str]
) -> PersistentVolume:
    keys = dict.fromkeys(e.key for t in storage_class.allowed_topologies for e in t.match_label_expressions)
    pinned = [NodeSelectorRequirement(key=k, operator="In", values=[labels[k]]) for k in keys if k in labels]
    affinity = (
        VolumeNodeAffinity(
            required=NodeSelector(node_selector_terms=[NodeSelectorTerm(match_expressions=pinned)])
        )
        if pinned
        else None
    )
    return PersistentVolume(
        metadata=ObjectMeta(name=f"pvc-{claim.namespace}-{claim.metadata.name}"),
        # Constructed: the capacity is a parsed quantity already (what validation would make of text).
        spec=PersistentVolumeSpec.model_construct(
            capacity={STORAGE: _request(claim)},
            storage_class_name=claim.spec.storage_class_name or "",
            access_modes=list(claim.spec.access_modes),
            node_affinity=affinity,
        ),
    )
