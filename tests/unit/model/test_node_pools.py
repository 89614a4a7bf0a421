"""Node pools (KAI's scheduling shards, docs/node-pools.md): what a shard's cache holds, how pods follow
their PodGroup's pool, and the `shards` configuration."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import cluster_state, fingerprint, node_manifest, objects_of, pod_group_manifest, pod_manifest
from helpers import queue_manifest as queue_doc
from kai_scheduler.api.constants import NODE_POOL_LABEL
from kai_scheduler.framework.config import (
    ConfigError,
    config_document,
    parse_config,
    shard_config,
    shard_partition,
)
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition, pool_of
from kai_scheduler.model.shard_caches import ShardedCache
from kai_scheduler.model.snapshot import PodGroupState

A = Partition(NODE_POOL_LABEL, "a")
DEFAULT = Partition(NODE_POOL_LABEL, None)


def labelled(pool: str | None, manifest: dict[str, Any]) -> dict[str, Any]:
    if pool is not None:
        manifest["metadata"].setdefault("labels", {})[NODE_POOL_LABEL] = pool
    return manifest


def test_a_partition_holds_its_value_and_the_default_one_the_unlabelled() -> None:
    assert A.holds({NODE_POOL_LABEL: "a"}) and not A.holds({NODE_POOL_LABEL: "b"}) and not A.holds({})
    assert DEFAULT.holds({}) and not DEFAULT.holds({NODE_POOL_LABEL: "a"})
    # KAI's DoesNotExist selector: a label with an empty value is in no shard (but named "default").
    assert not DEFAULT.holds({NODE_POOL_LABEL: ""}) and not A.holds({NODE_POOL_LABEL: ""})
    assert pool_of({NODE_POOL_LABEL: ""}, NODE_POOL_LABEL) == "default" and A.pool == "a"


def cluster() -> list[Any]:
    return objects_of(
        labelled("a", node_manifest("a0", gpus=4)),
        labelled("b", node_manifest("b0", gpus=4)),
        node_manifest("d0", gpus=4),
        labelled("a", queue_doc("qa")),
        labelled("b", queue_doc("qb")),
        queue_doc("qd"),
        labelled("a", pod_group_manifest("ga", "qa", min_member=1)),
        labelled("b", pod_group_manifest("gb", "qb", min_member=1)),
        # The pod says b, its PodGroup a: the PodGroup decides (KAI lists PodGroups by the label).
        labelled("b", pod_manifest("pa", "qa", gpus=1, group="ga")),
        # Pool b's running pod on pool a's node (the node was relabelled): it holds a0 for shard a.
        labelled("b", pod_manifest("pb", "qb", gpus=2, group="gb", node_name="a0", phase="Running")),
        pod_manifest("pd", "qd", gpus=1),  # no PodGroup, no label: the default shard's
    )


def test_a_shard_sees_its_nodes_queues_and_jobs_and_foreign_pods_hold_its_nodes() -> None:
    state = cluster_state(cluster())
    a = ClusterCache.of(state, A).snapshot()
    assert a.nodes.names == ["a0"] and [q.name for q in a.queues] == ["qa"]
    assert list(a.jobs) == ["default/ga"] and list(a.tasks) == ["default/pa"]
    assert a.nodes.free_gpus[0] == 2  # pb holds two of a0's GPUs
    default = ClusterCache.of(state, DEFAULT).snapshot()
    assert default.nodes.names == ["d0"] and [q.name for q in default.queues] == ["qd"]
    assert [t.name for t in default.tasks.values()] == ["pd"]


def test_pods_follow_their_pod_group_when_it_moves_to_another_pool() -> None:
    objects = cluster()
    state = cluster_state(objects)
    sharded = ShardedCache({"a": A, "b": Partition(NODE_POOL_LABEL, "b")})
    for node in [state.nodes]:
        sharded.set_nodes(node)
    sharded.set_queues(state.queues)
    for group in state.pod_groups:
        sharded.upsert_pod_group(group)
    for pod in state.pods:
        sharded.upsert_pod(pod)
    a, b = sharded.shards["a"], sharded.shards["b"]
    assert "default/ga" in a.job_keys and "default/ga" not in b.job_keys
    # ga relabelled to b: its job and pod leave shard a for shard b.
    (ga,) = [g for g in state.pod_groups if g.pod_group.metadata.name == "ga"]
    moved = ga.pod_group.model_copy(
        update={"metadata": ga.pod_group.metadata.model_copy(update={"labels": {NODE_POOL_LABEL: "b"}})}
    )
    sharded.upsert_pod_group(PodGroupState(moved, ga.rank))
    assert "default/ga" not in a.job_keys and "default/ga" in b.job_keys
    assert "default/pa" in b.snapshot().tasks and "default/pa" not in a.snapshot().tasks
    # The incremental shard equals a shard built from scratch from the same objects.
    relabelled = cluster_state([moved if getattr(o, "key", None) == "default/ga" else o for o in objects])
    for name, partition in (("a", A), ("b", Partition(NODE_POOL_LABEL, "b"))):
        rebuilt = ClusterCache.of(relabelled, partition)
        assert fingerprint(sharded.shards[name].snapshot()) == fingerprint(rebuilt.snapshot())
    # Gone: its pod speaks for itself again (label b).
    sharded.remove_pod_group("default/ga")
    assert "default/ga" in b.job_keys  # the pod's own job, waiting for its PodGroup


SHARDS = {
    "shards": [
        {"name": "default"},
        {"name": "pool-a", "partitionLabelValue": "a", "placementStrategy": "spread"},
        {"name": "pool-b", "partitionLabelValue": "b", "config": {"queueDepthPerAction": {"allocate": 3}}},
    ],
    "actions": "allocate, consolidation, reclaim",
}


def test_shards_configuration() -> None:
    config = parse_config(SHARDS)
    assert [s.name for s in config.shards] == ["default", "pool-a", "pool-b"]
    assert parse_config(config_document(config)) == config
    a = shard_config(config, "pool-a")
    assert a.actions == ("allocate", "reclaim")  # spread: no consolidation, as KAI's operator
    assert any(p.name == "gpuspread" for p in a.plugins()) and a.shards == ()
    b = shard_config(config, "pool-b")
    assert b.queue_depth_per_action == {"allocate": 3} and b.actions == config.actions
    assert shard_partition(config, "pool-b") == Partition(NODE_POOL_LABEL, "b")
    assert shard_partition(config, "default") == DEFAULT
    assert parse_config({"nodePoolLabelKey": "example.com/pool"}).node_pool_label_key == "example.com/pool"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"shards": [{"name": "a"}, {"name": "a", "partitionLabelValue": "x"}]}, "named twice"),
        ({"shards": [{"name": "a"}, {"name": "b"}]}, "default partition is served by shard 'a'"),
        ({"shards": [{"name": "a", "placementStrategy": "pack"}]}, "placementStrategy"),
        ({"shards": [{"name": "A"}]}, "shards[0].name"),
        ({"shards": [{"name": "a", "partition": "x"}]}, "shards[0].partition: unknown key"),
        ({"shards": [{"name": "a", "config": {"period": "soon"}}]}, "shards[0].config"),
        ({"shards": [{"name": "a", "config": {"shards": []}}]}, "the whole document's"),
        ({"nodePoolLabelKey": "a b"}, "nodePoolLabelKey"),
    ],
)
def test_bad_shards_are_one_line_errors(document: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(document)


def test_an_unknown_shard_is_named() -> None:
    with pytest.raises(ConfigError, match="no such shard"):
        shard_config(parse_config(SHARDS), "pool-c")


def test_run_names_an_unknown_shard_in_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from kai_scheduler.cli import main

    config = tmp_path / "config.yaml"
    config.write_text("shards: [{name: pool-a, partitionLabelValue: a}]\n")
    assert main(["run", "--component", "scheduler", "--config", str(config), "--shard", "pool-b"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("kai-scheduler: error: --shard: shard 'pool-b': no such shard (shards: pool-a)")
    assert "\n" not in error
