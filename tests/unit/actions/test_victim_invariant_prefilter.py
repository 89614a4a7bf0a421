"""The victim-invariant pre-filter (KAI v0.17, #1519): reclaim, preempt and consolidation pass over a job
one of whose pods fails a pre-predicate no eviction changes (volume binding, ConfigMaps, the largest node
of the pool), without searching victims, and record why.

Ported by name from KAI v0.17.0:
- `pkg/scheduler/actions/preempt/preempt_victim_invariant_prefilter_test.go`
  `TestPreemptSkipsSolverForVictimInvariantPrePredicateFailure` ("preempt victim invariant blocker");
- `pkg/scheduler/actions/consolidation/consolidation_victim_invariant_prefilter_test.go`
  `TestConsolidationSkipsSolverForVictimInvariantPrePredicateFailure` ("consolidation victim invariant
  blocker");
- `pkg/scheduler/actions/common/action_eligibility_test.go` `TestVictimInvariantPrePredicateFailureForTasks`
  (the first failing task is the one named) and `TestRecordVictimInvariantPrePredicateFailure` (the job's
  fit error "Resources were not found for pod <ns>/<name> due to: <error>").
KAI's tests inject a blocker function; so do the first two here, each beside a control without it (the same
cluster evicts), so the test can fail. The predicates plugin's own victim-invariant pre-predicates
(`plugins/predicates/predicates_test.go` `TestEvaluateTaskOnVictimInvariantPrePredicates`) are shown with a
missing ConfigMap and a pod larger than any node.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import gang, node, open_session, pod, pod_manifest, queue, run, snapshot_of
from kai_scheduler.actions.consolidation import Consolidation
from kai_scheduler.actions.preempt import Preempt
from kai_scheduler.api.objects import Pod
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import TaskInfo

BLOCKED = "blocked before preempt"


def _preempt_cluster() -> list[Any]:
    """KAI's "preempt victim invariant blocker": a build job waits for a train job's GPU in its queue."""
    return [
        node("node0", gpus=1),
        queue("queue0", gpu=1),
        pod("running-job-0", "queue0", gpus=1, node_name="node0", priority_class="train"),
        pod("pending-job-0", "queue0", gpus=1, priority_class="build-preemptible"),
    ]


def _consolidation_cluster() -> list[Any]:
    """KAI's "consolidation victim invariant blocker": 2-GPU jobs on two 4-GPU nodes, a 3-GPU job waits."""
    return [
        node("node0", gpus=4),
        node("node1", gpus=4),
        queue("queue0", gpu=2),
        pod("running-job-0", "queue0", gpus=2, node_name="node0", priority_class="train"),
        pod("running-job-1", "queue0", gpus=2, node_name="node1", priority_class="train"),
        pod("pending-job-0", "queue0", gpus=3, priority_class="train"),
    ]


CASES = {"preempt": (_preempt_cluster, Preempt), "consolidation": (_consolidation_cluster, Consolidation)}


def _session(objects: list[Any], blocker: bool, calls: list[str]) -> Session:
    session = open_session(snapshot_of(objects), SchedulerConfig())

    def block(task: TaskInfo) -> str | None:
        calls.append(task.name)
        return BLOCKED if blocker else None

    session.points.victim_invariant_pre_predicates.append(block)
    return session


@pytest.mark.parametrize("action", sorted(CASES))
def test_a_victim_invariant_failure_skips_the_solver_and_is_recorded(action: str) -> None:
    build, act = CASES[action]
    calls: list[str] = []
    session = _session(build(), blocker=True, calls=calls)
    act().execute(session)
    assert calls and set(calls) == {"pending-job-0"}
    assert session.decisions == []
    reason = str(session.unschedulable["default/pg-pending-job-0"])
    assert f"{action}: Resources were not found for pod default/pending-job-0 due to: {BLOCKED}" in reason


@pytest.mark.parametrize("action", sorted(CASES))
def test_without_the_failure_the_same_cluster_evicts(action: str) -> None:
    build, act = CASES[action]
    calls: list[str] = []
    session = _session(build(), blocker=False, calls=calls)
    act().execute(session)
    assert calls
    assert any(decision.type == "evict" for decision in session.decisions)


def test_the_first_failing_pod_of_a_gang_is_the_one_named() -> None:
    # TestVictimInvariantPrePredicateFailureForTasks: the tasks are asked in order; the first failure wins.
    objects = [
        node("node0", gpus=2),
        queue("queue0", gpu=2),
        *[pod(f"t-{i}", "queue0", gpus=1, node_name="node0", priority_class="train") for i in range(2)],
        *gang("g", "queue0", size=2, gpus=1, priority_class="build-preemptible"),
    ]
    session = open_session(snapshot_of(objects), SchedulerConfig())
    session.points.victim_invariant_pre_predicates.append(
        lambda task: f"{task.name} blocked" if task.name == "g-1" else None
    )
    Preempt().execute(session)
    assert session.decisions == []
    assert "Resources were not found for pod default/g-1 due to: g-1 blocked" in str(
        session.unschedulable["default/g"]
    )


def _waiting(problem: str) -> Pod:
    manifest = pod_manifest("waiting", "b", gpus=2 if problem == "larger than any node" else 1)
    manifest["spec"]["priorityClassName"] = "build-preemptible"
    if problem == "missing ConfigMap":
        manifest["spec"]["volumes"] = [{"name": "settings", "configMap": {"name": "absent"}}]
        manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "settings", "mountPath": "/etc/s"}]
    return Pod.model_validate(manifest)


@pytest.mark.parametrize(
    ("problem", "fails_with"),
    [
        ("missing ConfigMap", "absent"),  # ConfigMap
        ("larger than any node", "Max GPU resources available in a single node"),  # MaxNodePoolResources
        ("none", None),  # the control: the same cluster reclaims
    ],
)
def test_the_predicates_plugins_own_pre_filters_keep_victim_actions_from_evicting(
    problem: str, fails_with: str | None
) -> None:
    # b is owed the GPU a borrowed: reclaim takes it back unless the waiting pod can run nowhere anyway.
    objects = [
        node("n0", gpus=1),
        queue("a", gpu=0),
        queue("b", gpu=1),
        pod("borrowed", "a", gpus=1, node_name="n0", priority_class="train"),
        _waiting(problem),
    ]
    result = run(objects, cycles=1)
    if fails_with is None:
        assert [(d.action, d.type) for d in result.cycles[0].decisions] == [
            ("reclaim", "evict"),
            ("reclaim", "pipeline"),
        ]
        return
    assert result.cycles[0].decisions == []
    reason = result.reasons["default/pg-waiting"]
    # (Reclaim passes over the 2-GPU pod sooner: it would take b above its fair share.)
    assert ": Resources were not found for pod default/waiting due to: " in reason
    assert fails_with in reason
