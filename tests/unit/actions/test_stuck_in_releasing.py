"""StuckInReleasing (KAI v0.15+, #1578): a running pod whose deletionTimestamp is older than the threshold
(`--stuck-in-releasing-threshold` / `stuckInReleasingThreshold`, 2m) holds its resources as used, not as
releasing: nothing is pipelined onto them, and it is no victim (its running siblings still are).

Ported by name from KAI v0.17.0: `pkg/scheduler/actions/allocate/allocate_stuck_in_releasing_test.go`
`TestHandleAllocationStuckInReleasing`, `pkg/scheduler/actions/integration_tests/preempt/preempt_test.go`
and `pkg/scheduler/actions/integration_tests/reclaim/reclaim_test.go` (the StuckInReleasing cases; one
cycle here, since the simulator lets an input's terminating pods go after the first).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from helpers import (
    START,
    binds,
    cluster_state,
    config,
    evicted,
    node,
    objects_of,
    pipelines,
    pod_manifest,
    queue,
    run,
)
from kai_scheduler import cli
from kai_scheduler.framework.config import ConfigError, config_document, parse_config
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.jobs import TaskStatus

ALLOCATE = config(actions="allocate")
# KAI's integration tests run every action, allocate first (which would pipeline onto a releasing pod).
PREEMPT = config(actions="allocate, preempt")
RECLAIM = config(actions="allocate, reclaim")


def running(name: str, queue_name: str, *, deleted_ago: float | None = None, **kwargs: Any) -> Any:
    """A running one-GPU pod on node0, deleted `deleted_ago` seconds before the run starts."""
    manifest = pod_manifest(name, queue_name, gpus=1, node_name="node0", **kwargs)
    if deleted_ago is not None:
        stamp = START - timedelta(seconds=deleted_ago)
        manifest["metadata"]["deletionTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    return objects_of(manifest)[0]


def pending(name: str, queue_name: str, **kwargs: Any) -> Any:
    return objects_of(pod_manifest(name, queue_name, gpus=1, **kwargs))[0]


RELEASING, STUCK = 1.0, 600.0  # seconds since the deletion: below and above the 2m threshold


@pytest.mark.parametrize(
    ("deleted_ago", "pipelined"),
    [
        pytest.param(RELEASING, {"pending_job-0": "node0"}, id="Releasing victim allows pipelining"),
        pytest.param(STUCK, {}, id="StuckInReleasing victim does not allow pipelining"),
    ],
)
def test_allocation_on_a_releasing_or_stuck_pod(deleted_ago: float, pipelined: dict[str, str]) -> None:
    """TestHandleAllocationStuckInReleasing: "Releasing victim allows pipelining of pending pod",
    "StuckInReleasing victim does not allow pipelining"."""
    objects = [
        node("node0", gpus=1),
        queue("queue0", gpu=1),
        running("victim_job-0", "queue0", deleted_ago=deleted_ago, priority_class="train"),
        pending("pending_job-0", "queue0", priority_class="train"),
    ]
    decisions = run(objects, ALLOCATE, cycles=1).cycles[0].decisions
    assert pipelines(decisions) == pipelined
    assert binds(decisions) == {}


def test_job_with_a_stuck_pod_is_not_a_preempt_victim() -> None:
    """preempt integration "Job with a StuckInReleasing pod is not a preempt victim"."""
    objects = [
        node("node0", gpus=1),
        queue("queue0", gpu=1),
        running("stuck_victim_job-0", "queue0", deleted_ago=STUCK, priority_class="train"),
        pending("preemptor_job-0", "queue0", priority_class="build"),
    ]
    result = run(objects, PREEMPT, cycles=1)
    assert evicted(result) == []
    assert pipelines(result.cycles[0].decisions) == {}


def test_preempt_evicts_the_running_sibling_of_a_stuck_pod() -> None:
    """preempt integration "Job with a Running pod and a StuckInReleasing pod - preempt evicts the Running
    sibling"."""
    objects = [
        node("node0", gpus=2),
        queue("queue0", gpu=2),
        pending("preemptor_job-0", "queue0", priority_class="build"),
        running("mixed_victim_job-0", "queue0", group="mixed_victim_job", priority_class="train"),
        running(
            "mixed_victim_job-1",
            "queue0",
            group="mixed_victim_job",
            deleted_ago=STUCK,
            priority_class="train",
        ),
    ]
    result = run(objects, PREEMPT, cycles=1)
    assert evicted(result) == ["mixed_victim_job-0"]
    assert pipelines(result.cycles[0].decisions) == {"preemptor_job-0": "node0"}


def test_job_with_a_stuck_pod_is_not_a_reclaim_victim() -> None:
    """reclaim integration "Job with a StuckInReleasing pod is not a reclaim victim": queue1 (quota 0)
    holds node0's GPU with a stuck pod; queue0 (quota 1) can take nothing."""
    objects = [
        node("node0", gpus=1),
        queue("queue0", gpu=1),
        queue("queue1", gpu=0),
        running("stuck_over_quota_job-0", "queue1", deleted_ago=STUCK, priority_class="train"),
        pending("reclaimer_job-0", "queue0", priority_class="train"),
    ]
    result = run(objects, RECLAIM, cycles=1)
    assert evicted(result) == []
    assert pipelines(result.cycles[0].decisions) == {}


# --- the threshold and the clock ---------------------------------------------------------------------


def test_a_releasing_pod_turns_stuck_as_time_passes() -> None:
    """The same pod, deleted 60 s before the start: releasing at first, stuck once 2m have passed."""
    objects = [node("node0", gpus=1), queue("q"), running("p", "q", deleted_ago=60)]
    cache = ClusterCache.of(cluster_state(objects))
    early = cache.snapshot(now=30.0)
    assert early.tasks["default/p"].status is TaskStatus.RELEASING
    assert early.nodes.rel_gpus.tolist() == [1.0]
    late = cache.snapshot(now=61.0)
    assert late.tasks["default/p"].status is TaskStatus.STUCK_IN_RELEASING
    assert late.nodes.rel_gpus.tolist() == [0.0]


def test_the_threshold_is_the_configurations() -> None:
    objects = [node("node0", gpus=1), queue("queue0", gpu=1)]
    objects += [
        running("victim-0", "queue0", deleted_ago=600, priority_class="train"),
        pending("waiting-0", "queue0", priority_class="train"),
    ]
    longer = parse_config({"actions": "allocate", "stuckInReleasingThreshold": "15m"})
    assert pipelines(run(objects, longer, cycles=1).cycles[0].decisions) == {"waiting-0": "node0"}


def test_config_key_reads_as_kai_does() -> None:
    assert parse_config({}).stuck_in_releasing_threshold == 120.0
    assert parse_config({"stuckInReleasingThreshold": "5m"}).stuck_in_releasing_threshold == 300.0
    assert parse_config({"stuckInReleasingThreshold": "0s"}).stuck_in_releasing_threshold == 120.0
    five = parse_config({"stuckInReleasingThreshold": "5m"})
    assert parse_config(config_document(five)) == five
    with pytest.raises(ConfigError, match="stuckInReleasingThreshold"):
        parse_config({"stuckInReleasingThreshold": "soon"})


def flag(*flags: str) -> float:
    args = cli.parser().parse_args(["run", "--component", "scheduler", *flags])
    return cli.run_options(args).config.stuck_in_releasing_threshold


def test_run_flag_as_kais_scheduler_flag() -> None:
    assert flag() == 120.0
    assert flag("--stuck-in-releasing-threshold=30s") == 30.0
    assert flag("--stuck-in-releasing-threshold=0") == 120.0  # not positive: KAI's default
    with pytest.raises(cli.UsageError, match=r"--stuck-in-releasing-threshold: .* is not a Go duration"):
        flag("--stuck-in-releasing-threshold=30")
