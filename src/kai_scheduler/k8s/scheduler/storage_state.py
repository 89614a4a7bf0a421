"""The live edge's ConfigMap and storage feed: ConfigMaps, PersistentVolumeClaims, PersistentVolumes and
StorageClasses from the informers into the `ClusterCache` (`ClusterCache.set_storage`), as KAI's scheduler
cache lists them for its ConfigMap and VolumeBinding predicates (`model.storage`).

Handed on only after one of them changed (an informer event), each object parsed once per
resourceVersion (`parsing.Parsed`); a cluster whose scheduler may not list them (an older chart's
ClusterRole) hands on none, and pods that need a ConfigMap or a claim then wait, saying which.
"""

from __future__ import annotations

from kai_scheduler.api.objects import ConfigMap, PersistentVolume, PersistentVolumeClaim, StorageClass
from kai_scheduler.k8s.runtime.client import (
    CONFIG_MAPS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    JsonObject,
    ResourceKind,
)
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.parsing import by_schema
from kai_scheduler.model.cache import ClusterCache


class StorageFeed:
    """See the module doc. Made once per `StateBuilder`; `update` before each cycle."""

    def __init__(self, informers: InformerSet) -> None:
        self.informers = informers
        self._config_maps = by_schema(ConfigMap)
        self._claims = by_schema(PersistentVolumeClaim)
        self._volumes = by_schema(PersistentVolume)
        self._classes = by_schema(StorageClass)
        self._dirty = False

        def changed(*objs: JsonObject) -> None:
            self._dirty = True

        for kind in (CONFIG_MAPS, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES):
            informer = informers.optional(kind)
            if informer is not None:
                informer.add_handler(changed, changed, changed)

    def update(self, cache: ClusterCache) -> None:
        """Hand the cache every such object, when any changed since the last update."""
        if not self._dirty:
            return
        self._dirty = False
        cache.set_storage(
            self._config_maps.models(self._cache(CONFIG_MAPS)),
            self._claims.models(self._cache(PERSISTENT_VOLUME_CLAIMS)),
            self._volumes.models(self._cache(PERSISTENT_VOLUMES)),
            self._classes.models(self._cache(STORAGE_CLASSES)),
        )

    def _cache(self, kind: ResourceKind) -> dict[str, JsonObject]:
        informer = self.informers.optional(kind)
        return informer.cache if informer is not None else {}
