"""How long the victim search may look (KAI v0.17's scenario search budgets,
`pkg/scheduler/actions/common/solvers/search_budget.go`), and how a job's search ended.

An action's budget starts when the action does (`maxActionSearchDuration`, per action, else `default`);
each job's search gets what the action has left, at most `maxJobSearchDuration` but at least
`minJobSearchDuration`; each generator of that job gets what the job has left, at most its own
`maxGeneratorSearchDuration`. A maximum of 0 is no limit. A generator out of time hands over to the next
one; a job out of time ends its search `DEADLINE`, and a job whose budget is spent before it starts is
`NOT_ATTEMPTED`: either way the whole action stops, leaving the jobs after it for the next cycle (KAI's
`shouldStopActionForSearchResult`).

The clock is the action's (`time.perf_counter` unless a test gives another): budgets are wall time, as in
KAI, and KAI's defaults (minutes) are far beyond what a cycle here takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import Enum

from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets
from kai_scheduler.framework.search_record import SearchRecord

Clock = Callable[[], float]


class SearchEnd(Enum):
    """Why a job's victim search stopped (KAI's SearchResultReason)."""

    SOLVED = "solved"
    EXHAUSTED = "generators_exhausted"  # every generator tried all it had (or ran out of its own time)
    DEADLINE = "deadline_exhausted"
    NO_GENERATOR = "no_generator"
    NOT_ATTEMPTED = "not_attempted"

    @property
    def stops_action(self) -> bool:
        return self in (SearchEnd.DEADLINE, SearchEnd.NOT_ATTEMPTED)


def _limit(seconds: float) -> float:
    return math.inf if seconds <= 0 else seconds


class ActionBudget:
    """One action's search budget, from the moment it is made."""

    def __init__(
        self, budgets: ScenarioSearchBudgets, action: str, clock: Clock, record: SearchRecord | None = None
    ) -> None:
        self.budgets = budgets
        self.clock = clock
        self.deadline = clock() + _limit(budgets.action_limit(action))
        self.record = record

    def past(self, deadline: float, now: float | None = None) -> bool:
        """Whether the clock (or `now`, read from it) has reached `deadline`; when it has, the record says
        the clock cut a search short (`SearchRecord.clock_ran_out`)."""
        if (self.clock() if now is None else now) < deadline:
            return False
        if self.record is not None:
            self.record.clock_ran_out = True
        return True

    def begin_job(self) -> JobBudget:
        now = self.clock()
        left = max(self.deadline - now, 0.0)
        remaining = max(min(left, _limit(self.budgets.max_job)), self.budgets.min_job)
        # KAI's reduced_budget label: the action had less left than a job's maximum.
        reduced = self.budgets.max_job > 0 and left < self.budgets.max_job
        return JobBudget(self, now + remaining, reduced)

    def exhausted(self) -> bool:
        return self.past(self.deadline)


class JobBudget:
    """One job's search budget; `begin_generator` gives each generator its own share of it."""

    def __init__(self, action: ActionBudget, deadline: float, reduced: bool = False) -> None:
        self.action = action
        self.deadline = deadline
        self.reduced = reduced

    def exhausted(self) -> bool:
        return self.action.past(self.deadline)

    def begin_generator(self, name: str) -> Deadline:
        now = self.action.clock()
        own = now + _limit(self.action.budgets.generator_limit(name))
        return Deadline(self, min(own, self.deadline))


class Deadline:
    """What a generator's search asks between scenarios: whether its job, or it, is out of time."""

    def __init__(self, job: JobBudget, deadline: float) -> None:
        self.job = job
        self.deadline = deadline

    def passed(self) -> SearchEnd | None:
        """DEADLINE once the job's time is up, EXHAUSTED once the generator's is, else None."""
        action = self.job.action
        now = action.clock()
        if action.past(self.job.deadline, now):
            return SearchEnd.DEADLINE
        if action.past(self.deadline, now):
            return SearchEnd.EXHAUSTED
        return None


def unlimited() -> Deadline:
    """A deadline that never passes (a search run outside an action's budget)."""
    budget = ActionBudget(ScenarioSearchBudgets(max_action={"default": 0.0}, max_job=0.0), "", lambda: 0.0)
    return budget.begin_job().begin_generator("")
