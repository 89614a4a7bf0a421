"""Preemption delay (KAI v0.17, #1886): a pending job may not trigger evictions (preempt, reclaim,
consolidation) until its `spec.preemptionDelay` has passed since the later of its creation and its last
eviction; plain allocation and its own evictability are unaffected.

The action cases are KAI's, translated by hand (the table converter reads KAI's baseline harness, which has
no `PreemptionDelay` or `JobAgeInMinutes`): `pkg/scheduler/actions/preempt/preempt_test.go`
`TestHandlePreempt` and `pkg/scheduler/actions/reclaim/reclaim_test.go` `TestHandleReclaim`; the rest
follow `pkg/scheduler/api/podgroup_info/job_info_test.go` `TestPreemptionDelayEnd`,
`pkg/scheduler/actions/utils/job_order_by_queue_test.go` `TestInitializeWithJobs_PreemptionDelayFilter`
and `pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper_test.go`
`TestCalcPodGroupPreemptionDelay` (KAI v0.17.0).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from helpers import START, evicted, node, pipelines, pod, pod_group_manifest, priority_class, queue, run
from kai_scheduler.actions.solvers import victims
from kai_scheduler.actions.solvers.victims import within_preemption_delay
from kai_scheduler.api.constants import LAST_EVICTION_TIMESTAMP_ANNOTATION
from kai_scheduler.api.objects import PodGroup
from kai_scheduler.api.reasons import PREEMPTION_DELAY_NOT_ELAPSED, code_of
from kai_scheduler.controlplane.bookkeeping import next_job_times
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.session import Session
from kai_scheduler.model.builder import annotation_preemption_delay
from kai_scheduler.model.cache import build_snapshot
from kai_scheduler.model.jobs import JobInfo
from kai_scheduler.model.snapshot import ClusterState, JobTimes

TEN_MINUTES = 600.0


def delayed_group(name: str, queue_name: str, *, delay: str = "10m", age_minutes: int = 0) -> PodGroup:
    """A PodGroup with a preemption delay, created `age_minutes` before the run starts (KAI's
    `JobAgeInMinutes`)."""
    created = (START - timedelta(minutes=age_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest = pod_group_manifest(name, queue_name, created=created)
    manifest["spec"]["preemptionDelay"] = delay
    return PodGroup.model_validate(manifest)


def preempt_cluster(*, preemptor_age: int = 0, victim_delay: bool = False) -> list[Any]:
    """KAI's preempt cases: a train job runs on node0's only GPU; a build job of the same queue waits."""
    victim: list[Any] = [pod("running-job0", "queue0", gpus=1, priority_class="train")]
    if victim_delay:
        victim = [
            delayed_group("running-job0", "queue0"),
            pod("running-job0", "queue0", gpus=1, priority_class="train", group="running-job0"),
        ]
    return [
        node("node0", gpus=1),
        queue("queue0", gpu=1),
        *victim,
        delayed_group("pending-job0", "queue0", age_minutes=preemptor_age),
        pod("pending-job0", "queue0", gpus=1, priority_class="build", group="pending-job0", arrival=1),
    ]


def test_pending_build_job_within_preemption_delay_does_not_preempt() -> None:
    """TestHandlePreempt "pending build job within preemption delay - don't preempt"."""
    result = run(preempt_cluster(), until=300)
    assert evicted(result) == []
    reason = result.reasons["default/pending-job0"]
    assert "Workload is within its preemption delay window (10m0s) and may not trigger evictions" in reason


def test_pending_build_job_with_elapsed_preemption_delay_preempts() -> None:
    """TestHandlePreempt "pending build job with elapsed preemption delay - preempt" (created 30m ago)."""
    result = run(preempt_cluster(preemptor_age=30), cycles=2)
    assert evicted(result, "preempt") == ["running-job0"]


def test_running_job_with_preemption_delay_is_still_evictable() -> None:
    """TestHandlePreempt "running job with preemption delay is still evictable as victim - preempt": the
    delay restricts what a job does to others, not what others do to it."""
    result = run(preempt_cluster(preemptor_age=30, victim_delay=True), cycles=2)
    assert evicted(result, "preempt") == ["running-job0"]


def reclaim_cluster(*, reclaimer_age: int) -> list[Any]:
    """KAI's reclaim cases: queue0 holds 20 GPUs of 32 (deserved 10); queue1 (deserved 10) asks for 10."""
    return [
        node("node0", gpus=16),
        node("node1", gpus=16),
        queue("queue0", gpu=10),
        queue("queue1", gpu=10),
        pod("q0-running-0", "queue0", gpus=10),
        pod("q0-running-1", "queue0", gpus=10),
        pod("q0-running-2", "queue0", gpus=6),
        pod("q0-running-3", "queue0", gpus=6),
        delayed_group("q1-pending-job", "queue1", age_minutes=reclaimer_age),
        pod("q1-pending-job", "queue1", gpus=10, group="q1-pending-job", arrival=1),
    ]


def test_pending_job_within_preemption_delay_does_not_reclaim() -> None:
    """TestHandleReclaim "pending job within preemption delay - don't reclaim"."""
    assert evicted(run(reclaim_cluster(reclaimer_age=0), until=300)) == []


def test_pending_job_with_elapsed_preemption_delay_reclaims() -> None:
    """TestHandleReclaim "pending job with elapsed preemption delay - reclaim"."""
    result = run(reclaim_cluster(reclaimer_age=30), cycles=2)
    assert evicted(result, "reclaim")
    assert "q1-pending-job" in pipelines(result.cycles[1].decisions)


def test_the_delay_ends_counted_from_creation_and_the_run_wakes_then() -> None:
    """Within the run: the PodGroup created at 0s (its pod arrives at 1s) with a 10m delay preempts at
    600s, not before and no later (the delay's end wakes the simulation)."""
    result = run(preempt_cluster())
    evictions = [(r.time, d.pod) for r in result.cycles for d in r.decisions if d.type == "evict"]
    assert evictions == [(TEN_MINUTES, "default/running-job0")]


def test_allocation_into_free_capacity_is_not_delayed() -> None:
    """TestInitializeWithJobs_PreemptionDelayFilter: without the filter (allocate) the delayed job is
    taken; the delay never slows plain scheduling."""
    objects = [node("node0", gpus=1), queue("queue0", gpu=1), *preempt_cluster()[3:]]
    result = run(objects, cycles=2)
    assert result.cycles[1].decisions[0].type == "bind"


def test_the_reason_is_given_once_per_cycle_with_kais_code() -> None:
    """TestInitializeWithJobs_PreemptionDelayFilter: one fit error however many eviction actions
    (preempt, reclaim, consolidation) pass the job over in a cycle, saying how long is left; alone (no
    earlier action said why it waits) its code is KAI's PreemptionDelayNotElapsed."""
    result = run(preempt_cluster(), cycles=2)
    reason = result.reasons["default/pending-job0"]
    assert reason.count("preemption delay window") == 1
    assert reason.endswith("for another 9m59s")
    assert code_of(reason) == "Unschedulable"  # allocate spoke first: the pod fits no node


def test_the_delay_reason_alone_has_kais_code() -> None:
    session = Session(build_snapshot(ClusterState([], [], [], [], {})), SchedulerConfig(), cycle=1, now=5.0)
    job = JobInfo("ns", "job", "q", 50, True, 1, 0.0, preemption_delay=60.0, created=0.0)
    assert within_preemption_delay(session, job)
    assert within_preemption_delay(session, job)  # a second action: no second message
    assert session.unschedulable["ns/job"] == (
        "Workload is within its preemption delay window (1m0s) and may not trigger evictions for another 55s"
    )
    assert code_of(session.unschedulable["ns/job"]) == PREEMPTION_DELAY_NOT_ELAPSED
    assert session.result().wake_at == 60.0
    session.now = 60.0
    assert not within_preemption_delay(session, job)


# TestPreemptionDelayEnd: creation at 0, an eviction at 30m, one an hour before creation, a 10m delay. Its
# sixth case, "no podgroup", has no counterpart: every job here has a PodGroup (a bare pod's is its own).
@pytest.mark.parametrize(
    ("delay", "last_eviction", "end"),
    [
        pytest.param(0.0, None, None, id="no delay configured"),
        pytest.param(0.0, None, None, id="zero delay"),
        pytest.param(TEN_MINUTES, None, TEN_MINUTES, id="anchored at creation"),
        pytest.param(TEN_MINUTES, 1800.0, 1800.0 + TEN_MINUTES, id="anchored at later eviction"),
        pytest.param(TEN_MINUTES, -3600.0, TEN_MINUTES, id="eviction before creation is ignored"),
    ],
)
def test_preemption_delay_end(delay: float, last_eviction: float | None, end: float | None) -> None:
    job = JobInfo("ns", "job", "q", 50, True, 1, 0.0, preemption_delay=delay, created=0.0)
    job.last_eviction = last_eviction
    assert job.preemption_delay_end() == end


# TestSetPodGroupLastEvictionTimestamp: the PodGroup's kai.scheduler/last-eviction-timestamp, read as an
# RFC 3339 time or not at all. The preemptor was created 30m before the run with a 10m delay: an eviction
# 5m before the run holds it until 5m in; an unreadable or missing one leaves the delay elapsed.
@pytest.mark.parametrize(
    ("annotation", "first_eviction"),
    [
        pytest.param(
            (START - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ"), 300.0, id="valid annotation"
        ),
        pytest.param("not-a-time", 1.0, id="invalid annotation"),
        pytest.param(None, 1.0, id="missing annotation"),
    ],
)
def test_the_last_eviction_annotation_restarts_the_delay(
    annotation: str | None, first_eviction: float
) -> None:
    objects = preempt_cluster(preemptor_age=30)
    if annotation is not None:
        group = objects[3]
        group.metadata.annotations[LAST_EVICTION_TIMESTAMP_ANNOTATION] = annotation
    result = run(objects)
    evictions = [(r.time, d.pod) for r in result.cycles for d in r.decisions if d.type == "evict"]
    assert evictions == [(first_eviction, "default/running-job0")]


# TestCalcPodGroupPreemptionDelay, the pod's annotation (a bare pod's job is its own PodGroup here).
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("90s", 90.0, id="valid delay from pod"),
        pytest.param("5", 0.0, id="unit-less number is invalid"),
        pytest.param("-3m", 0.0, id="negative duration is invalid"),
        pytest.param("abc", 0.0, id="invalid value"),
        pytest.param(None, 0.0, id="no labels"),
    ],
)
def test_annotation_is_read_as_kais_pod_grouper_reads_it(text: str | None, seconds: float) -> None:
    assert annotation_preemption_delay(text) == seconds


def test_a_bare_pods_annotation_delays_it() -> None:
    """The annotation on a pod without a PodGroup: its job waits as if the PodGroup carried the field."""
    objects = [
        node("node0", gpus=1),
        queue("queue0", gpu=1),
        pod("running-job0", "queue0", gpus=1, priority_class="train"),
        pod(
            "waiting",
            "queue0",
            gpus=1,
            priority_class="build",
            arrival=5,
            annotations={"kai.scheduler/preemption-delay": "2m"},
        ),
    ]
    result = run(objects)
    assert [(r.time, d.action) for r in result.cycles for d in r.decisions if d.type == "evict"] == [
        (125.0, "preempt")
    ]


def test_an_eviction_restarts_the_delay() -> None:
    """TestSetPodGroupLastEvictionTimestamp / the statement's commitEvict: a job a cycle evicted a pod of
    was last evicted then; its other times stay."""
    times = {"ns/a": JobTimes(last_start=3.0), "ns/b": JobTimes(last_eviction=1.0)}
    after = next_job_times(times, {"ns/a"}, {"ns/a"}, {}, 50.0, {"ns/a", "ns/c"})
    assert after["ns/a"] == JobTimes(last_start=3.0, last_eviction=50.0)
    assert after["ns/b"] == JobTimes(last_eviction=1.0)
    assert after["ns/c"] == JobTimes(last_eviction=50.0)


def test_the_field_must_be_a_go_duration() -> None:
    manifest = pod_group_manifest("g", "q")
    manifest["spec"]["preemptionDelay"] = "5"
    with pytest.raises(ValidationError, match="not a Go duration"):
        PodGroup.model_validate(manifest)


def test_a_delayed_preemptor_preempts_only_after_its_window() -> None:
    """KAI v0.17.0 e2e `test/e2e/suites/preempt/preempt_delay_specs.go` "delayed preemptor does not
    preempt within its window, preempts after": a queue of 500m CPU (quota and limit, under a parent) runs a
    low-priority pod of 500m; a pod one priority higher with `kai.scheduler/preemption-delay: 1m30s` waits
    unschedulable through its window, then preempts and is bound."""
    objects = [
        node("node0", gpus=0, cpu="4"),
        priority_class("low", 10),
        priority_class("high", 11),
        queue("parent"),
        queue("test", parent="parent", cpu=500, cpu_limit=500),
        pod("low", "test", cpu="500m", priority_class="low"),
        pod(
            "high",
            "test",
            cpu="500m",
            priority_class="high",
            arrival=5,
            annotations={"kai.scheduler/preemption-delay": "1m30s"},
        ),
    ]
    result = run(objects)
    assert [(r.time, d.action, d.type, d.pod) for r in result.cycles for d in r.decisions] == [
        (0.0, "allocate", "bind", "default/low"),
        (95.0, "preempt", "evict", "default/low"),
        (95.0, "preempt", "pipeline", "default/high"),
        (96.0, "allocate", "bind", "default/high"),
    ]


def test_only_a_job_with_a_preemption_delay_is_asked_whether_it_is_within_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A victim action asks `within_preemption_delay` only of the pending jobs with a delay: a job without
    one is never within it (`JobsAtOpen.waiting_delayed`). The delayed job still waits for its window
    (preempt's case above), and the job without a delay still preempts once the delayed one is passed
    over."""
    asked: list[str] = []

    def noted(session: Session, job: JobInfo) -> bool:
        asked.append(job.name)
        return within_preemption_delay(session, job)

    monkeypatch.setattr(victims, "within_preemption_delay", noted)
    objects = [
        *preempt_cluster(),
        pod("pending-job1", "queue0", gpus=1, priority_class="build", arrival=1),
    ]
    result = run(objects, SchedulerConfig(actions=("allocate", "preempt")), cycles=2)
    assert set(asked) == {"pending-job0"}
    assert evicted(result, "preempt") == ["running-job0"]
    assert pipelines(d for r in result.cycles for d in r.decisions) == {"pending-job1": "node0"}
