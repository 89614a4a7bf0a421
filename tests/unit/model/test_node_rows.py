"""A node's row of the node table is read as its object arrives (`ClusterInputs.set_nodes`), and the
cache makes its tables of those rows: the same table a build from the node objects makes."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import node, queue
from kai_scheduler.model.builder import build_node_table, node_rows, node_table_of
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.cache.cluster_cache import NodeRowsMismatch
from kai_scheduler.model.nodes import NodeTable
from kai_scheduler.model.priorities import Priorities


def _same(kept: NodeTable, made: NodeTable) -> bool:
    return kept.same_capacity(made) and kept.specs == made.specs


def _cache(*names: str) -> ClusterCache:
    cache = ClusterCache()
    cache.set_nodes([node(name, gpus=2) for name in names])
    cache.set_queues([queue("q")])
    return cache


def test_a_table_of_rows_is_the_table_of_their_nodes_with_dra_gpus_and_extended_resources() -> None:
    nodes = [
        node("b", gpus=2, extra={"example.com/foo": 3}),
        node("a", gpus=0, gpu_memory=40536, labels={"zone": "z1"}),
        node("c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}], unschedulable=True),
    ]
    dra_gpus, backed = {"a": 2}, ["example.com/bar"]
    kept = node_table_of(reversed(list(node_rows(nodes))), dra_gpus, backed)
    assert kept.names == ["a", "b", "c"]
    assert list(kept.cap_gpus) == [2.0, 2.0, 8.0]
    assert kept.scalar_names == ["example.com/bar", "example.com/foo"]
    assert np.isinf(kept.cap_scalars[0, 0]) and kept.cap_scalars[1, 1] == 3.0
    assert _same(kept, build_node_table(nodes, dra_gpus, backed))
    assert node_table_of([]).size == 0


def test_every_table_the_cache_makes_is_made_of_the_rows_read_as_its_nodes_arrived() -> None:
    """A table made again (the priority classes changed: everything is made again) holds the very facts
    read as the nodes arrived, not facts read again."""
    cache = _cache("n1", "n2")
    first = cache.snapshot().nodes
    cache.set_priorities(Priorities({"train": 50}))
    again = cache.snapshot().nodes
    assert again.specs == first.specs
    assert all(now is then for now, then in zip(again.specs, first.specs, strict=True))


def test_a_nodes_row_follows_its_object_its_name_and_its_leaving() -> None:
    cache = _cache("n1", "n2", "n3")
    cache.snapshot()
    cordoned = node("n2", gpus=2, unschedulable=True)
    cache.set_nodes([node("n1", gpus=4), cordoned, node("n3", gpus=2)])  # the same names
    assert _same(cache.snapshot().nodes, build_node_table([node("n1", gpus=4), cordoned, node("n3", gpus=2)]))
    renamed = [node("n4", gpus=1), cordoned]  # others: n1 and n3 leave, n4 comes
    cache.set_nodes(renamed)
    table = cache.snapshot().nodes
    assert table.names == ["n2", "n4"]
    assert _same(table, build_node_table(renamed))


def test_under_verify_a_node_changed_in_place_after_it_arrived_raises() -> None:
    """With `verify`, the table of rows is compared with one read off the nodes now: an input the rows
    read but the cache did not follow (a node object changed in place, which it never sees) raises."""
    nodes = [node("n1", gpus=2), node("n2", gpus=2)]
    cache = ClusterCache()
    cache.lone_jobs.verify = True
    cache.set_nodes(nodes)
    cache.set_queues([queue("q")])
    nodes[1].metadata.labels["zone"] = "z2"
    with pytest.raises(NodeRowsMismatch, match="node table"):
        cache.snapshot()
