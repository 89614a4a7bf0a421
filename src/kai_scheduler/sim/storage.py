"""ConfigMaps and storage in the simulated cluster: what the input holds, and the volume binding that
follows a bind (Kubernetes' volume binder, which KAI's binder runs): a pod's unbound
`WaitForFirstConsumer` claims are bound to the volumes the scheduler's filter found on its node, or to
volumes provisioned for them there (`model.storage.bind_claims`). The cache is told only when something
changes, so a cluster without claims does nothing here."""

from __future__ import annotations

from dataclasses import dataclass, field

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import (
    ConfigMap,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
)
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.storage import Storage, bind_claims, claim_names


@dataclass
class SimStorage:
    config_maps: list[ConfigMap] = field(default_factory=list)
    claims: list[PersistentVolumeClaim] = field(default_factory=list)
    volumes: list[PersistentVolume] = field(default_factory=list)
    classes: list[StorageClass] = field(default_factory=list)

    def hand_to(self, cache: ClusterCache) -> None:
        cache.set_storage(self.config_maps, self.claims, self.volumes, self.classes)

    def bound(self, pod: Pod, node: Node, cache: ClusterCache) -> None:
        """`pod` was bound to `node`: bind its claims that wait for it."""
        needed = claim_names(pod)
        if not needed or not self.claims:
            return
        storage = Storage.of(self.config_maps, self.claims, self.volumes, self.classes)
        # The labels the scheduler saw (the kubelet's hostname label included).
        labels = {c.HOSTNAME_LABEL: node.metadata.name, **node.metadata.labels}
        written = bind_claims(storage, needed, labels, node.metadata.name)
        if not written:
            return
        claims = {claim.key: claim for claim in self.claims}
        volumes = {volume.metadata.name: volume for volume in self.volumes}
        for obj in written:
            if isinstance(obj, PersistentVolumeClaim):
                claims[obj.key] = obj
            else:
                volumes[obj.metadata.name] = obj
        self.claims, self.volumes = list(claims.values()), list(volumes.values())
        self.hand_to(cache)
