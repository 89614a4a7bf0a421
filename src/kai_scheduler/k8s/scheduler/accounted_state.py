"""The live edge's AccountedResource feed: the cluster's AccountedResources from their informer into the
`ClusterCache` (`ClusterCache.set_accounted_resources`), for the queues' accounted limits
(`plugins.accounted_limits`). On a cluster without their CRD the informer finds the kind not served and
stays empty: no queue is limited by them, as KAI's phase-1 design has it.

Handed on only after one changed (an informer event), each parsed once per resourceVersion
(`object_feed.py`).
"""

from __future__ import annotations

from kai_scheduler.api.objects import AccountedResource
from kai_scheduler.k8s.runtime.client import ACCOUNTED_RESOURCES
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.object_feed import ObjectsFeed
from kai_scheduler.model.cache import ClusterCache


class AccountedResourceFeed(ObjectsFeed[AccountedResource]):
    """See the module doc."""

    def __init__(self, informers: InformerSet) -> None:
        super().__init__(
            informers, ACCOUNTED_RESOURCES, AccountedResource, ClusterCache.set_accounted_resources
        )
