"""KAI's operator objects against the fake API server (issue #21, acceptance): two schedulers, `run
--shard pool-a` and `run --shard pool-b` with no `shards` in their configuration, take their node pools
and configuration from the SchedulingShard objects of those names (and kai-config) and schedule their
pools apart; a patch to one object's placementStrategy (binpack -> spread) changes where that pool's next
pods land, without a restart; a bad object is one log line naming it, and its last good configuration
stays."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from identities import client_as, run_as
from live_support import FakeGpuNodes, eventually, in_pool, placed, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler import cli
from kai_scheduler.k8s.components import RunOptions, run_components

POOL = "kai.scheduler/node-pool"
# The chart installed with a scheduler Deployment for each of these shards (scheduler.shards): so its
# scheduler account may label the pods it binds with their pool, as a node pool's scheduler does.
pytestmark = pytest.mark.chart_values(
    {
        "scheduler": {
            "shards": [
                {"name": "pool-a", "partitionLabelValue": "a"},
                {"name": "pool-b", "partitionLabelValue": "b"},
            ]
        }
    }
)
SHARDS_LOG = "kai_scheduler.k8s.scheduler.shard_objects"


def shard_object(name: str, pool: str, strategy: str) -> dict[str, Any]:
    """A SchedulingShard as KAI's docs write one (docs/operator/scheduling-shards.md)."""
    return {
        "apiVersion": "kai.scheduler/v1",
        "kind": "SchedulingShard",
        "metadata": {"name": name},
        "spec": {"partitionLabelValue": pool, "placementStrategy": {"gpu": strategy, "cpu": strategy}},
    }


KAI_CONFIG = {
    "apiVersion": "kai.scheduler/v1",
    "kind": "Config",
    "metadata": {"name": "kai-config"},
    "spec": {"namespace": "kai-scheduler", "global": {"nodePoolLabelKey": POOL}},
}


def scheduler_of(shard: str) -> RunOptions:
    """`kai-scheduler run --component=scheduler --shard=<shard>`, without --config."""
    args = ["run", "--component=scheduler", f"--shard={shard}", "--metrics-port=0", "--plugin-server-port=0"]
    return cli.run_options(cli.parser().parse_args(args))


CONTROLLERS = RunOptions(
    components=frozenset({"binder", "podgrouper", "status-controllers"}),
    config=scheduler_of("pool-a").config,
    metrics_port=0,
    plugin_server_port=0,
)


class Records(logging.Handler):
    """The shard objects' log lines, as the scheduler writes them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_shard_objects_give_each_scheduler_its_pool_and_a_change_applies_without_a_restart(
    server: FakeApiServer,
) -> None:
    store = server.store
    for name, pool in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b")):
        store.create(in_pool(pool, node_manifest(name, gpus=4)))
    for name, pool in (("qa", "a"), ("qb", "b")):
        store.create(in_pool(pool, queue_manifest(name, gpu=0)))
    store.create(shard_object("pool-a", "a", "binpack"))
    store.create(shard_object("pool-b", "b", "binpack"))
    store.create(KAI_CONFIG)
    schedulers = [scheduler_of("pool-a"), scheduler_of("pool-b")]
    assert [(o.shard, o.shard_configured, o.partition) for o in schedulers] == [
        ("pool-a", False, schedulers[0].partition),
        ("pool-b", False, schedulers[1].partition),
    ]
    records = Records()
    logger = logging.getLogger(SHARDS_LOG)
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.INFO)

    async def component(options: RunOptions, stop: asyncio.Event) -> None:
        async with client_as(server, run_as(options.components)) as client:
            await run_components(options, stop, client)

    def version(name: str) -> str:
        return str(store.get("schedulingshards", name)["metadata"]["resourceVersion"])

    def read(name: str, version: str) -> bool:
        return f"SchedulingShard {name}: read (resourceVersion {version})" in records.lines

    async def bind(pool: str, pod: str, queue: str) -> str:
        store.create(in_pool(pool, pod_manifest(pod, queue, gpus=1)))
        await eventually(lambda: pod in placed(store), timeout=60)
        return placed(store)[pod]

    async def body() -> None:
        stop = asyncio.Event()
        async with FakeGpuNodes(server):
            tasks = [asyncio.create_task(component(options, stop)) for options in (*schedulers, CONTROLLERS)]
            # Binpack: each pool's second pod joins its first on the same node, in its own pool.
            first_a, first_b = await bind("a", "a-1", "qa"), await bind("b", "b-1", "qb")
            assert first_a in ("a0", "a1") and first_b in ("b0", "b1")
            assert await bind("a", "a-2", "qa") == first_a
            assert await bind("b", "b-2", "qb") == first_b
            # Pool b's shard is patched to spread: once its scheduler has read the new version, its next
            # pod goes to the emptier node; pool a's scheduler still packs.
            shard = store.get("schedulingshards", "pool-b")
            shard["spec"]["placementStrategy"] = {"gpu": "spread", "cpu": "spread"}
            store.update(shard)
            patched = version("pool-b")
            await eventually(lambda: read("pool-b", patched), timeout=60)
            assert await bind("b", "b-3", "qb") != first_b
            assert await bind("a", "a-3", "qa") == first_a
            # A bad object: one line naming it and its field; the last good configuration (binpack) stays.
            shard = store.get("schedulingshards", "pool-a")
            shard["spec"]["placementStrategy"] = {"gpu": "pack"}
            store.update(shard)
            await eventually(
                lambda: any(
                    line.startswith("SchedulingShard pool-a: spec.placementStrategy.gpu")
                    and line.endswith("the scheduler keeps its last good configuration")
                    for line in records.lines
                ),
                timeout=60,
            )
            assert await bind("a", "a-4", "qa") == first_a
            stop.set()
            await asyncio.gather(*tasks)

    try:
        run(body(), timeout=240)
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    where = placed(store)
    assert {name for name, node in where.items() if node.startswith("a")} == {"a-1", "a-2", "a-3", "a-4"}
    assert {name for name, node in where.items() if node.startswith("b")} == {"b-1", "b-2", "b-3"}
    assert [line for line in records.lines if "pool-a: spec.placementStrategy" in line][1:] == []
