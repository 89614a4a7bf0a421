"""The victim search's scenario generators: the plugins sg-nodelocalgreedy and sg-multinodegang (KAI v0.17,
#1744/#1745), which KAI's standalone default configuration lists last.

Reference: KAI v0.17.0 `pkg/scheduler/conf_util/scheduler_conf_util.go` (defaultSchedulerConf),
`pkg/scheduler/actions/common/solvers/job_solver.go` (`SolveWithResult`: no registered generator ends the
search with `SearchResultNoGenerator`: reclaim, preempt and consolidation find nothing) and
`pkg/scheduler/plugins/nodelocalgreedy/nodelocalgreedy.go` (`addScenarioGenerator` registers a generator
once).
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import decision_rows, gang, node, open_session, pod, queue, run, snapshot_of
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.actions.solvers.victims import NO_GENERATOR
from kai_scheduler.cycle import ACTIONS, Scheduler
from kai_scheduler.framework.config import DEFAULT_PLUGINS, SchedulerConfig, parse_config
from kai_scheduler.framework.search_budgets import MULTI_NODE_GANG, NODE_LOCAL_GREEDY

GENERATOR_PLUGINS = ("sg-nodelocalgreedy", "sg-multinodegang")


def _config(plugins: tuple[str, ...]) -> SchedulerConfig:
    return parse_config({"tiers": [{"plugins": [{"name": name} for name in plugins]}]})


def _without(*left_out: str) -> SchedulerConfig:
    return _config(tuple(name for name in DEFAULT_PLUGINS if name not in left_out))


def _preempt() -> list[Any]:
    """inference (125) needs the GPU a train (50) pod of its queue holds."""
    return [
        node("n0", gpus=1),
        queue("q", gpu=1),
        pod("t", gpus=1, node_name="n0", priority_class="train"),
        pod("inf", gpus=1, priority_class="inference"),
    ]


def _reclaim() -> list[Any]:
    """b is owed a GPU that a (above its share) borrowed."""
    return [
        node("n0", gpus=2),
        queue("a", gpu=1),
        queue("b", gpu=1),
        *[pod(f"a-{i}", "a", gpus=1, node_name="n0") for i in range(2)],
        pod("b-0", "b", gpus=1),
    ]


def _consolidation() -> list[Any]:
    """A 2-GPU pod fits only once one of two 1-GPU pods on separate nodes moves next to the other."""
    return [
        node("a", gpus=2),
        node("b", gpus=2),
        queue("q"),
        pod("p0", gpus=1, node_name="a"),
        pod("p1", gpus=1, node_name="b"),
        pod("big", gpus=2),
    ]


def _gang_preempt() -> list[Any]:
    """A gang of two inference pods needs both GPUs two train pods hold, on two nodes."""
    return [
        node("n0", gpus=1),
        node("n1", gpus=1),
        queue("q", gpu=2),
        pod("t0", gpus=1, node_name="n0", priority_class="train"),
        pod("t1", gpus=1, node_name="n1", priority_class="train"),
        *gang("g", size=2, gpus=1, priority_class="inference"),
    ]


CASES = {"preempt": _preempt, "reclaim": _reclaim, "consolidation": _consolidation, "gang": _gang_preempt}


def _actions(result: Any) -> set[str]:
    return {action for _, action, _, _ in decision_rows(result)} - {"allocate"}


def test_the_default_configuration_lists_both_generator_plugins_last_as_kai() -> None:
    assert DEFAULT_PLUGINS[-2:] == GENERATOR_PLUGINS
    session = open_session(snapshot_of(_preempt()), SchedulerConfig())
    assert session.points.scenario_generators == [NODE_LOCAL_GREEDY, MULTI_NODE_GANG]


@pytest.mark.parametrize("case", sorted(CASES))
def test_with_the_default_generators_every_victim_action_finds_its_victims(case: str) -> None:
    assert _actions(run(CASES[case](), cycles=1)) in ({"preempt"}, {"reclaim"}, {"consolidation"})


@pytest.mark.parametrize("case", sorted(CASES))
def test_without_a_generator_plugin_no_victim_action_evicts_anyone(case: str) -> None:
    result = run(CASES[case](), _without(*GENERATOR_PLUGINS), cycles=1)
    assert decision_rows(result) == []
    # (It still waits, and says why.)
    assert any(NO_GENERATOR in reason for reason in result.reasons.values())


@pytest.mark.parametrize("case", ["preempt", "reclaim"])
@pytest.mark.parametrize("alone", GENERATOR_PLUGINS)
def test_either_generator_alone_finds_a_one_pod_preemptors_victims(case: str, alone: str) -> None:
    others = tuple(name for name in GENERATOR_PLUGINS if name != alone)
    with_both = decision_rows(run(CASES[case](), cycles=1))
    assert decision_rows(run(CASES[case](), _without(*others), cycles=1)) == with_both


def test_generator_plugins_register_in_plugin_order_and_once() -> None:
    names = (*DEFAULT_PLUGINS[:-2], "sg-multinodegang", "sg-nodelocalgreedy", "sg-multinodegang")
    session = open_session(snapshot_of(_preempt()), _config(names))
    assert session.points.scenario_generators == [MULTI_NODE_GANG, NODE_LOCAL_GREEDY]


def test_generator_plugins_accept_and_ignore_arguments_as_kai() -> None:
    document = {"tiers": [{"plugins": [{"name": "sg-nodelocalgreedy", "arguments": {"x": "1"}}]}]}
    Scheduler(parse_config(document))


def _full_cluster_of_one_gpu_pods(running_queue: str) -> list[Any]:
    """10 nodes x 8 GPUs, each GPU held by a 1-GPU train job of `running_queue` (job i on node i % 10)."""
    objects: list[Any] = [node(f"node{i}", gpus=8) for i in range(10)]
    objects += [
        pod(f"running-job-{i}", running_queue, gpus=1, node_name=f"node{i % 10}", priority_class="train")
        for i in range(80)
    ]
    return objects


def test_a_gang_no_fair_reclaim_can_place_is_searched_by_multinodegang_and_left_pending() -> None:
    # KAI v0.17 integration_tests/reclaim/reclaim_topology_test.go TestUnschedulableDistributedReclaimTopology
    # and TestDefaultGeneratorPortfolioPreservesTopologyReclaimCoverage: queue-1 (deserved 80) wants 10 x 8
    # GPUs of a cluster queue-0 (deserved 1) fills; taking all 80 would leave queue-0 below its deserved
    # GPU, so nothing is reclaimed, but the default portfolio reaches MultiNodeGang.
    objects = [
        *_full_cluster_of_one_gpu_pods("queue-0"),
        queue("queue-0", gpu=1, gpu_weight=0),
        queue("queue-1", gpu=80, gpu_weight=0),
        *gang("unschedulable-distributed-job", "queue-1", size=10, gpus=8, priority_class="train"),
    ]
    session = open_session(snapshot_of(objects), SchedulerConfig())
    searches: list[None] = []
    session.points.on_solution_start.append(lambda: searches.append(None))
    Reclaim().execute(session)
    assert searches, "reclaim searched for the distributed job"
    counts = session.counts["reclaim"]
    assert counts.scenarios_simulated + counts.scenarios_filtered > 0
    assert session.decisions == []


def test_many_one_gpu_jobs_reclaim_a_whole_cluster_of_one_gpu_jobs() -> None:
    # KAI v0.17 integration_tests/reclaim/reclaim_many_single_gpu_topology_test.go
    # TestManySingleGPUJobsReclaimTopology (without its 30s reclaim min runtime, which KAI's harness jobs,
    # started long ago, do not feel): 80 pending 1-GPU jobs of a queue owed 80 GPUs, one cycle of every
    # action: each running job loses its pod, each pending job is pipelined.
    objects = [
        *_full_cluster_of_one_gpu_pods("running"),
        queue("running", gpu=0, gpu_weight=0),
        queue("pending", gpu=80, gpu_weight=0),
        *[pod(f"pending-job-{i}", "pending", gpus=1, priority_class="train") for i in range(80)],
    ]
    session = open_session(snapshot_of(objects), SchedulerConfig())
    for name in SchedulerConfig().actions:
        ACTIONS[name]().execute(session)
    evicted = {d.pod for d in session.decisions if d.type == "evict"}
    pipelined = {d.pod for d in session.decisions if d.type == "pipeline"}
    assert evicted == {f"default/running-job-{i}" for i in range(80)}
    assert pipelined == {f"default/pending-job-{i}" for i in range(80)}
