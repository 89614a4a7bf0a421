"""A kind the scheduler hands to its `ClusterCache` as a whole set (PodDisruptionBudgets,
NodeResourceTopologies): parsed from its informer once per resourceVersion, and handed on only after an
informer event changed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from kai_scheduler.api.objects import K8sModel
from kai_scheduler.k8s.runtime.client import JsonObject, ResourceKind
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.parsing import by_schema
from kai_scheduler.model.cache import ClusterCache

M = TypeVar("M", bound=K8sModel)


class ObjectsFeed(Generic[M]):
    """Made once per `StateBuilder`; `update` before each cycle. `hand` gives the cache every object."""

    def __init__(
        self,
        informers: InformerSet,
        kind: ResourceKind,
        model: type[M],
        hand: Callable[[ClusterCache, list[M]], None],
    ) -> None:
        self.informer = informers.optional(kind)
        self._models = by_schema(model)
        self._hand = hand
        self._dirty = self.informer is not None

        def changed(*objs: JsonObject) -> None:
            self._dirty = True

        if self.informer is not None:
            self.informer.add_handler(changed, changed, changed)

    def update(self, cache: ClusterCache) -> None:
        """Hand the cache every object of the kind, when any changed since the last update."""
        if not self._dirty or self.informer is None:
            return
        self._dirty = False
        self._hand(cache, self._models.models(self.informer.cache))
