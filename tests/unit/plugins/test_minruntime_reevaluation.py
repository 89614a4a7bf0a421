"""minruntime asks again each time: what it remembers across the victims of a session is the runtime a
pair of queues resolves to, never whether a job was protected, so a victim whose start moved is judged on
its new start.

Ported by name from KAI v0.17.0 `pkg/scheduler/plugins/minruntime/minruntime_test.go` (#1809, which
memoised per-pair lookups to save memory): "re-evaluates protection for a previously checked victim"
(preemptFilterFn) and "re-evaluates protection for a previously checked job pair" (reclaimFilterFn). KAI's
queues there: prod sets reclaim 30s (the value lca resolves to), prod-team2 preempt 15s and reclaim
35s; the pending job is in dev-team1.
"""

from __future__ import annotations

from helpers import open_session, queue, queue_with_min_runtime
from kai_scheduler.framework.session import Session
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.plugins.minruntime import MinRuntimePlugin


def session_and_plugin() -> tuple[Session, MinRuntimePlugin]:
    objects = [
        queue("dev"),
        queue_with_min_runtime("prod", reclaim="30s"),
        queue("dev-team1", parent="dev"),
        queue_with_min_runtime("prod-team2", parent="prod", preempt="15s", reclaim="35s"),
    ]
    session = open_session(objects, plugins=[])
    plugin = MinRuntimePlugin({"defaultPreemptMinRuntime": "5s", "defaultReclaimMinRuntime": "3s"})
    plugin.on_session_open(session)
    session.now = 100.0
    return session, plugin


def job(name: str, queue_name: str, last_start: float | None) -> JobInfo:
    return JobInfo("ns", name, queue_name, 50, True, 1, 0.0, last_start=last_start)


def test_re_evaluates_protection_for_a_previously_checked_victim() -> None:
    session, plugin = session_and_plugin()
    pending = job("pending-job", "dev-team1", None)
    victim = job("victim-job", "prod-team2", session.now - 10)
    assert plugin.preempt_protected(pending, victim)
    victim.last_start = session.now - 30
    assert not plugin.preempt_protected(pending, victim)


def test_re_evaluates_protection_for_a_previously_checked_job_pair() -> None:
    session, plugin = session_and_plugin()
    pending = job("pending-job", "dev-team1", None)
    victim = job("victim-job", "prod-team2", session.now - 20)
    assert plugin.reclaim_protected(pending, victim)
    victim.last_start = session.now - 40
    assert not plugin.reclaim_protected(pending, victim)
