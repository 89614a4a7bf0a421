"""Node pools against the fake API server: two schedulers, `run --shard a` and `run --shard b` (KAI's
SchedulingShards), each sees only its pool's nodes, queues and PodGroups, and computes fair share on its
own nodes; the pod grouper carries a pod's pool label onto its PodGroup (docs/node-pools.md)."""

from __future__ import annotations

import asyncio

import pytest
from identities import client_as, run_as
from live_support import FakeGpuNodes, eventually, evicted, in_pool, placed, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.framework.config import parse_config, shard_config, shard_partition
from kai_scheduler.k8s.components import RunOptions, run_components

POOL = "kai.scheduler/node-pool"
SHARDS = [{"name": "pool-a", "partitionLabelValue": "a"}, {"name": "pool-b", "partitionLabelValue": "b"}]
CONFIG = parse_config({"shards": SHARDS})
# The chart installed with these shards (scheduler.shards): its scheduler may then label the pods it binds.
pytestmark = pytest.mark.chart_values({"scheduler": {"shards": SHARDS}})


def shard_options(name: str) -> RunOptions:
    return RunOptions(
        components=frozenset({"scheduler"}),
        config=shard_config(CONFIG, name),
        partition=shard_partition(CONFIG, name),
        metrics_port=0,  # no servers: no fixed ports in tests
        plugin_server_port=0,
    )


CONTROLLERS = RunOptions(
    components=frozenset({"binder", "podgrouper", "status-controllers"}),
    config=CONFIG,
    metrics_port=0,
    plugin_server_port=0,
)


def test_two_shards_schedule_their_own_pools(server: FakeApiServer) -> None:
    store = server.store
    store.create(in_pool("a", node_manifest("a0", gpus=4)))
    store.create(in_pool("b", node_manifest("b0", gpus=4)))
    store.create(node_manifest("d0", gpus=4))  # the default pool: no shard of this test serves it
    for name, pool in (("qa1", "a"), ("qa2", "a"), ("qb", "b")):
        store.create(in_pool(pool, queue_manifest(name, gpu=0)))

    async def component(options: RunOptions, stop: asyncio.Event) -> None:
        async with client_as(server, run_as(options.components)) as client:
            await run_components(options, stop, client)

    async def body() -> None:
        stop = asyncio.Event()
        async with FakeGpuNodes(server):
            tasks = [
                asyncio.create_task(component(options, stop))
                for options in (shard_options("pool-a"), shard_options("pool-b"), CONTROLLERS)
            ]
            # qa1 borrows all of pool a while qa2 is idle.
            for i in range(4):
                store.create(in_pool("a", pod_manifest(f"a1-{i}", "qa1", gpus=1)))
            await eventually(lambda: sum(n == "a0" for n in placed(store).values()) == 4, timeout=15)
            # qa2 arrives in pool a. Pool a's 4 GPUs are divided between qa1 and qa2 (2 each), so pool a's
            # scheduler reclaims two of qa1's GPUs; counted over the whole cluster (12 GPUs) qa1 would be
            # within its share and qa2's pods would wait. Pool b's idle GPUs are never used for pool a.
            for i in range(2):
                store.create(in_pool("a", pod_manifest(f"a2-{i}", "qa2", gpus=1)))
            store.create(in_pool("b", pod_manifest("b-0", "qb", gpus=1)))
            # A pod without the label whose PodGroup is pool b's: pool b schedules it and labels it.
            store.create(in_pool("b", pod_group_manifest("gb-1", "qb")))
            store.create(pod_manifest("b-1", "qb", gpus=1, group="gb-1"))
            store.create(pod_manifest("d-0", "qb", gpus=1))  # no pool label: the default shard's
            await eventually(
                lambda: (
                    {"a2-0", "a2-1", "b-0", "b-1"} <= placed(store).keys()
                    and sum(name.startswith("a1-") for name in placed(store)) == 2
                ),
                timeout=20,
            )
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 15)

    run(body(), timeout=60)
    where = placed(store)
    assert where["a2-0"] == where["a2-1"] == "a0" and where["b-0"] == where["b-1"] == "b0"
    assert all(node != "b0" for name, node in where.items() if not name.startswith("b-"))
    assert store.get("pods", "b-1", "default")["metadata"]["labels"][POOL] == "b"  # KAI: the bound pod's pool
    assert "d-0" not in where  # nobody serves the default pool here
    # Each PodGroup carries its pod's pool (the pod grouper), and each BindRequest its scheduler's.
    groups = {g["metadata"]["name"]: g for g in store.list("podgroups", "default")}
    # (The pod grouper names a bare pod's PodGroup pg-<pod>-<uid>: a uid may hold "b-0" too.)
    [b0_group] = [g for name, g in groups.items() if name.startswith("pg-b-0-")]
    assert b0_group["metadata"]["labels"].get(POOL) == "b"
    for request in store.list("bindrequests", "default"):
        pool = "b" if request["spec"]["podName"].startswith("b-") else "a"
        assert request["metadata"]["labels"][POOL] == pool
    # Pool a's scheduler reclaimed exactly qa1's two GPUs above its pool share.
    victims = evicted(server)
    assert len(victims) == 2 and set(victims) <= {f"a1-{i}" for i in range(4)}
