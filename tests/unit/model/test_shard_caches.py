"""The sharded cache hands every change of the cluster to each shard's cache (`model.shard_caches`)."""

from __future__ import annotations

import inspect
from dataclasses import replace

from helpers import cluster_state, fingerprint, node_manifest, objects_of, pod_group_manifest, pod_manifest
from helpers import queue_manifest as queue_doc
from kai_scheduler.api.constants import NODE_POOL_LABEL
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.cache.deltas import deltas_of
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.priorities import Priorities
from kai_scheduler.model.shard_caches import ShardedCache
from kai_scheduler.model.snapshot import ClusterState, JobTimes

PARTITIONS = {"a": Partition(NODE_POOL_LABEL, "a"), "default": Partition(NODE_POOL_LABEL, None)}


def labelled(pool: str, manifest: dict[str, object]) -> dict[str, object]:
    manifest["metadata"].setdefault("labels", {})[NODE_POOL_LABEL] = pool  # type: ignore[attr-defined]
    return manifest


def two_pools() -> ClusterState:
    state = cluster_state(
        objects_of(
            labelled("a", node_manifest("a0", gpus=4)),
            node_manifest("d0", gpus=4),
            labelled("a", queue_doc("qa")),
            queue_doc("qd"),
            labelled("a", pod_group_manifest("ga", "qa", min_member=1)),
            pod_group_manifest("gd", "qd", min_member=1),
            pod_manifest("pa", "qa", gpus=1, group="ga", node_name="a0", phase="Running"),
            pod_manifest("pd", "qd", gpus=2, group="gd"),
        )
    )
    pods = [replace(p, nominated_node="d0") if p.pod.metadata.name == "pd" else p for p in state.pods]
    return replace(state, pods=pods, job_times={"default/ga": JobTimes(last_start=5.0)})


def test_every_delta_reaches_every_shard_as_a_build_from_scratch_would_see_it() -> None:
    state = two_pools()
    sharded = ShardedCache(PARTITIONS)
    sharded.set_nodes(node for node in state.nodes)  # read once: every shard still gets every node
    sharded.set_queues(state.queues)
    sharded.set_priorities(Priorities(state.priority_classes, state.default_priority))
    for group in state.pod_groups:
        sharded.upsert_pod_group(group)
    for pod in state.pods:
        sharded.upsert_pod(replace(pod, nominated_node=None))
    sharded.nominate({"default/pd": ("d0", ())})
    sharded.replace_job_times(state.job_times)
    for name, partition in PARTITIONS.items():
        shard, rebuilt = sharded.shards[name], ClusterCache.of(state, partition)
        assert fingerprint(shard.snapshot()) == fingerprint(rebuilt.snapshot())
        assert shard.state() == rebuilt.state()
    assert sharded.shards["a"].job_times == {"default/ga": JobTimes(last_start=5.0)}
    assert sharded.shards["default"].snapshot().tasks["default/pd"].nominated_node == 0


def test_every_method_that_changes_the_cluster_is_a_delta() -> None:
    """A setter added to `ClusterCache` without `@delta` would change the whole cluster but no shard."""
    changes = {
        name
        for name, member in vars(ClusterCache).items()
        if inspect.isfunction(member)
        and name.startswith(("set_", "upsert_", "remove_", "replace_", "nominate"))
    }
    assert changes == set(deltas_of(ClusterCache))
    assert len(changes) >= 19
