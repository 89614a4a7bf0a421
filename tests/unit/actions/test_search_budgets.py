"""The victim search's time budgets (KAI v0.17's scenarioSearchBudgets) and the rule that ends an action:
when a job's search ends `deadline_exhausted` or `not_attempted`, reclaim, preempt and consolidation stop
(KAI's `shouldStopActionForSearchResult` in reclaim.go, preempt.go and consolidation.go).

The budgets are wall time in KAI; here the action's clock is replaced by one the test moves, so nothing
depends on the machine's speed. Reference: KAI v0.17.0 `pkg/scheduler/actions/common/solvers/
search_budget.go` (`BeginJob`: what the action has left, at most maxJobSearchDuration, at least
minJobSearchDuration; `BeginGenerator`: at most the generator's own budget), `job_solver.go`
(`SolveWithResult`: a job budget spent before the search is `not_attempted`; `solvePartialJob`: a job
budget spent between scenarios is `deadline_exhausted`), `scenario_generator.go` (a generator out of time
hands over to the next) and `reclaim/reclaim_budget_test.go`.
"""

from __future__ import annotations

from typing import Any

from helpers import node, open_session, pod, queue, snapshot_of
from kai_scheduler.actions.reclaim import Reclaim
from kai_scheduler.actions.solvers.search_budget import ActionBudget, SearchEnd
from kai_scheduler.actions.solvers.victims import OUT_OF_TIME
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo


class FakeClock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class TickingClock(FakeClock):
    """A second passes at every look at the clock: a budget of a fraction of a second is spent at the
    first look after it began, one of minutes never within these few searches."""

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _two_reclaimers() -> list[Any]:
    """b is owed two GPUs a borrowed; b-0 and b-1 (not alike: each is searched) each wait for one."""
    return [
        node("n0", gpus=2),
        queue("a", gpu=0),
        queue("b", gpu=2),
        pod("a-0", "a", gpus=1, node_name="n0", priority_class="train"),
        pod("a-1", "a", gpus=1, node_name="n0", priority_class="train"),
        pod("b-0", "b", gpus=1, priority_class="train"),
        pod("b-1", "b", gpus=1, cpu="2", priority_class="train"),
    ]


def _session(budgets: dict[str, Any] | None = None) -> Session:
    config = parse_config({"scenarioSearchBudgets": budgets}) if budgets else SchedulerConfig()
    return open_session(snapshot_of(_two_reclaimers()), config)


def _evicted(session: Session) -> list[str]:
    return [d.pod for d in session.decisions if d.type == "evict"]


def _advance_at_each_search(session: Session, clock: FakeClock, seconds: float) -> None:
    """Let `seconds` pass once each job's search has begun (its budget is set by then)."""

    def later() -> None:
        clock.now += seconds

    session.points.on_solution_start.append(later)


def _reclaim(session: Session, clock: FakeClock) -> Reclaim:
    """Run reclaim on the session with this clock."""
    action = Reclaim()
    action.clock = clock
    action.execute(session)
    return action


def test_with_kai_defaults_both_reclaimers_take_their_gpu() -> None:
    session = _session()
    _reclaim(session, FakeClock())
    assert sorted(_evicted(session)) == ["default/a-0", "default/a-1"]


def test_a_job_whose_search_runs_out_of_time_stops_the_whole_action() -> None:
    # maxJobSearchDuration 10s; 11 s pass once b-0's search began: it ends deadline_exhausted, and b-1,
    # which would have found its victim, is not looked at this cycle.
    session = _session({"maxJobSearchDuration": "10s"})
    clock = FakeClock()
    _advance_at_each_search(session, clock, 11.0)
    action = _reclaim(session, clock)
    assert session.decisions == []
    assert action.search_end is SearchEnd.DEADLINE
    assert OUT_OF_TIME in str(session.unschedulable["default/pg-b-0"])
    assert OUT_OF_TIME not in str(session.unschedulable.get("default/pg-b-1", ""))


def test_time_within_the_job_budget_changes_nothing() -> None:
    session = _session({"maxJobSearchDuration": "10s"})
    clock = FakeClock()
    _advance_at_each_search(session, clock, 9.0)
    _reclaim(session, clock)
    assert sorted(_evicted(session)) == ["default/a-0", "default/a-1"]
    assert not session.counts["reclaim"].search.clock_ran_out


def test_a_search_the_clock_cut_short_is_recorded_so() -> None:
    """What the memory of unchanged cycles asks: at another speed this cycle may decide otherwise."""
    session = _session({"maxJobSearchDuration": "10s"})
    clock = FakeClock()
    _advance_at_each_search(session, clock, 11.0)
    _reclaim(session, clock)
    assert session.counts["reclaim"].search.clock_ran_out


class _SpentBeforeTheFirstJob(Reclaim):
    """Reclaim whose clock jumps once its candidates are known, before its first job's search."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__()
        self.clock = clock
        self.seconds = seconds

    def started(self, session: Session, candidates: list[JobInfo]) -> None:
        self.clock.now += self.seconds


def test_an_action_budget_spent_before_a_job_leaves_it_not_attempted_and_stops_the_action() -> None:
    session = _session({"maxActionSearchDuration": {"reclaim": "10s"}})
    clock = FakeClock()
    action = _SpentBeforeTheFirstJob(clock, 11.0)
    action.execute(session)
    assert session.decisions == []
    assert action.search_end is SearchEnd.NOT_ATTEMPTED


def test_the_action_budget_of_another_action_does_not_apply() -> None:
    session = _session({"maxActionSearchDuration": {"preempt": "10s"}})
    action = _SpentBeforeTheFirstJob(FakeClock(), 11.0)
    action.execute(session)
    assert sorted(_evicted(session)) == ["default/a-0", "default/a-1"]


def test_min_job_search_duration_gives_a_job_time_the_action_no_longer_has() -> None:
    # reclaim/reclaim_budget_test.go TestAttemptToReclaimLetsSolverApplyMinJobBudgetAfterActionBudgetExpires
    session = _session({"maxActionSearchDuration": {"reclaim": "10s"}, "minJobSearchDuration": "30s"})
    action = _SpentBeforeTheFirstJob(FakeClock(), 11.0)
    action.execute(session)
    assert sorted(_evicted(session)) == ["default/a-0", "default/a-1"]


def test_a_generator_out_of_time_hands_over_to_the_next() -> None:
    # NodeLocalGreedy's budget is spent at its first look at the clock; MultiNodeGang (its own 2m) finds
    # the same victims, and the job's search is not out of time.
    session = _session({"maxGeneratorSearchDuration": {"NodeLocalGreedy": "1ms"}})
    action = _reclaim(session, TickingClock())
    assert sorted(_evicted(session)) == ["default/a-0", "default/a-1"]
    assert action.search_end is SearchEnd.SOLVED


def test_every_generator_out_of_time_is_not_a_deadline_and_the_action_goes_on() -> None:
    generators = {"default": "1ms", "NodeLocalGreedy": "1ms", "MultiNodeGang": "1ms"}
    session = _session({"maxGeneratorSearchDuration": generators})
    action = _reclaim(session, TickingClock())
    assert session.decisions == []
    assert action.search_end is SearchEnd.EXHAUSTED
    # Both jobs were searched (generators_exhausted does not stop the action): each says reclaim gave up.
    reasons = [str(reason) for reason in session.unschedulable.values()]
    assert sum(Reclaim.gave_up in reason for reason in reasons) == 2


def test_zero_is_no_limit() -> None:
    clock = FakeClock()
    budgets = ScenarioSearchBudgets(max_action={"default": 0.0}, max_job=0.0, max_generator={"default": 0.0})
    job = ActionBudget(budgets, "reclaim", clock).begin_job()
    deadline = job.begin_generator("NodeLocalGreedy")
    clock.now += 1e9
    assert not job.exhausted()
    assert deadline.passed() is None


def test_the_search_record_names_a_deadline_the_reduced_budget_and_the_action_budget_run_out() -> None:
    # KAI v0.17 job_solver.go: a job whose budget runs out mid-search counts deadline_exhausted, with
    # reduced_budget when the action had less left than maxJobSearchDuration, and the action's budget
    # exhausted once it is spent too.
    session = _session({"maxActionSearchDuration": {"reclaim": "5s"}, "maxJobSearchDuration": "10s"})
    clock = FakeClock()
    _advance_at_each_search(session, clock, 11.0)
    _reclaim(session, clock)
    record = session.counts["reclaim"].search
    assert record.jobs == {("deadline_exhausted", True): 1}
    assert record.action_budget_exhausted == 1


def test_a_job_not_attempted_is_recorded_so_and_not_reduced() -> None:
    session = _session({"maxActionSearchDuration": {"reclaim": "10s"}})
    _SpentBeforeTheFirstJob(FakeClock(), 11.0).execute(session)
    record = session.counts["reclaim"].search
    assert record.jobs == {("not_attempted", False): 1}
    assert record.scenarios == {}
