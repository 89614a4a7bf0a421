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
from kai_scheduler.actions.victims import NO_GENERATOR
from kai_scheduler.framework.config import DEFAULT_PLUGINS, SchedulerConfig, parse_config
from kai_scheduler.framework.search_budgets import MULTI_NODE_GANG, NODE_LOCAL_GREEDY
from kai_scheduler.scheduler import Scheduler

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
