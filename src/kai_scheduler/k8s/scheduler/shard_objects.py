"""KAI's operator objects for a running scheduler: its SchedulingShard (named as the scheduler's shard) and
the Config `kai-config` (`kai.scheduler/v1`), watched so that a change to them applies between two cycles,
without a restart.

Where the shard's object exists, its configuration wins over `--config`: KAI's defaults merged with the
object, read as KAI's operator reads it (`framework.operator_objects`), with kai-config's node-pool label.
Where it does not (never created, or deleted), `--config` stands, its own entry for the shard or the whole
document, with kai-config's node-pool label (as `simulate` takes the same objects). A scheduler of a shard
that `--config` does not list (and that is not KAI's `default`) waits for its object before the first
cycle, rather than schedule a node pool it was not meant for.

A bad object is one log line naming it and its field; the last good configuration stays. The shard's
node pool (`partitionLabelValue`, kai-config's `nodePoolLabelKey`) names the scheduler's Lease, metrics and
informer filters when it starts: a later change to it is one log line, and takes effect at a restart (KAI's
operator restarts the Deployment for it).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Final

from kai_scheduler.controlplane.driver import check_config
from kai_scheduler.framework.config import ConfigError, SchedulerConfig, shard_config, shard_partition
from kai_scheduler.framework.operator_objects import CONFIG_NAME, SHARD_KIND, config_from_operator_objects
from kai_scheduler.framework.shard_config import DEFAULT_SHARD
from kai_scheduler.k8s.runtime.access import Access, watching
from kai_scheduler.k8s.runtime.client import KAI_CONFIGS, SCHEDULING_SHARDS, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.informer import Informer
from kai_scheduler.k8s.runtime.objects import resource_version
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.model.partition import Partition

log = logging.getLogger(__name__)

# The SchedulingShards and Configs, listed and watched (few, cluster-scoped objects).
ACCESS: Final[tuple[Access, ...]] = watching((SCHEDULING_SHARDS, KAI_CONFIGS))


@dataclass(frozen=True, slots=True)
class ShardSettings:
    """What the scheduler of one shard runs with."""

    config: SchedulerConfig
    partition: Partition


class ShardObjects:
    """The informers of SchedulingShards and Configs, and the shard `name`'s settings from them.

    `fallback`: the settings `--config` gives the shard; `configured`: whether `--config` gives them (it
    lists the shard, or the shard is KAI's default one)."""

    def __init__(self, client: KubeClient, name: str, fallback: ShardSettings, *, configured: bool) -> None:
        self.name = name
        self.fallback = fallback
        self.configured = configured
        self.shards = Informer(client, SCHEDULING_SHARDS)
        self.configs = Informer(client, KAI_CONFIGS)
        self.current = fallback
        self.from_object = False  # whether `current` is the object's
        self.started = False  # the node pool is fixed once the scheduler started on it
        self._seen: tuple[str | None, str | None] | None = None  # the versions last read
        self._shard_event = asyncio.Event()
        self.shards.add_handler(self._note, self._note, self._note)

    def _note(self, *_: JsonObject) -> None:
        self._shard_event.set()

    async def __aenter__(self) -> ShardObjects:
        self.shards.start()
        self.configs.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shards.stop()
        await self.configs.stop()

    async def initial(self, stop: asyncio.Event) -> ShardSettings | None:
        """The settings to start with, once both caches are synced; for a shard only an object defines,
        once that object is there and reads well. None when `stop` came first."""
        for informer in (self.shards, self.configs):
            if not await wait_or_stop(informer.wait_synced(), stop):
                return None
        said = False
        while True:
            self._shard_event.clear()
            self.changed()
            if self.configured or self.from_object:
                self.started = True
                return self.current
            if not said:
                log.info("%s %s: waiting for it (--config does not list this shard)", SHARD_KIND, self.name)
                said = True
            if not await wait_or_stop(self._shard_event.wait(), stop):
                return None

    def changed(self) -> SchedulerConfig | None:
        """The shard's configuration when its objects changed since the last call and read well (None:
        nothing new to apply). Called between two cycles."""
        shard, config = self.shards.get(self.name), self.configs.get(CONFIG_NAME)
        seen = (_version(shard), _version(config))
        if seen == self._seen:
            return None
        self._seen = seen
        settings = self._read(shard, config)
        if settings is None:
            return None
        if self.from_object and shard is None:
            log.info("%s %s: deleted; --config's configuration applies", SHARD_KIND, self.name)
        self.from_object = shard is not None
        if self.started and settings.partition != self.current.partition:
            log.warning(
                "%s %s: its node pool is now %s (was %s); the scheduler serves the new one after a restart",
                SHARD_KIND,
                self.name,
                _pool(settings.partition),
                _pool(self.current.partition),
            )
            settings = ShardSettings(settings.config, self.current.partition)
        if settings == self.current:
            return None
        self.current = settings
        return settings.config

    def _read(self, shard: JsonObject | None, config: JsonObject | None) -> ShardSettings | None:
        """The settings these objects give (no shard object: `--config`'s, with kai-config's node-pool
        label as the simulator takes it); None, and one log line, when they do not read well."""
        if shard is None and config is None:
            return self.fallback
        try:
            if shard is None:
                merged = config_from_operator_objects([], config, self.fallback.config)
                partition = Partition(merged.node_pool_label_key, self.fallback.partition.value)
                settings = ShardSettings(merged, partition)
            else:
                merged = config_from_operator_objects([shard], config, self.fallback.config)
                settings = ShardSettings(shard_config(merged, self.name), shard_partition(merged, self.name))
            check_config(settings.config)  # its plugins and actions known, their arguments good
        except ConfigError as error:
            log.warning("%s; the scheduler keeps its last good configuration", error)
            return None
        for notice in (n for n in settings.config.notices if n not in self.fallback.config.notices):
            log.warning("%s", notice)
        if shard is not None:
            log.info("%s %s: read (resourceVersion %s)", SHARD_KIND, self.name, _version(shard))
        return settings


def _version(obj: JsonObject | None) -> str | None:
    return None if obj is None else resource_version(obj)


def _pool(partition: Partition) -> str:
    return f"{partition.label_key}={partition.value}" if partition.value else "the default pool"


def shard_name(name: str | None) -> str:
    """The shard a scheduler serves: `--shard`, else KAI's default shard."""
    return name or DEFAULT_SHARD


__all__ = ["ACCESS", "ShardObjects", "ShardSettings", "shard_name"]
