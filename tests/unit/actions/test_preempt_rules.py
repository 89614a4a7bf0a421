"""preempt, and what makes a job preemptible.

Reference: kai-reference §4.3 preempt ("within the same queue only. Preemptor pending job (must pass the
non-preemptible-over-quota check) may evict *preemptible* jobs of the same queue with strictly lower
priority ... build(100) preempts train(50); inference (125) preempts train; non-preemptible victims
(build/inference) are never preempted"), §2.2 / §3 (PodGroup `preemptibility`: `preemptible` |
`non-preemptible`; if empty, priority < 100 is preemptible; the label `kai.scheduler/preemptibility`
overrides on the top owner), §4.2 (victims: lowest priority, newest first), and the simulate contract
(every evict and pipeline carries a reason).
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import (
    decision_rows,
    evicted,
    labelled_pod_group,
    node,
    pod,
    pod_group,
    queue,
    run,
)

PREEMPTIBILITY = "kai.scheduler/preemptibility"


def test_preempt_takes_strictly_lower_priority_in_the_same_queue_lowest_first() -> None:
    # q runs train (50), build-preemptible (75) and another train pod; inference (125) needs 1 GPU.
    # Both train pods are below it; the lowest priority goes first, newest among equals (t-1).
    objects = [
        node("n0", gpus=3),
        queue("q", gpu=3),
        pod("t-0", gpus=1, node_name="n0", priority_class="train"),
        pod("bp", gpus=1, node_name="n0", priority_class="build-preemptible"),
        pod("t-1", gpus=1, node_name="n0", priority_class="train"),
        pod("inf", gpus=1, priority_class="inference"),
    ]
    assert decision_rows(run(objects)) == [
        (1, "preempt", "evict", "t-1"),
        (1, "preempt", "pipeline", "inf"),
        (2, "allocate", "bind", "inf"),
    ]


def test_preempt_never_takes_equal_priority() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=1),
        pod("bp-0", gpus=1, node_name="n0", priority_class="build-preemptible"),
        pod("bp-1", gpus=1, priority_class="build-preemptible"),
    ]
    assert decision_rows(run(objects)) == []


def test_preempt_never_takes_non_preemptible_jobs_even_of_lower_priority() -> None:
    # build (100) is non-preemptible by default: inference (125) does not preempt it.
    objects = [
        node("n0", gpus=2),
        queue("q", gpu=4),
        pod("build-0", gpus=1, node_name="n0", priority_class="build"),
        pod("build-1", gpus=1, node_name="n0", priority_class="build"),
        pod("inf", gpus=1, priority_class="inference"),
    ]
    result = run(objects)
    assert decision_rows(result) == []
    assert result.steady


def test_preempt_stays_within_the_queue() -> None:
    # other's train pod is of lower priority, but in another queue; q is at its share (1 of 1), so
    # reclaim does not apply either.
    objects = [
        node("n0", gpus=2),
        queue("q", gpu=1),
        queue("other", gpu=1),
        pod("q-train", "q", gpus=1, node_name="n0", priority_class="train"),
        pod("o-train", "other", gpus=1, node_name="n0", priority_class="train"),
        pod("q-build", "q", gpus=1, priority_class="build"),
    ]
    assert decision_rows(run(objects)) == [
        (1, "preempt", "evict", "q-train"),
        (1, "preempt", "pipeline", "q-build"),
        (2, "allocate", "bind", "q-build"),
    ]


def test_preempt_decisions_say_who_they_were_for() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=1),
        pod("t-0", gpus=1, node_name="n0", priority_class="train"),
        pod("inf", gpus=1, priority_class="inference"),
    ]
    decisions = run(objects, cycles=1).cycles[0].decisions
    evict, pipeline = decisions
    assert evict.action == "preempt" and evict.type == "evict"
    assert "default/pg-inf" in evict.reason and "125" in evict.reason and "queue q" in evict.reason
    assert pipeline.type == "pipeline" and "default/pg-inf" in pipeline.reason and "n0" in pipeline.reason


# --- preemptibility: the PodGroup field and the label -----------------------------------------------


def reclaim_case(victims: list[Any]) -> list[Any]:
    """One GPU held by queue a (share 0) with the given job; queue b (share 1) asks for it."""
    return [
        node("n0", gpus=1),
        queue("a", gpu=0, gpu_weight=0),
        queue("b", gpu=1),
        *victims,
        pod("b-0", "b", gpus=1),
    ]


@pytest.mark.parametrize(
    ("victim", "taken"),
    [
        # The PodGroup field overrides the priority's default either way.
        (pod_group("v", "a", priority_class="train", preemptibility="non-preemptible"), False),
        (pod_group("v", "a", priority_class="build", preemptibility="preemptible"), True),
        # The label on the PodGroup (the top owner's label, copied by the pod grouper) likewise.
        (
            labelled_pod_group("v", "a", priority_class="train", labels={PREEMPTIBILITY: "non-preemptible"}),
            False,
        ),
        (labelled_pod_group("v", "a", priority_class="build", labels={PREEMPTIBILITY: "preemptible"}), True),
        # Defaults: priority < 100 preemptible, >= 100 not.
        (pod_group("v", "a", priority_class="build-preemptible"), True),
        (pod_group("v", "a", priority_class="build"), False),
    ],
    ids=["field-non", "field-pre", "label-non", "label-pre", "default-75", "default-100"],
)
def test_pod_group_preemptibility_decides_whether_reclaim_may_take_it(victim: Any, taken: bool) -> None:
    objects = reclaim_case([victim, pod("v-0", "a", group="v", gpus=1, node_name="n0")])
    assert evicted(run(objects, cycles=1)) == (["v-0"] if taken else [])


@pytest.mark.parametrize(
    ("priority_class", "label", "taken"),
    [("train", "non-preemptible", False), ("build", "preemptible", True)],
)
def test_the_preemptibility_label_of_a_bare_pod_is_honoured(
    priority_class: str, label: str, taken: bool
) -> None:
    # A pod without a PodGroup gets its own (as the pod grouper makes it), with the pod's label.
    victim = pod(
        "v-0", "a", gpus=1, node_name="n0", priority_class=priority_class, labels={PREEMPTIBILITY: label}
    )
    assert evicted(run(reclaim_case([victim]), cycles=1)) == (["v-0"] if taken else [])


def test_a_preemptible_marked_build_job_may_be_preempted_within_its_queue() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=1),
        pod_group("v", "q", priority_class="build", preemptibility="preemptible"),
        pod("v-0", "q", group="v", gpus=1, node_name="n0"),
        pod("inf", "q", gpus=1, priority_class="inference"),
    ]
    assert evicted(run(objects, cycles=1)) == ["v-0"]


def test_a_non_preemptible_marked_train_job_is_never_preempted() -> None:
    objects = [
        node("n0", gpus=1),
        queue("q", gpu=2),
        pod_group("v", "q", priority_class="train", preemptibility="non-preemptible"),
        pod("v-0", "q", group="v", gpus=1, node_name="n0"),
        pod("inf", "q", gpus=1, priority_class="inference"),
    ]
    assert evicted(run(objects)) == []


@pytest.mark.parametrize(
    ("preemptibility", "runs"),
    [("preemptible", True), ("non-preemptible", False)],
)
def test_preemptibility_decides_whether_a_job_may_run_above_its_quota(
    preemptibility: str, runs: bool
) -> None:
    # §4.3 allocate: preemptible jobs may go above deserved (up to the limit); non-preemptible ones may
    # not (NonPreemptibleOverQuota). Here a build (100) job is marked preemptible, a train job not.
    priority_class = "build" if preemptibility == "preemptible" else "train"
    objects = [
        node("n0", gpus=2),
        queue("q", gpu=0),
        pod_group("j", "q", priority_class=priority_class, preemptibility=preemptibility),
        pod("j-0", "q", group="j", gpus=1),
    ]
    result = run(objects)
    assert decision_rows(result) == ([(1, "allocate", "bind", "j-0")] if runs else [])
    if not runs:
        assert result.reasons["default/j"].startswith("NonPreemptibleOverQuota")
