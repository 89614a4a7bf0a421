"""`ShardedCache`: the whole cluster's cache that hands every delta on to one cache per scheduling shard.

The simulator schedules every shard of its input each cycle, each on its own view (`ClusterCache` with a
`Partition`: the shard's nodes, queues and PodGroups), as KAI's schedulers each keep their own informer
cache of one cluster. The simulated cluster changes one cache, this one, which keeps the whole cluster
(for the result document) and hands each change to every shard's cache, which keeps what is its own.
Which methods are changes is said once, where they are written (`model.cache.deltas`); what is truly
the shards' own (one pool label, shared pod derivations) is written out here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import wraps

from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.cache.deltas import deltas_of
from kai_scheduler.model.partition import Partition


class ShardedCache(ClusterCache):
    """The whole cluster (no partition), and `shards`: shard name -> that shard's cache. Every delta of
    `ClusterCache` changes this cache, then each shard's."""

    def __init__(self, partitions: Mapping[str, Partition]) -> None:
        super().__init__()
        self.shards = {name: ClusterCache(partition) for name, partition in partitions.items()}
        # The shards share what a pod asks for: it does not depend on the partition.
        for cache in self.shards.values():
            cache.derivations = self.derivations
        self._label_key = next((p.label_key for p in partitions.values()), super().pool_label_key)

    @property
    def pool_label_key(self) -> str:
        return self._label_key  # the shards' (they share one)


def _handed_on(name: str) -> Callable[..., None]:
    whole: Callable[..., None] = getattr(ClusterCache, name)

    @wraps(whole)
    def method(self: ShardedCache, *args: object, **kwargs: object) -> None:
        # An iterator (a generator of nodes, say) is read once, so every cache gets the same list of it.
        args = tuple(list(arg) if isinstance(arg, Iterator) else arg for arg in args)
        whole(self, *args, **kwargs)
        for cache in self.shards.values():
            getattr(cache, name)(*args, **kwargs)

    return method


for _name in deltas_of(ClusterCache):
    setattr(ShardedCache, _name, _handed_on(_name))
