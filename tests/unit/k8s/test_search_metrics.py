"""KAI v0.17's scenario-search metrics on /metrics (`k8s/scheduler/search_metrics.py`): names, types,
labels and buckets as KAI's `pkg/scheduler/metrics/metrics.go`, fed from a session's search record.

KAI's `metrics_test.go` TestScenarioSearchMetricWrappersUseExpectedLabels,
TestScenarioSearchDurationMetricObservesSeconds and
TestScenarioSearchConfiguredBudgetMetricsAcceptUnlimitedZero are ported by behaviour: the same label
sets counted once each, a duration observed in seconds, and configured budgets of 0 (no limit) shown as 0.
"""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kai_scheduler.framework.decisions import ActionCounts, SessionResult
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets
from kai_scheduler.framework.search_record import SearchRecord
from kai_scheduler.k8s.scheduler.metrics import SchedulerMetrics
from kai_scheduler.k8s.scheduler.search_metrics import DURATION_BUCKETS_S

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _observe(record: SearchRecord, budgets: ScenarioSearchBudgets | None = None) -> tuple[str, Samples]:
    metrics = SchedulerMetrics()
    result = SessionResult(
        decisions=[], unschedulable={}, fair_share={}, counts={"reclaim": ActionCounts(search=record)}
    )
    metrics.observe_session(result, 0.1, search_budgets=budgets)
    text = generate_latest(metrics.registry).decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, samples


def test_job_scenario_and_action_budget_counters_carry_kais_labels() -> None:
    record = SearchRecord(
        jobs={("solved", True): 1},
        scenarios={("MultiNodeGang", "emitted"): 1, ("MultiNodeGang", "duplicate"): 1},
        action_budget_exhausted=1,
    )
    text, samples = _observe(record)
    jobs = (("action", "reclaim"), ("reduced_budget", "true"), ("result", "solved"))
    assert samples[("kai_scenario_search_jobs_total", jobs)] == 1
    assert samples[("kai_scenario_search_action_budget_exhausted_total", (("action", "reclaim"),))] == 1
    for state in ("emitted", "duplicate"):
        labels = (("action", "reclaim"), ("generator", "MultiNodeGang"), ("state", state))
        assert samples[("kai_scenario_search_scenarios_total", labels)] == 1
    for name in ("jobs", "scenarios", "action_budget_exhausted"):
        assert f"# TYPE kai_scenario_search_{name}_total counter" in text
    # Counters accumulate over cycles, as KAI's.
    metrics = SchedulerMetrics()
    for _ in range(2):
        counts = {"reclaim": ActionCounts(search=SearchRecord(jobs={("no_generator", False): 1}))}
        metrics.observe_session(SessionResult([], {}, {}, counts=counts), 0.1)
    text = generate_latest(metrics.registry).decode()
    line = 'kai_scenario_search_jobs_total{action="reclaim",reduced_budget="false",result="no_generator"} 2.0'
    assert line in text


def test_generator_duration_is_observed_in_seconds_on_kais_buckets() -> None:
    record = SearchRecord(durations=[("NodeLocalGreedy", "generators_exhausted", 2.5)])
    text, samples = _observe(record)
    labels = (("action", "reclaim"), ("generator", "NodeLocalGreedy"), ("result", "generators_exhausted"))
    assert samples[("kai_scenario_search_duration_seconds_count", labels)] == 1
    assert samples[("kai_scenario_search_duration_seconds_sum", labels)] == 2.5
    assert "# TYPE kai_scenario_search_duration_seconds histogram" in text
    bounds = sorted(
        float(dict(key[1])["le"])
        for key in samples
        if key[0] == "kai_scenario_search_duration_seconds_bucket" and dict(key[1])["le"] != "+Inf"
    )
    assert bounds == list(DURATION_BUCKETS_S)
    assert (bounds[0], bounds[-1], len(bounds)) == (
        0.001,
        0.001 * 2**15,
        16,
    )  # ExponentialBuckets(0.001, 2, 16)
    bucket = "kai_scenario_search_duration_seconds_bucket"
    # 2.5 s falls in the 4.096 s bucket, not the 2.048 s one.
    assert samples[(bucket, tuple(sorted((*labels, ("le", "2.048")))))] == 0
    assert samples[(bucket, tuple(sorted((*labels, ("le", "4.096")))))] == 1


def test_configured_budgets_are_shown_for_an_action_that_ran_with_one_and_zero_is_no_limit() -> None:
    budgets = ScenarioSearchBudgets(
        max_action={"default": 0.0, "reclaim": 0.0},
        max_job=0.0,
        max_generator={"default": 0.0, "NodeLocalGreedy": 0.0, "MultiNodeGang": 45.0},
    )
    text, samples = _observe(SearchRecord(budgeted=True), budgets)
    assert samples[("kai_scenario_search_action_budget_configured_seconds", (("action", "reclaim"),))] == 0
    assert samples[("kai_scenario_search_job_budget_configured_seconds", ())] == 0
    generator = "kai_scenario_search_generator_budget_configured_seconds"
    assert samples[(generator, (("generator", "NodeLocalGreedy"),))] == 0
    assert samples[(generator, (("generator", "MultiNodeGang"),))] == 45
    assert "# TYPE kai_scenario_search_job_budget_configured_seconds gauge" in text
    # An action that did not run with a budget shows none.
    _, samples = _observe(SearchRecord(), budgets)
    assert ("kai_scenario_search_action_budget_configured_seconds", (("action", "reclaim"),)) not in samples
