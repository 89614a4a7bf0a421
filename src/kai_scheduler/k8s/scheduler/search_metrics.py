"""KAI v0.17's scenario-search metrics (`pkg/scheduler/metrics/metrics.go`, `scenario_search_*`), with
its names, types, labels and buckets under the scheduler's metrics namespace (`kai_` by default).

Fed after each cycle from what the victim search recorded in the session (`framework.search_record`,
one record per action) and from the configured `scenarioSearchBudgets`:

* `kai_scenario_search_jobs_total{action,result,reduced_budget}`: each job's search by how it ended
  (`solved`, `generators_exhausted`, `deadline_exhausted`, `no_generator`, `not_attempted`) and whether
  the action had less time left than a job's maximum.
* `kai_scenario_search_scenarios_total{action,generator,state}`: the scenarios each generator
  (`NodeLocalGreedy`, `MultiNodeGang`) put forward: `emitted`, then `duplicate` (a victim set simulated
  already this search) or `simulated`.
* `kai_scenario_search_duration_seconds{action,generator,result}`: each generator's attempt, by how it
  ended; buckets 1 ms x 2^0..15, as KAI's.
* `kai_scenario_search_action_budget_exhausted_total{action}`: a job's search stopped by the action's own
  budget running out.
* `kai_scenario_search_{action,job,generator}_budget_configured_seconds`: the configured budgets (0: no
  limit), an action's once it has run with one, as KAI sets them when the action builds its budget.

Not KAI's `validator_rejected` state nor its `unsupported` result: no solution validator here, and every
generator yields scenarios this search can run.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kai_scheduler.framework.decisions import ActionCounts
from kai_scheduler.framework.search_budgets import ScenarioSearchBudgets

DURATION_BUCKETS_S: tuple[float, ...] = tuple(0.001 * 2**exponent for exponent in range(16))
"""KAI's `prometheus.ExponentialBuckets(0.001, 2, 16)`: 1 ms to about 33 s."""


class ScenarioSearchMetrics:
    def __init__(self, registry: CollectorRegistry, prefix: str) -> None:
        def counter(name: str, documentation: str, labels: tuple[str, ...]) -> Counter:
            # (Named without `_total`, which the client adds: KAI's names end in it.)
            return Counter(prefix + name, documentation, labelnames=labels, registry=registry)

        def gauge(name: str, documentation: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(prefix + name, documentation, labelnames=labels, registry=registry)

        self.jobs = counter(
            "scenario_search_jobs",
            "Count of jobs considered by bounded scenario search.",
            ("action", "result", "reduced_budget"),
        )
        self.action_budget = gauge(
            "scenario_search_action_budget_configured_seconds",
            "Configured action scenario search budget in seconds.",
            ("action",),
        )
        self.job_budget = gauge(
            "scenario_search_job_budget_configured_seconds",
            "Configured per-job scenario search budget in seconds.",
        )
        self.generator_budget = gauge(
            "scenario_search_generator_budget_configured_seconds",
            "Configured generator scenario search budget in seconds.",
            ("generator",),
        )
        self.action_budget_exhausted = counter(
            "scenario_search_action_budget_exhausted",
            "Count of action-level scenario search budget exhaustion events.",
            ("action",),
        )
        self.duration = Histogram(
            prefix + "scenario_search_duration_seconds",
            "Elapsed generator-search duration in seconds.",
            labelnames=("action", "generator", "result"),
            buckets=DURATION_BUCKETS_S,
            registry=registry,
        )
        self.scenarios = counter(
            "scenario_search_scenarios",
            "Count of bounded-search scenarios by state.",
            ("action", "generator", "state"),
        )

    def observe(self, counts: Mapping[str, ActionCounts], budgets: ScenarioSearchBudgets | None) -> None:
        """One session's records, action by action; `budgets` for the configured-budget gauges."""
        for action, action_counts in counts.items():
            record = action_counts.search
            for (result, reduced), count in record.jobs.items():
                self.jobs.labels(action=action, result=result, reduced_budget=str(reduced).lower()).inc(count)
            for (generator, state), count in record.scenarios.items():
                self.scenarios.labels(action=action, generator=generator, state=state).inc(count)
            for generator, result, seconds in record.durations:
                self.duration.labels(action=action, generator=generator, result=result).observe(seconds)
            if record.action_budget_exhausted:
                self.action_budget_exhausted.labels(action=action).inc(record.action_budget_exhausted)
            if record.budgeted and budgets is not None:
                self.set_budgets(action, budgets)

    def set_budgets(self, action: str, budgets: ScenarioSearchBudgets) -> None:
        self.action_budget.labels(action=action).set(budgets.action_limit(action))
        self.job_budget.set(budgets.max_job)
        for generator, seconds in budgets.max_generator.items():
            self.generator_budget.labels(generator=generator).set(seconds)
