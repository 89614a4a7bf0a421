"""stalegangeviction: a running gang below its minMember is evicted after the grace period.

Reference: kai-reference §4.3 stalegangeviction ("a job is stale when it has active pods but a podset
below minMember (and no Succeeded pods). First detection stamps stale-podgroup-timestamp; after
--default-staleness-grace-period (60s; negative = never) all active pods of the job are evicted.
Non-stale jobs get the timestamp cleared."), and the simulate contract (`defaultStalenessGracePeriod`
default 60s, negative: never; evicted pods are recreated pending).
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import config, decision_rows, node, pod, pod_group, queue, run, stale_evictions


def stale_gang(*, succeeded: bool = False, blocker_duration: int | None = None) -> list[Any]:
    """A 2-GPU node: the gang g (minMember 2) runs g-0 only; g-1 waits for the GPU that `blocker` (an
    unrelated pod of the same queue) holds. The gang is stale from the first cycle."""
    objects: list[Any] = [
        node("n0", gpus=2),
        queue("q"),
        pod_group("g", "q", min_member=2),
        pod("g-0", "q", group="g", gpus=1, node_name="n0"),
    ]
    if succeeded:
        objects.append(pod("g-done", "q", group="g", gpus=1, node_name="n0", phase="Succeeded"))
    objects += [
        pod("blocker", "q", gpus=1, node_name="n0", duration=blocker_duration),
        pod("g-1", "q", group="g", gpus=1),
    ]
    return objects


def test_a_stale_gang_is_evicted_after_the_default_grace_period_of_60s() -> None:
    result = run(stale_gang())
    assert stale_evictions(result) == [(60.0, "g-0")]
    assert decision_rows(result) == [(2, "stalegangeviction", "evict", "g-0")]  # the blocker stays
    assert result.steady


@pytest.mark.parametrize(("grace", "at"), [("10s", 10.0), ("2m", 120.0)])
def test_the_grace_period_is_configurable(grace: str, at: float) -> None:
    result = run(stale_gang(), config(defaultStalenessGracePeriod=grace))
    assert stale_evictions(result) == [(at, "g-0")]


def test_a_zero_grace_period_evicts_in_the_cycle_that_detects_it_with_a_fixed_number_of_cycles() -> None:
    result = run(stale_gang(), config(defaultStalenessGracePeriod="0s"), cycles=3)
    assert stale_evictions(result) == [(0.0, "g-0")]


def test_a_zero_grace_period_evicts_in_the_cycle_that_detects_it() -> None:
    # KAI's handleStaleJob stamps the gang and compares in the same cycle: time since the stamp is not
    # below a zero grace period (KAI v0.17 stalegangeviction_test.go "Zero per-job grace period").
    result = run(stale_gang(), config(defaultStalenessGracePeriod="0s"))
    assert stale_evictions(result) == [(0.0, "g-0")]


def test_a_negative_grace_period_never_evicts() -> None:
    result = run(stale_gang(), config(defaultStalenessGracePeriod="-1s"), cycles=200)
    assert decision_rows(result) == []
    assert result.cluster.pods[0].phase == "Running"


def test_a_gang_with_a_succeeded_pod_is_not_stale() -> None:
    result = run(stale_gang(succeeded=True), cycles=100)
    assert decision_rows(result) == []
    assert result.cluster.stale_since == {}


def test_the_stamp_clears_when_the_gang_recovers() -> None:
    # The blocker completes at 30s; g-1 binds then and the gang is whole: no eviction at 60s, and the
    # stamp (kept by the simulated cluster, like KAI's stale-podgroup-timestamp annotation) is cleared.
    before = run(stale_gang(blocker_duration=30), until=20)
    assert before.cluster.stale_since == {"default/g": 0.0}
    result = run(stale_gang(blocker_duration=30), cycles=100)
    assert stale_evictions(result) == []
    assert [(r.time, d.action, d.type, d.pod) for r in result.cycles for d in r.decisions] == [
        (30.0, "allocate", "bind", "default/g-1")
    ]
    assert result.cluster.stale_since == {}


def test_an_elastic_job_at_or_above_its_min_member_is_not_stale() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q"),
        pod_group("e", "q", min_member=2),
        pod("e-0", "q", group="e", gpus=1, node_name="n0"),
        pod("e-1", "q", group="e", gpus=1, node_name="n0"),
        pod("e-2", "q", group="e", gpus=1),
    ]
    result = run(objects, cycles=100)
    assert decision_rows(result) == []
    assert result.cluster.stale_since == {}


def test_the_stale_eviction_says_why() -> None:
    result = run(stale_gang())
    (decision,) = [d for r in result.cycles for d in r.decisions]
    assert "stale gang default/g" in decision.reason
    assert "minMember 2" in decision.reason and "60s" in decision.reason
