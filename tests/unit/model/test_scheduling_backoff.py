"""`schedulingBackoff` (model/scheduling_backoff.py): which PodGroups KAI's scheduler leaves out, what the
cache does with them and the node-pool prefix of the messages. Cases ported from KAI's
pkg/scheduler/cache/cluster_info/cluster_info_test.go (TestIsPodGroupUpForScheduler, all 9 cases;
TestSnapshotPodGroups "filter unassigned pod groups - ...", all 4), pkg/scheduler/utils/
pod_group_utils_test.go (TestGetSchedulingBackoffValue) and pkg/scheduler/cache/
record_job_status_event_test.go ("condition explanation contains single nodepool prefix")."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from helpers import cluster_state, fingerprint, node_manifest, objects_of, pod_group, pod_manifest
from helpers import pod_group_manifest as pod_group_doc
from helpers import queue_manifest as queue_doc
from kai_scheduler.api.constants import NODE_POOL_LABEL
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.partition import Partition
from kai_scheduler.model.scheduling_backoff import (
    is_backed_off,
    latest_condition_pool,
    scheduling_backoff,
    with_pool_prefix,
)
from kai_scheduler.model.snapshot import PodGroupState

NO_BACKOFF, SINGLE = -1, 1


def group(backoff: int | None, pool: str | None = None) -> Any:
    made = pod_group("pg", "q")
    labels = {NODE_POOL_LABEL: pool} if pool is not None else {}
    spec = made.spec.model_copy(update={"scheduling_backoff": backoff})
    return made.model_copy(
        update={"spec": spec, "metadata": made.metadata.model_copy(update={"labels": labels})}
    )


# TestIsPodGroupUpForScheduler: (name, schedulingBackoff, the PodGroup's pool, the last condition's pool,
# up for the scheduler). KAI's helper leaves the label off for the default pool.
UP_FOR_SCHEDULER = [
    ("Infinite schedulingBackoff", NO_BACKOFF, "nodepoola", "nodepoola", True),
    ("Nil schedulingBackoff", None, "nodepoolb", "nodepoolb", True),
    ("No last scheduling condition", SINGLE, "nodepoolb", None, True),
    ("No last scheduling condition - default node pool", SINGLE, None, None, True),
    ("unassigned by condition from different node pool", SINGLE, "nodepoola", "different-nodepool", True),
    ("unassigned by condition", SINGLE, "nodepoolc", "nodepoolc", False),
    ("unassigned by condition - default node pool", SINGLE, None, "different-nodepool", True),
    ("unassigned by condition - default node pool 2", SINGLE, "nodepoolc", "default", True),
    ("unassigned by condition - default node pool (same)", SINGLE, None, "default", False),
]


@pytest.mark.parametrize(("backoff", "pool", "condition", "up"), [c[1:] for c in UP_FOR_SCHEDULER])
def test_is_pod_group_up_for_scheduler(
    backoff: int | None, pool: str | None, condition: str | None, up: bool
) -> None:
    assert is_backed_off(group(backoff, pool), condition, NODE_POOL_LABEL) is not up


def test_the_default_backoff_is_retry_forever() -> None:
    assert scheduling_backoff(group(None)) == NO_BACKOFF and scheduling_backoff(group(3)) == 3


def test_the_latest_condition_is_the_one_with_the_highest_transition_id() -> None:
    conditions = [
        {"nodePool": "a", "transitionID": "2"},
        {"nodePool": "b", "transitionID": "10"},  # numbers, not text: 10 > 2
        {"nodePool": "c", "transitionID": "x"},  # unreadable: -1
    ]
    assert latest_condition_pool(conditions) == "b"
    assert latest_condition_pool([]) is None
    assert latest_condition_pool([{"nodePool": "c", "transitionID": "x"}]) == "c"


def test_messages_of_a_single_backoff_name_the_node_pool() -> None:
    assert with_pool_prefix(group(SINGLE), "OverCapacity: job is over capacity", NODE_POOL_LABEL) == (
        "Node-Pool 'default': OverCapacity: job is over capacity"
    )
    assert with_pool_prefix(group(SINGLE, "a"), "m", NODE_POOL_LABEL) == "Node-Pool 'a': m"
    assert with_pool_prefix(group(None), "m", NODE_POOL_LABEL) == "m"
    assert with_pool_prefix(group(NO_BACKOFF), "m", NODE_POOL_LABEL) == "m"


def objects(backoff: int | None) -> list[Any]:
    pg = pod_group_doc("pg", "q")
    if backoff is not None:
        pg["spec"]["schedulingBackoff"] = backoff
    return objects_of(
        node_manifest("n0", gpus=4),
        queue_doc("q"),
        pg,
        pod_manifest("p0", "q", gpus=1, group="pg"),
        pod_manifest("p1", "q", gpus=1, group="pg", node_name="n0", phase="Running"),
    )


# TestSnapshotPodGroups "filter unassigned pod groups - ...": (schedulingBackoff, condition pool, kept).
FILTER_UNASSIGNED = [
    pytest.param(NO_BACKOFF, "default", True, id="no scheduling backoff"),
    pytest.param(SINGLE, None, True, id="no scheduling conditions"),
    pytest.param(SINGLE, "some-node-pool", True, id="unschedulable in different nodepool"),
    pytest.param(SINGLE, "default", False, id="unassigned"),
]


@pytest.mark.parametrize(("backoff", "condition", "kept"), FILTER_UNASSIGNED)
def test_the_snapshot_leaves_out_pod_groups_backed_off_on_their_pool(
    backoff: int, condition: str | None, kept: bool
) -> None:
    state = cluster_state(objects(backoff))
    state = replace(state, pod_groups=[replace(g, condition_pool=condition) for g in state.pod_groups])
    snapshot = ClusterCache.of(state).snapshot()
    assert ("default/pg" in snapshot.jobs) is kept
    if not kept:
        # Its pods are no one's to schedule; the running one still holds its GPU.
        assert not snapshot.tasks and snapshot.nodes.free_gpus[0] == 3


@pytest.mark.parametrize("partition", [None, Partition(NODE_POOL_LABEL, None)])
def test_a_condition_written_and_removed_brings_the_job_back_as_a_rebuild_makes_it(
    partition: Partition | None,
) -> None:
    state = cluster_state(objects(SINGLE))
    cache = ClusterCache.of(state, partition)
    before = fingerprint(cache.snapshot())
    (pg_state,) = state.pod_groups
    cache.upsert_pod_group(replace(pg_state, condition_pool="default"))
    backed_off = cache.snapshot()
    assert not backed_off.jobs and fingerprint(backed_off) == fingerprint(
        ClusterCache.of(cache.state(), partition).snapshot()
    )
    assert [g.condition_pool for g in cache.state().pod_groups] == ["default"]
    cache.upsert_pod_group(replace(pg_state, condition_pool=None))
    assert fingerprint(cache.snapshot()) == before
    cache.remove_pod_group(pg_state.pod_group.key)
    cache.upsert_pod_group(PodGroupState(pg_state.pod_group, pg_state.rank, "default"))
    cache.remove_pod_group(pg_state.pod_group.key)
    gone = cache.snapshot()
    assert fingerprint(gone) == fingerprint(ClusterCache.of(cache.state(), partition).snapshot())
    assert gone.jobs["default/pg"].invalid_reason == "PodGroup default/pg does not exist"
