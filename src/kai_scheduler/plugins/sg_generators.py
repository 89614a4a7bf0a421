"""sg-nodelocalgreedy and sg-multinodegang: the plugins that give the victim search its scenario generators
(KAI v0.17's `pkg/scheduler/plugins/nodelocalgreedy` and `multinodegang`).

Each registers its generator (named as `framework.search_budgets` names them) once per session, in plugin
order: the order the search tries them in. The searches themselves are in `actions/solvers/victim_search`
(plugins do not import actions here); a plugin owns whether its generator is tried, and when.
"""

from __future__ import annotations

from typing import Any

from kai_scheduler.framework.search_budgets import MULTI_NODE_GANG, NODE_LOCAL_GREEDY
from kai_scheduler.framework.session import Session


class _GeneratorPlugin:
    name = ""
    generator = ""

    def __init__(self, arguments: dict[str, Any]) -> None:
        # Arguments are accepted and ignored, as KAI's constructors ignore theirs.
        self.arguments = arguments

    def on_session_open(self, session: Session) -> None:
        # (Listed twice in a configuration, it still registers once, as KAI's addScenarioGenerator.)
        generators = session.points.scenario_generators
        if self.generator not in generators:
            generators.append(self.generator)

    def on_session_close(self, session: Session) -> None:
        return None


class NodeLocalGreedyPlugin(_GeneratorPlugin):
    """Scenarios whose victims, beyond those a smaller part of the job already needed, are on one node."""

    name = "sg-nodelocalgreedy"
    generator = NODE_LOCAL_GREEDY


class MultiNodeGangPlugin(_GeneratorPlugin):
    """Scenarios whose victims span nodes, a victim gang's pods on every node taken together."""

    name = "sg-multinodegang"
    generator = MULTI_NODE_GANG
