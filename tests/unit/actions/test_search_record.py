"""What the victim search records for KAI v0.17's scenario-search metrics (`framework.search_record`):
each job's search by how it ended, each generator's scenarios by state, each generator's attempt.

Reference: KAI v0.17.0 `pkg/scheduler/actions/common/solvers/job_solver.go` (`SolveWithResult`: the job's
result counted once per search; a scenario whose fingerprint failed already counted `duplicate`, not
simulated; no generator ends the search `no_generator`), `scenario_generator.go` (every scenario a
generator returns counted `emitted`; each generator attempt observed by its result) and the solvers'
`scenario_fingerprint_test.go` / `job_solver_result_test.go`, ported by behaviour.
"""

from __future__ import annotations

from typing import Any

from helpers import node, open_session, pod, queue, snapshot_of
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.framework.config import DEFAULT_PLUGINS, SchedulerConfig, parse_config
from kai_scheduler.framework.search_budgets import MULTI_NODE_GANG, NODE_LOCAL_GREEDY
from kai_scheduler.framework.search_record import SearchRecord


def _reclaim(objects: list[Any], config: SchedulerConfig | None = None) -> SearchRecord:
    session = open_session(snapshot_of(objects), config or SchedulerConfig())
    Reclaim().execute(session)
    return session.counts["reclaim"].search


def _owed(gpus: int) -> list[Any]:
    """b is owed a GPU; a runs `gpus` 1-GPU pods on a node of `gpus` GPUs with a deserved share of 1."""
    return [
        node("n0", gpus=gpus),
        queue("a", gpu=1),
        queue("b", gpu=1),
        *[pod(f"a-{i}", "a", gpus=1, node_name="n0") for i in range(gpus)],
        pod("b-0", "b", gpus=1),
    ]


def test_a_reclaim_that_succeeds_records_one_solved_job_and_the_scenario_it_simulated() -> None:
    record = _reclaim(_owed(2))
    assert record.jobs == {("solved", False): 1}
    assert record.scenarios == {(NODE_LOCAL_GREEDY, "emitted"): 1, (NODE_LOCAL_GREEDY, "simulated"): 1}
    assert [(generator, result) for generator, result, _ in record.durations] == [
        (NODE_LOCAL_GREEDY, "solved")
    ]
    assert record.action_budget_exhausted == 0
    assert record.budgeted


def test_without_a_generator_the_job_is_recorded_no_generator_and_no_scenario() -> None:
    plugins = [{"name": name} for name in DEFAULT_PLUGINS if not name.startswith("sg-")]
    record = _reclaim(_owed(2), parse_config({"tiers": [{"plugins": plugins}]}))
    assert record.jobs == {("no_generator", False): 1}
    assert record.scenarios == {}
    assert record.durations == []


def test_a_victim_set_the_first_generator_simulated_is_a_duplicate_for_the_next() -> None:
    # Taking a-0 would leave a below its deserved GPU: NodeLocalGreedy simulates {a-0} and it fails;
    # MultiNodeGang puts forward the same set, which is not simulated again.
    record = _reclaim(_owed(1))
    assert record.jobs == {("generators_exhausted", False): 1}
    assert record.scenarios == {
        (NODE_LOCAL_GREEDY, "emitted"): 1,
        (NODE_LOCAL_GREEDY, "simulated"): 1,
        (MULTI_NODE_GANG, "emitted"): 1,
        (MULTI_NODE_GANG, "duplicate"): 1,
    }
    assert [(generator, result) for generator, result, _ in record.durations] == [
        (NODE_LOCAL_GREEDY, "generators_exhausted"),
        (MULTI_NODE_GANG, "generators_exhausted"),
    ]
