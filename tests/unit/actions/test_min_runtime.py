"""minruntime: jobs that started recently are protected from reclaim and preempt for a while.

Reference: kai-reference §4.3 "Minimum runtime" ("arguments defaultPreemptMinRuntime,
defaultReclaimMinRuntime (default 0s), reclaimResolveMethod lca (default: use the value of the victim-side
queue directly under the lowest common ancestor, walking up until set) or queue (victim's leaf queue). A
victim whose last-start-timestamp is younger than its min runtime is not eligible; for elastic jobs only
the tasks above minMember can be taken while protected"), §2.1 (queue `preemptMinRuntime` /
`reclaimMinRuntime` override the plugin default), §3 (`kai.scheduler/last-start-timestamp` per pod group).

The victims start in the simulation's first cycle (second 0); the reclaimer / preemptor arrives at 5s.
Most runs use a fixed number of cycles, so that each test checks one rule and not the simulator's clock;
the last two tests check that a run to the steady state (or --until) waits for protections to run out.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    config_with,
    evicted,
    node,
    pod,
    pod_group,
    queue,
    queue_with_min_runtime,
    run,
)
from kai_scheduler.framework.config import SchedulerConfig


def min_runtime(**arguments: str) -> SchedulerConfig:
    return config_with({"minruntime": arguments})


def first_eviction(result: Any) -> tuple[float, str, str] | None:
    for record in result.cycles:
        for d in record.decisions:
            if d.type == "evict":
                return (record.time, d.action, d.pod.split("/", 1)[1])
    return None


def reclaim_case(preempt: str | None = None, reclaim: str | None = None) -> list[Any]:
    """a (share 0) starts two pods at 0s; b (share 2) asks for one at 5s."""
    return [
        node("n0", gpus=2),
        queue_with_min_runtime("a", preempt=preempt, reclaim=reclaim, gpu=0, gpu_weight=0),
        queue("b", gpu=2),
        pod("a-0", "a", gpus=1),
        pod("a-1", "a", gpus=1),
        pod("b-0", "b", gpus=1, arrival=5),
    ]


def preempt_case(preempt: str | None = None, reclaim: str | None = None) -> list[Any]:
    """q starts two train pods at 0s; a build pod of the same queue arrives at 5s."""
    return [
        node("n0", gpus=2),
        queue_with_min_runtime("q", preempt=preempt, reclaim=reclaim, gpu=2),
        pod("t-0", "q", gpus=1),
        pod("t-1", "q", gpus=1),
        pod("build", "q", gpus=1, arrival=5, priority_class="build"),
    ]


@pytest.mark.parametrize(
    ("arguments", "queue_values", "at"),
    [
        ({}, {}, 5.0),  # no protection by default (0s)
        ({"defaultReclaimMinRuntime": "60s"}, {}, 60.0),
        ({"defaultReclaimMinRuntime": "60s"}, {"reclaim": "20s"}, 20.0),  # the queue's value wins
        ({}, {"reclaim": "30s"}, 30.0),
        ({"defaultReclaimMinRuntime": "10s"}, {"reclaim": "40s"}, 40.0),  # also when longer
        ({"defaultPreemptMinRuntime": "60s"}, {}, 5.0),  # preempt protection does not apply to reclaim
        ({}, {"preempt": "60s"}, 5.0),
    ],
)
def test_reclaim_min_runtime(arguments: dict[str, str], queue_values: dict[str, str], at: float) -> None:
    result = run(reclaim_case(**queue_values), min_runtime(**arguments), cycles=70)
    assert first_eviction(result) == (at, "reclaim", "a-1")


@pytest.mark.parametrize(
    ("arguments", "queue_values", "at"),
    [
        ({}, {}, 5.0),
        ({"defaultPreemptMinRuntime": "60s"}, {}, 60.0),
        ({"defaultPreemptMinRuntime": "60s"}, {"preempt": "20s"}, 20.0),
        ({}, {"preempt": "30s"}, 30.0),
        ({"defaultReclaimMinRuntime": "60s"}, {}, 5.0),  # reclaim protection does not apply to preempt
        ({}, {"reclaim": "60s"}, 5.0),
    ],
)
def test_preempt_min_runtime(arguments: dict[str, str], queue_values: dict[str, str], at: float) -> None:
    result = run(preempt_case(**queue_values), min_runtime(**arguments), cycles=70)
    assert first_eviction(result) == (at, "preempt", "t-1")


def test_a_queue_without_a_value_inherits_its_parents() -> None:
    # a's parent dept sets reclaimMinRuntime 25s; a sets nothing; the reclaimer is in another department.
    objects = [
        node("n0", gpus=2),
        queue_with_min_runtime("dept", reclaim="25s", gpu=0, gpu_weight=0),
        queue("a", parent="dept", gpu=0, gpu_weight=0),
        queue("other", gpu=2),
        queue("b", parent="other", gpu=2),
        pod("a-0", "a", gpus=1),
        pod("a-1", "a", gpus=1),
        pod("b-0", "b", gpus=1, arrival=5),
    ]
    result = run(objects, cycles=40)
    assert first_eviction(result) == (25.0, "reclaim", "a-1")


def lca_case(reclaimer_in_same_department: bool) -> list[Any]:
    """dept-a sets reclaimMinRuntime 100s, its child a1 sets 10s; a1 starts 4 pods at 0s. At 5s a pod
    arrives either in dept-b/b1 (the split with a1 is at the top: the victim side is dept-a) or in a1's
    sibling a2 (the split is inside dept-a: the victim side is a1)."""
    objects = [
        node("n0", gpus=4),
        queue_with_min_runtime("dept-a", reclaim="100s", gpu=4 if reclaimer_in_same_department else 0),
        queue_with_min_runtime("a1", reclaim="10s", parent="dept-a", gpu=0, gpu_weight=0),
        queue("a2", parent="dept-a", gpu=4),
        queue("dept-b", gpu=4),
        queue("b1", parent="dept-b", gpu=4),
        *[pod(f"a1-{i}", "a1", gpus=1) for i in range(4)],
    ]
    reclaimer = "a2" if reclaimer_in_same_department else "b1"
    objects.append(pod(f"{reclaimer}-0", reclaimer, gpus=1, arrival=5))
    return objects


@pytest.mark.parametrize(
    ("method", "same_department", "at"),
    [
        (None, False, 100.0),  # lca is the default: dept-a (under the root) says 100s
        ("lca", False, 100.0),
        ("queue", False, 10.0),  # the victim's own queue a1 says 10s
        ("lca", True, 10.0),  # the split is inside dept-a: the victim side is a1
        ("queue", True, 10.0),
    ],
)
def test_reclaim_resolve_method(method: str | None, same_department: bool, at: float) -> None:
    arguments = {} if method is None else {"reclaimResolveMethod": method}
    result = run(lca_case(same_department), min_runtime(**arguments), cycles=120)
    assert first_eviction(result) == (at, "reclaim", "a1-3")


def test_a_protected_elastic_job_still_loses_its_pods_above_min_member() -> None:
    # a's elastic job e (4 pods, minMember 2) starts at 0s and is protected for 60s; b asks for 3 GPUs
    # (three single pods) at 5s: it gets e's two pods above minMember at once, the third only at 60s,
    # when the rest of the gang is no longer protected.
    objects = [
        node("n0", gpus=4),
        queue("a", gpu=0, gpu_weight=0),
        queue("b", gpu=4),
        pod_group("e", "a", min_member=2),
        *[pod(f"e-{i}", "a", group="e", gpus=1) for i in range(4)],
        *[pod(f"b-{i}", "b", gpus=1, arrival=5) for i in range(3)],
    ]
    result = run(objects, min_runtime(defaultReclaimMinRuntime="60s"), cycles=70)
    by_time = [
        (r.time, d.pod.split("/", 1)[1]) for r in result.cycles for d in r.decisions if d.type == "evict"
    ]
    assert by_time == [(5.0, "e-3"), (5.0, "e-2"), (60.0, "e-1"), (60.0, "e-0")]


def test_losing_pods_above_min_member_does_not_restart_the_protection() -> None:
    # e keeps running after losing e-3 at 5s, so its last start stays at 0s: with 30s protection, the
    # gang goes at 30s, not at 35s.
    objects = [
        node("n0", gpus=4),
        queue("a", gpu=0, gpu_weight=0),
        queue("b", gpu=4),
        pod_group("e", "a", min_member=3),
        *[pod(f"e-{i}", "a", group="e", gpus=1) for i in range(4)],
        pod("b-0", "b", gpus=1, arrival=5),
        pod("b-1", "b", gpus=1, arrival=6),
    ]
    result = run(objects, min_runtime(defaultReclaimMinRuntime="30s"), cycles=50)
    by_time = [
        (r.time, d.pod.split("/", 1)[1]) for r in result.cycles for d in r.decisions if d.type == "evict"
    ]
    assert by_time[0] == (5.0, "e-3")
    assert by_time[1][0] == 30.0


def test_running_pods_of_the_input_have_no_known_start_and_are_not_protected() -> None:
    # Pods that run when the simulation starts have no last-start time: nothing protects them.
    objects = [
        node("n0", gpus=2),
        queue("a", gpu=0, gpu_weight=0),
        queue("b", gpu=2),
        pod("a-0", "a", gpus=1, node_name="n0"),
        pod("a-1", "a", gpus=1, node_name="n0"),
        pod("b-0", "b", gpus=1),
    ]
    result = run(objects, min_runtime(defaultReclaimMinRuntime="1h"), cycles=3)
    assert evicted(result) == ["a-1"]


def test_the_steady_state_waits_for_min_runtime_protection_to_run_out() -> None:
    # Failed on HEAD 9fc9999: a min-runtime expiry was no simulation event, so the run ended "steady" at
    # 5s with b-0 pending although the cycle at 60s reclaims.
    result = run(reclaim_case(), min_runtime(defaultReclaimMinRuntime="60s"))
    assert first_eviction(result) == (60.0, "reclaim", "a-1")
    assert result.steady


def test_until_runs_the_clock_to_the_end() -> None:
    # Failed on HEAD 9fc9999: with --until the run also stopped at the first idle cycle without a future
    # event (Simulation.run breaks on the steady state whatever the stop condition), before the 60s expiry.
    result = run(reclaim_case(), min_runtime(defaultReclaimMinRuntime="60s"), until=100)
    assert first_eviction(result) == (60.0, "reclaim", "a-1")
