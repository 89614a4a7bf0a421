"""`reconcile_metrics`: a reconciler's outcomes under controller-runtime's metric names, labels and result
values, and two reconcilers of one process that KAI names alike kept apart."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from kai_scheduler.k8s.runtime import reconcile_metrics
from kai_scheduler.k8s.runtime.reconciler import PermanentError, Reconciler, Result, TemporaryError

OUTCOMES: dict[str, Result | Exception | None] = {
    "done": None,
    "later": Result(requeue_after=5),
    "again": Result(requeue_after=0),
    "flaky": TemporaryError("try again", delay=60),
    "broken": PermanentError("never"),
}
OUTCOMES_BY_RESULT = {"success": 1.0, "requeue_after": 1.0, "requeue": 1.0, "error": 2.0}


class Scripted(Reconciler):
    """Each key ends as `OUTCOMES` says."""

    name = "scripted"
    controller = "thing"

    async def reconcile(self, key: str) -> Result | None:
        outcome = OUTCOMES[key]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


class Twin(Scripted):
    name = "twin"


def test_outcomes_under_controller_runtimes_names_and_labels() -> None:
    registry = CollectorRegistry()
    reconciler = Scripted(workers=3)

    async def body() -> None:
        reconcile_metrics.export(registry, reconciler)
        for key in OUTCOMES:
            await reconciler.process(key)
        reconciler.enqueue("waiting")

    asyncio.run(body())

    def value(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(metric, labels)

    thing = {"controller": "thing"}
    queue = {"name": "thing", "controller": "thing"}
    results = {r: value("controller_runtime_reconcile_total", **thing, result=r) for r in OUTCOMES_BY_RESULT}
    assert results == OUTCOMES_BY_RESULT
    assert value("controller_runtime_reconcile_errors_total", **thing) == 2
    assert value("controller_runtime_terminal_reconcile_errors_total", **thing) == 1
    assert value("controller_runtime_reconcile_time_seconds_count", **thing) == 5
    assert value("controller_runtime_reconcile_time_seconds_bucket", **thing, le="60.0") == 5
    assert value("controller_runtime_max_concurrent_reconciles", **thing) == 3
    assert value("controller_runtime_active_workers", **thing) == 0
    # "again" is back at once, "waiting" was added; "flaky" comes back after its delay, "later" later.
    assert value("workqueue_depth", **queue, priority="") == 2
    assert value("workqueue_adds_total", **queue) == 2
    assert value("workqueue_retries_total", **queue) == 1


def test_a_second_controller_of_the_same_name_is_labelled_by_its_own_name() -> None:
    registry = CollectorRegistry()
    first, second = Scripted(), Twin()
    reconcile_metrics.export(registry, first)
    reconcile_metrics.export(registry, second)
    reconcile_metrics.export(registry, first)  # again: still one series
    workers = {
        controller: registry.get_sample_value(
            "controller_runtime_max_concurrent_reconciles", {"controller": controller}
        )
        for controller in ("thing", "twin", "scripted")
    }
    assert workers == {"thing": 1, "twin": 1, "scripted": None}
