"""`ShardedCache`: the whole cluster's cache that hands every delta on to one cache per scheduling shard.

The simulator schedules every shard of its input each cycle, each on its own view (`ClusterCache` with a
`Partition`: the shard's nodes, queues and PodGroups), as KAI's schedulers each keep their own informer
cache of one cluster. The simulated cluster changes one cache, this one, which keeps the whole cluster
(for the result document) and forwards each change to every shard's cache, which keeps what is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kai_scheduler.api.objects import (
    ConfigMap,
    DeviceClass,
    Node,
    NodeResourceTopology,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    Queue,
    ResourceClaim,
    ResourceSlice,
    StorageClass,
    Topology,
)
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.snapshot import JobTimes, PodGroupState, PodState


class ShardedCache(ClusterCache):
    """The whole cluster (no partition), and `shards`: shard name -> that shard's cache."""

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

    def set_nodes(self, nodes: Iterable[Node]) -> None:
        nodes = list(nodes)
        super().set_nodes(nodes)
        for cache in self.shards.values():
            cache.set_nodes(nodes)

    def set_queues(self, queues: Sequence[Queue]) -> None:
        super().set_queues(queues)
        for cache in self.shards.values():
            cache.set_queues(queues)

    def set_topologies(self, topologies: Sequence[Topology]) -> None:
        super().set_topologies(topologies)
        for cache in self.shards.values():
            cache.set_topologies(topologies)

    def set_priorities(self, priorities: Priorities) -> None:
        super().set_priorities(priorities)
        for cache in self.shards.values():
            cache.set_priorities(priorities)

    def set_namespace_labels(self, labels: Mapping[str, Mapping[str, str]]) -> None:
        super().set_namespace_labels(labels)
        for cache in self.shards.values():
            cache.set_namespace_labels(labels)

    def set_dra(
        self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass], *, enabled: bool = True
    ) -> None:
        super().set_dra(slices, classes, enabled=enabled)
        for cache in self.shards.values():
            cache.set_dra(slices, classes, enabled=enabled)

    def set_storage(
        self,
        config_maps: Sequence[ConfigMap],
        claims: Sequence[PersistentVolumeClaim],
        volumes: Sequence[PersistentVolume],
        classes: Sequence[StorageClass],
    ) -> None:
        super().set_storage(config_maps, claims, volumes, classes)
        for cache in self.shards.values():
            cache.set_storage(config_maps, claims, volumes, classes)

    def set_disruption_budgets(self, budgets: Sequence[PodDisruptionBudget]) -> None:
        super().set_disruption_budgets(budgets)
        for cache in self.shards.values():
            cache.set_disruption_budgets(budgets)

    def set_node_topologies(self, topologies: Sequence[NodeResourceTopology]) -> None:
        super().set_node_topologies(topologies)
        for cache in self.shards.values():
            cache.set_node_topologies(topologies)

    def upsert_claim(self, claim: ResourceClaim) -> None:
        super().upsert_claim(claim)
        for cache in self.shards.values():
            cache.upsert_claim(claim)

    def remove_claim(self, key: str) -> None:
        super().remove_claim(key)
        for cache in self.shards.values():
            cache.remove_claim(key)

    def set_claims(self, claims: Iterable[ResourceClaim]) -> None:
        claims = list(claims)
        super().set_claims(claims)
        for cache in self.shards.values():
            cache.set_claims(claims)

    def upsert_pod(self, state: PodState) -> None:
        super().upsert_pod(state)
        for cache in self.shards.values():
            cache.upsert_pod(state)

    def remove_pod(self, key: str) -> None:
        super().remove_pod(key)
        for cache in self.shards.values():
            cache.remove_pod(key)

    def upsert_pod_group(self, state: PodGroupState) -> None:
        super().upsert_pod_group(state)
        for cache in self.shards.values():
            cache.upsert_pod_group(state)

    def remove_pod_group(self, key: str) -> None:
        super().remove_pod_group(key)
        for cache in self.shards.values():
            cache.remove_pod_group(key)

    def nominate(self, pipelined: Mapping[str, tuple[str, tuple[str, ...]]]) -> None:
        super().nominate(pipelined)
        for cache in self.shards.values():
            cache.nominate(pipelined)

    def set_job_times(self, key: str, times: JobTimes) -> None:
        super().set_job_times(key, times)
        for cache in self.shards.values():
            cache.set_job_times(key, times)
