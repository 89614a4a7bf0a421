"""The live edge's PodDisruptionBudget feed: the budgets from their informer into the `ClusterCache`
(`ClusterCache.set_disruption_budgets`), for the victim search's preference for victims no budget protects
(`model.disruption`). Their status is the disruption controller's, so the cache takes the allowed
disruptions from it when it is current.

Handed on only after a budget changed (an informer event), each parsed once per resourceVersion.
"""

from __future__ import annotations

from kai_scheduler.api.objects import PodDisruptionBudget
from kai_scheduler.k8s.runtime.client import PDBS, JsonObject
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.dra_state import _Models
from kai_scheduler.model.cache import ClusterCache


class DisruptionBudgetFeed:
    """See the module doc. Made once per `StateBuilder`; `update` before each cycle."""

    def __init__(self, informers: InformerSet) -> None:
        self.informer = informers.optional(PDBS)
        self._budgets = _Models(PodDisruptionBudget)
        self._dirty = self.informer is not None

        def changed(*objs: JsonObject) -> None:
            self._dirty = True

        if self.informer is not None:
            self.informer.add_handler(changed, changed, changed)

    def update(self, cache: ClusterCache) -> None:
        """Hand the cache every budget, when any changed since the last update."""
        if not self._dirty or self.informer is None:
            return
        self._dirty = False
        cache.set_disruption_budgets(self._budgets.parse_all(self.informer.cache))
