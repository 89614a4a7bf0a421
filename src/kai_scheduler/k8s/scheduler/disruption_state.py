"""The live edge's PodDisruptionBudget feed: the budgets from their informer into the `ClusterCache`
(`ClusterCache.set_disruption_budgets`), for the victim search's preference for victims no budget protects
(`model.disruption`). Their status is the disruption controller's, so the cache takes the allowed
disruptions from it when it is current.

Handed on only after a budget changed (an informer event), each parsed once per resourceVersion
(`object_feed.py`).
"""

from __future__ import annotations

from kai_scheduler.api.objects import PodDisruptionBudget
from kai_scheduler.k8s.runtime.client import PDBS
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.object_feed import ObjectsFeed
from kai_scheduler.model.cache import ClusterCache


class DisruptionBudgetFeed(ObjectsFeed[PodDisruptionBudget]):
    """See the module doc."""

    def __init__(self, informers: InformerSet) -> None:
        super().__init__(informers, PDBS, PodDisruptionBudget, ClusterCache.set_disruption_budgets)
