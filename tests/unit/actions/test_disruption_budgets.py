"""PodDisruptionBudgets in the victim search (issue #20, beyond KAI): KAI deletes its victims whatever
their budgets say; we delete too, but first look for victims whose eviction no budget forbids (best
effort, as kube-scheduler's preemption) and say so in the reason when none makes room. A budget never
splits a gang: the search passes over a whole unit or takes it whole.

Reference: Kubernetes' PodDisruptionBudget (policy/v1: minAvailable / maxUnavailable, counts or
percentages rounded up; a null selector selects no pod, an empty one every pod of the namespace) and
kube-scheduler's preemption (candidates with fewer budget violations first, violating victims only when
needed).
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import decision_rows, evicted, gang, node, pod, queue, run
from kai_scheduler.api.errors import ManifestError
from kai_scheduler.api.manifests import parse_object
from kai_scheduler.api.objects import PodDisruptionBudget
from kai_scheduler.model.disruption import allowed_disruptions
from kai_scheduler.model.snapshot import PodState


def budget(
    name: str,
    app: str | None,
    *,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    status: dict[str, Any] | None = None,
    generation: int = 1,
) -> PodDisruptionBudget:
    """A budget over the pods labelled `app` ("": an empty selector, every pod; None: no selector)."""
    spec: dict[str, Any] = {}
    if app is not None:
        spec["selector"] = {"matchLabels": {"app": app}} if app else {}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    manifest: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "spec": spec,
    }
    if status is not None:
        manifest["status"] = status
    return PodDisruptionBudget.model_validate(manifest)


def running(name: str, app: str, **kwargs: Any) -> Any:
    return pod(name, gpus=1, node_name="n0", priority_class="train", labels={"app": app}, **kwargs)


def free_kept_and_inference() -> list[Any]:
    """A full 2-GPU node of train pods `free` and (newer) `kept`, and an inference pod that wants a GPU."""
    return [
        node("n0", gpus=2),
        queue("q", gpu=2),
        running("free", "free"),
        running("kept", "kept"),
        pod("inf", gpus=1, priority_class="inference"),
    ]


def reason_of(result: Any, pod_name: str) -> str:
    (reason,) = [d.reason for r in result.cycles for d in r.decisions if d.pod == f"default/{pod_name}"][:1]
    return str(reason)


# --- the search prefers victims no budget protects -------------------------------------------------


def test_preempt_takes_the_victim_no_budget_protects_instead_of_the_newest() -> None:
    # Without budgets the newest train pod (kept) goes first; its budget allows no disruption, so the
    # older pod, which no budget covers, goes instead.
    objects = free_kept_and_inference()
    assert evicted(run(objects)) == ["kept"]
    result = run([*objects, budget("kept-pdb", "kept", min_available=1)])
    assert decision_rows(result)[:2] == [(1, "preempt", "evict", "free"), (1, "preempt", "pipeline", "inf")]
    assert "PodDisruptionBudget" not in reason_of(result, "free")


def test_when_no_choice_within_the_budgets_makes_room_the_eviction_says_which_budget_it_goes_beyond() -> None:
    objects = [
        node("n0", gpus=2),
        queue("q", gpu=2),
        running("a-0", "a"),
        running("a-1", "a"),
        pod("inf", gpus=1, priority_class="inference"),
        budget("a-pdb", "a", min_available=2),
    ]
    result = run(objects)
    assert evicted(result) == ["a-1"]  # KAI's choice: the preemptor still runs
    assert reason_of(result, "a-1").endswith(
        "; beyond PodDisruptionBudget default/a-pdb (allowed 0): no choice of victims within the budgets "
        "made room"
    )
    assert ("default/inf", "n0") in [(d.pod, d.node) for r in result.cycles for d in r.decisions]


def test_the_budget_counts_every_victim_of_the_scenario() -> None:
    # A 2-pod inference gang needs two GPUs; the newest pods (a-0, a-1) share a budget allowing one
    # disruption: one of them may go, the other GPU comes from b.
    objects = [
        node("n0", gpus=4),
        queue("q", gpu=4),
        running("b-0", "b"),
        running("b-1", "b"),
        running("a-0", "a"),
        running("a-1", "a"),
        *gang("inf", size=2, gpus=1, priority_class="inference"),
    ]
    assert sorted(evicted(run(objects))) == ["a-0", "a-1"]
    result = run([*objects, budget("a-pdb", "a", max_unavailable=1)])
    assert sorted(evicted(result)) == ["a-1", "b-1"]
    assert all("PodDisruptionBudget" not in reason_of(result, name) for name in ("a-1", "b-1"))


def test_a_gang_is_passed_over_or_taken_whole_never_split_by_a_budget() -> None:
    # The victim gang (minMember 2) is covered by a budget allowing one disruption: the search passes over
    # it first, finds nothing else, and then takes the whole gang, both pods beyond the budget's one.
    objects = [
        node("n0", gpus=2),
        queue("q", gpu=2),
        *gang("train", size=2, gpus=1, node_name="n0", priority_class="train", labels={"app": "t"}),
        *gang("inf", size=2, gpus=1, priority_class="inference"),
        budget("t-pdb", "t", max_unavailable=1),
    ]
    result = run(objects)
    assert sorted(evicted(result)) == ["train-0", "train-1"]
    # The first of the two is within what the budget allows, the second beyond it.
    notes = sorted(
        "beyond PodDisruptionBudget default/t-pdb (allowed 1)" in reason_of(result, name)
        for name in ("train-0", "train-1")
    )
    assert notes == [False, True]


def test_reclaim_prefers_victims_no_budget_protects() -> None:
    # Queue b is owed the node's GPUs and a holds both: reclaim would take a's newest pod.
    objects = [
        node("n0", gpus=2),
        queue("a", gpu=0),
        queue("b", gpu=2),
        pod("a-free", "a", gpus=1, node_name="n0", priority_class="train", labels={"app": "free"}),
        pod("a-kept", "a", gpus=1, node_name="n0", priority_class="train", labels={"app": "kept"}),
        pod("b-0", "b", gpus=1, priority_class="train"),
    ]
    assert evicted(run(objects, cycles=1)) == ["a-kept"]
    assert evicted(run([*objects, budget("kept", "kept", min_available=1)], cycles=1)) == ["a-free"]


def test_a_budget_selecting_no_running_pod_changes_nothing() -> None:
    objects = free_kept_and_inference()
    plain = decision_rows(run(objects))
    assert decision_rows(run([*objects, budget("other", "other", min_available=5)])) == plain
    # An empty selector selects every pod of the namespace; a null one selects none (policy/v1).
    every = run([*objects, budget("all", "", min_available=2)])
    assert evicted(every) == ["kept"] and "beyond PodDisruptionBudget default/all" in reason_of(every, "kept")
    nothing = run([*objects, budget("none", None, min_available=2)])
    assert decision_rows(nothing) == plain and "PodDisruptionBudget" not in reason_of(nothing, "kept")


# --- allowed disruptions ------------------------------------------------------------------------------


def _states(running_pods: int, pending: int = 0) -> list[PodState]:
    states = [
        PodState(pod(f"r{i}", labels={"app": "x"}), i, node_name="n0", phase="Running")
        for i in range(running_pods)
    ]
    states += [PodState(pod(f"p{i}", labels={"app": "x"}), 100 + i) for i in range(pending)]
    return states


@pytest.mark.parametrize(
    ("fields", "running_pods", "pending", "allowed"),
    [
        ({"min_available": 2}, 3, 0, 1),
        ({"min_available": 3}, 3, 0, 0),
        ({"min_available": 5}, 3, 0, 0),
        ({"min_available": "50%"}, 3, 0, 1),  # 50% of 3 rounds up to 2 desired
        ({"min_available": "50%"}, 3, 1, 1),  # of 4 expected: 2 desired, 3 healthy
        ({"max_unavailable": 1}, 3, 0, 1),
        ({"max_unavailable": 1}, 3, 1, 0),  # one of four is unavailable already
        ({"max_unavailable": "34%"}, 3, 0, 2),  # 34% of 3 rounds up to 2 unavailable: 1 desired
        ({}, 3, 0, 3),
    ],
)
def test_allowed_disruptions_as_the_disruption_controller_computes_them(
    fields: dict[str, Any], running_pods: int, pending: int, allowed: int
) -> None:
    assert allowed_disruptions(budget("b", "x", **fields), _states(running_pods, pending)) == allowed


def test_a_current_status_is_taken_as_it_is_and_a_stale_one_is_not() -> None:
    current = budget("b", "x", min_available=3, status={"observedGeneration": 2, "disruptionsAllowed": 1})
    assert allowed_disruptions(current, _states(3)) == 1
    stale = budget(
        "b", "x", min_available=3, generation=3, status={"observedGeneration": 2, "disruptionsAllowed": 1}
    )
    assert allowed_disruptions(stale, _states(3)) == 0


# --- the manifest ---------------------------------------------------------------------------------


def _manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            "spec: minAvailable and maxUnavailable cannot be both set",
        ),
        ({"minAvailable": "half"}, "spec.minAvailable: must be a count or a percentage ('50%'), got 'half'"),
        ({"maxUnavailable": -1}, "spec.maxUnavailable: must not be negative, got -1"),
    ],
)
def test_a_bad_budget_is_a_one_line_error_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as raised:
        parse_object(_manifest(spec), "input.yaml", 2)
    text = str(raised.value)
    assert message in text and "PodDisruptionBudget" in text and "\n" not in text
