"""What the victim search did in one action of a session, for KAI v0.17's scenario-search metrics
(`pkg/scheduler/metrics/metrics.go`, `scenario_search_*`): each job's search by how it ended, the
scenarios each generator put forward by what became of them, each generator's time, and how often the
action's own budget ran out. Filled by `actions/solvers`; the metrics edge reads it."""

from __future__ import annotations

from dataclasses import dataclass, field

# What became of a scenario a generator put forward (KAI's `state` label): every one is `emitted`, then
# either found among the victim sets already simulated (`duplicate`) or `simulated`.
EMITTED = "emitted"
DUPLICATE = "duplicate"
SIMULATED = "simulated"


@dataclass(slots=True)
class SearchRecord:
    jobs: dict[tuple[str, bool], int] = field(default_factory=dict)  # (how it ended, reduced budget)
    scenarios: dict[tuple[str, str], int] = field(default_factory=dict)  # (generator, state)
    durations: list[tuple[str, str, float]] = field(default_factory=list)  # (generator, result, seconds)
    action_budget_exhausted: int = 0
    budgeted: bool = False  # the action ran with a search budget (its configured budgets apply)
    # The clock cut some search short: the same search at another speed may end otherwise.
    clock_ran_out: bool = False
    # The generator searching now, for the scenarios it puts forward.
    generator: str = ""

    def job(self, result: str, reduced_budget: bool) -> None:
        key = (result, reduced_budget)
        self.jobs[key] = self.jobs.get(key, 0) + 1

    def scenario(self, state: str) -> None:
        """A scenario of the current generator: emitted, and then `state`."""
        for each in (EMITTED, state):
            key = (self.generator, each)
            self.scenarios[key] = self.scenarios.get(key, 0) + 1
