"""The staleness grace period per PodGroup (KAI v0.17, #1942): `spec.stalenessGracePeriod` replaces the
scheduler's `defaultStalenessGracePeriod` for that gang; negative never evicts it, zero evicts it in the
cycle that finds it stale.

The first five tests port KAI v0.17's `pkg/scheduler/actions/stalegangeviction/stalegangeviction_test.go`
`TestStaleGangEviction` cases added by #1942 (named in each test), with KAI's global default of 60s.
KAI's `StaleDuration` (how long ago the gang was stamped stale) is the PodGroup's
`kai.scheduler/stale-podgroup-timestamp` annotation, as a cluster carries it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from helpers import START, config, node, pod, pod_group_manifest, queue, run, stale_evictions
from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import PodGroup


def stale_group(grace: str | None, stale_for: float, **kwargs: Any) -> PodGroup:
    """PodGroup `job-1` (queue q-1), stamped stale `stale_for` seconds before the run starts."""
    manifest = pod_group_manifest("job-1", "q-1", **kwargs)
    stamp = (START - timedelta(seconds=stale_for)).strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest["metadata"]["annotations"][c.STALE_PODGROUP_TIMESTAMP_ANNOTATION] = stamp
    if grace is not None:
        manifest["spec"]["stalenessGracePeriod"] = grace
    return PodGroup.model_validate(manifest)


def two_pod_job(grace: str | None, stale_for: float) -> list[Any]:
    """KAI's job-1: minMember 2, job-1-0 Running and job-1-1 Failed on node-1."""
    return [
        node("node-1", gpus=1),
        queue("q-1"),
        stale_group(grace, stale_for, min_member=2),
        pod("job-1-0", "q-1", group="job-1", gpus=1, node_name="node-1"),
        pod("job-1-1", "q-1", group="job-1", node_name="node-1", phase="Failed"),
    ]


def in_sub(name: str) -> dict[str, str]:
    return {c.SUBGROUP_LABEL: name}


GLOBAL_60S = config(defaultStalenessGracePeriod="60s")


def test_per_job_grace_period_shorter_than_global_default_evicts() -> None:
    # "Per-job grace period shorter than global default - evict": stale 30s, own grace 10s.
    result = run(two_pod_job("10s", 30), GLOBAL_60S, cycles=1)
    assert stale_evictions(result) == [(0.0, "job-1-0")]


def test_per_job_grace_period_longer_than_global_default_does_not_evict() -> None:
    # "Per-job grace period longer than global default - no evict": stale 61s, own grace 120s; the gang
    # goes once its own 120s have passed (59s into the run), not at the global 60s.
    assert stale_evictions(run(two_pod_job("120s", 61), GLOBAL_60S, cycles=1)) == []
    assert stale_evictions(run(two_pod_job("120s", 61), GLOBAL_60S)) == [(59.0, "job-1-0")]


def test_negative_per_job_grace_period_never_evicts() -> None:
    # "Negative per-job grace period - no evict": stale 120s, own grace -1s.
    result = run(two_pod_job("-1s", 120), GLOBAL_60S, cycles=200)
    assert stale_evictions(result) == []


def test_zero_per_job_grace_period_evicts_at_once() -> None:
    # "Zero per-job grace period - immediate evict": stale 1s, own grace 0.
    result = run(two_pod_job("0s", 1), GLOBAL_60S, cycles=1)
    assert stale_evictions(result) == [(0.0, "job-1-0")]


def test_per_job_grace_period_with_sub_groups_evicts_only_allocated_pods() -> None:
    # "Per-job grace period with subgroups - evict only allocated": sub-group-0 (minMember 2) runs three
    # pods, sub-group-1 (minMember 1) has only a failed one; stale 61s, own grace 5s.
    sub_groups = [{"name": "sub-group-0", "minMember": 2}, {"name": "sub-group-1", "minMember": 1}]
    objects: list[Any] = [
        node("node-1", gpus=3),
        queue("q-1"),
        stale_group("5s", 61, min_member=3, sub_groups=sub_groups),
    ]
    for i in range(3):
        objects.append(
            pod(f"job-1-{i}", "q-1", group="job-1", labels=in_sub("sub-group-0"), gpus=1, node_name="node-1")
        )
    objects.append(
        pod("job-1-3", "q-1", group="job-1", labels=in_sub("sub-group-1"), node_name="node-1", phase="Failed")
    )
    result = run(objects, GLOBAL_60S, cycles=1)
    assert sorted(stale_evictions(result)) == [(0.0, "job-1-0"), (0.0, "job-1-1"), (0.0, "job-1-2")]


# --- ours -------------------------------------------------------------------------------------------


def test_without_its_own_the_scheduler_default_applies() -> None:
    assert stale_evictions(run(two_pod_job(None, 30), GLOBAL_60S)) == [(30.0, "job-1-0")]
    assert (
        stale_evictions(run(two_pod_job(None, 30), config(defaultStalenessGracePeriod="-1s"), cycles=100))
        == []
    )


def test_its_own_grace_period_wins_over_a_negative_default() -> None:
    result = run(two_pod_job("45s", 30), config(defaultStalenessGracePeriod="-1s"))
    assert stale_evictions(result) == [(15.0, "job-1-0")]


def test_the_eviction_names_the_grace_period_it_waited() -> None:
    result = run(two_pod_job("10s", 30), GLOBAL_60S, cycles=1)
    (decision,) = [d for r in result.cycles for d in r.decisions]
    assert "grace period 10s" in decision.reason


@pytest.mark.parametrize("bad", ["30", "1d", "soon", ""])
def test_a_grace_period_that_is_not_a_go_duration_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="stalenessGracePeriod"):
        stale_group(bad, 0)
