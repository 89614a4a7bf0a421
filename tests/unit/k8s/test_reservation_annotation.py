"""A job's reservation on its PodGroup in live mode (issue #24): the `kai.scheduler/reservation` annotation
written when it is made, rewritten only when what it says changes (other nodes or GPUs, a start a second
or more away from the written one), taken off when it is let go; the `Reserved`, `ReservationMoved` and
`ReservationReleased` events; read back by a scheduler that starts afresh, a bad value ignored with one
line; the GPUs all reservations hold; and what `kubectl kai why` shows of it."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from kai_scheduler.api import constants as c
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.k8s.runtime.client import ResourceKind
from kai_scheduler.k8s.scheduler.effects import CycleReport, Effects
from kai_scheduler.k8s.scheduler.job_starts import later_start
from kai_scheduler.k8s.scheduler.live_state import JobPods, SessionClock
from kai_scheduler.k8s.scheduler.pod_groups import PodGroupUpdates
from kai_scheduler.k8s.scheduler.reservations import (
    annotated_reservation,
    annotation_value,
    needs_writing,
    read_annotation,
)
from kai_scheduler.kubectl_plugin import why
from kai_scheduler.model.reservations import Reservation
from kai_scheduler.model.snapshot import JobTimes

START = 1798761600.25  # 2027-01-01T00:00:00.25Z: the session clock's second 0, between two seconds
JOB = "team/big"
ANNOTATION = c.RESERVATION_ANNOTATION


def clock() -> SessionClock:
    return SessionClock(start=START, wall=lambda: START + 10)


class Client:
    """Records PodGroup patches and the events created."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.events: list[tuple[str, str]] = []

    async def patch(
        self, kind: ResourceKind, name: str, patch: Any, namespace: str | None, **options: Any
    ) -> Any:
        assert kind.plural == "podgroups" and (namespace, name) == ("team", "big")
        self.patches.append(patch)
        return {}

    async def create(self, kind: ResourceKind, obj: Any, namespace: str | None = None) -> Any:
        assert kind.plural == "events"
        self.events.append((obj["reason"], obj["message"]))
        return {"metadata": {"name": f"e{len(self.events)}", "namespace": "team"}}


class Scheduler:
    """The PodGroup effects of a scheduler process over one waiting PodGroup: `cycle` hands them a
    result whose reservations are `reservations`, with the PodGroup as the informer shows it after the
    writes so far and the job times the loop keeps (a fresh process keeps none)."""

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        self.client = Client()
        effects = Effects(cast(Any, self.client), clock(), scheduler_name="kai-scheduler")
        self.updates = PodGroupUpdates(effects, "default")
        self.group: dict[str, Any] = {
            "kind": "PodGroup",
            "metadata": {"name": "big", "namespace": "team", "uid": "u", "annotations": annotations or {}},
        }
        self.times: dict[str, JobTimes] = {}
        if annotations:  # as the state builder reads them
            reservation = annotated_reservation(clock(), annotations, JOB)
            self.times = {JOB: JobTimes(reservation=reservation)} if reservation is not None else {}

    def cycle(self, reservations: dict[str, Reservation | None], now: float = 5.0) -> None:
        pods = JobPods(pods=2, unbound=2, waiting={"team/big-0": None, "team/big-1": None})
        live = SimpleNamespace(
            job_pods={JOB: pods},
            job_of_pod={},
            pod_groups={JOB: self.group},
            job_times={**self.times, **self.updates.job_times},
            conditioned_groups=set(),
        )
        self.updates.jobs_changed.add(JOB)
        result = SessionResult([], {}, {}, reservations=reservations)
        report = CycleReport(cycle=1, now=now)

        async def carried_out() -> None:
            calls, _ = self.updates.update(cast(Any, live), result, now, report)
            await asyncio.gather(*calls)

        asyncio.run(carried_out())
        assert report.errors == []
        for patch in self.client.patches:  # what the informer shows next
            for name, value in patch["metadata"]["annotations"].items():
                if value is None:
                    self.group["metadata"]["annotations"].pop(name, None)
                else:
                    self.group["metadata"]["annotations"][name] = value

    def written(self) -> list[str | None]:
        return [p["metadata"]["annotations"].get(ANNOTATION, "-") for p in self.client.patches]


def test_the_value_is_json_and_reads_back_as_the_same_reservation() -> None:
    held = Reservation(("n1", "n2"), 600.5, 16.0)
    value = annotation_value(held, clock())
    assert json.loads(value) == {"nodes": ["n1", "n2"], "start": "2027-01-01T00:10:00.750000Z", "gpus": 16}
    back = read_annotation(value, clock())
    assert back.nodes == held.nodes and back.gpus == held.gpus and back.start == pytest.approx(600.5)
    assert not needs_writing(value, held, clock())


def test_what_needs_writing() -> None:
    held = Reservation(("n1", "n2"), 600.0, 16.0)
    value = annotation_value(held, clock())
    assert not needs_writing(value, Reservation(held.nodes, 600.74, 16.0), clock())  # under a second
    assert needs_writing(value, Reservation(held.nodes, 601.5, 16.0), clock())
    assert needs_writing(value, Reservation(("n1", "n3"), 600.0, 16.0), clock())
    assert needs_writing(value, Reservation(held.nodes, 600.0, 8.0), clock())
    assert needs_writing(value, None, clock()) and needs_writing(None, held, clock())
    assert not needs_writing(None, None, clock())
    assert needs_writing("{not json", held, clock())


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("{not json", "not JSON"),
        ('{"nodes": [], "start": "2027-01-01T00:00:00Z"}', "nodes: expected a non-empty list"),
        ('{"nodes": ["n1"], "start": "tomorrow"}', "start: not an RFC 3339 time"),
        ('{"nodes": ["n1"], "start": "2027-01-01T00:00:00Z", "gpus": -1}', "gpus: expected a number"),
        ('{"nodes": ["n1"], "start": "2027-01-01T00:00:00Z", "node": "n2"}', "unknown key 'node'"),
    ],
)
def test_a_bad_value_is_ignored_with_one_line_naming_the_pod_group(
    value: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert annotated_reservation(clock(), {ANNOTATION: value}, JOB) is None
    [record] = caplog.records
    line = record.getMessage()
    assert f"PodGroup {JOB}: ignoring annotation {ANNOTATION}" in line and problem in line
    assert "\n" not in line and record.exc_info is None


def test_made_kept_moved_and_let_go_on_the_pod_group() -> None:
    scheduler = Scheduler()
    held = Reservation(("n1", "n2"), 600.0, 16.0)
    scheduler.cycle({JOB: held})
    assert scheduler.written() == [annotation_value(held, clock())]
    assert scheduler.client.events == [
        ("Reserved", "16 GPUs reserved on nodes n1, n2, expected to start at 2027-01-01T00:10:00Z")
    ]
    assert scheduler.updates.held.gpus() == 16
    # The start moves by less than a second from the written one, twice: nothing is written.
    scheduler.cycle({JOB: Reservation(held.nodes, 600.5, 16.0)})
    scheduler.cycle({JOB: Reservation(held.nodes, 600.9, 16.0)})
    assert len(scheduler.client.patches) == 1
    # A second or more: written again, no event (same nodes).
    later = Reservation(held.nodes, 660.0, 16.0)
    scheduler.cycle({JOB: later})
    assert scheduler.written()[1:] == [annotation_value(later, clock())]
    assert len(scheduler.client.events) == 1
    moved = Reservation(("n3", "n4"), 660.0, 16.0)
    scheduler.cycle({JOB: moved})
    assert scheduler.written()[2:] == [annotation_value(moved, clock())]
    assert scheduler.client.events[1:] == [
        (
            "ReservationMoved",
            "reservation moved from nodes n1, n2 to nodes n3, n4, expected to start at 2027-01-01T00:11:00Z",
        )
    ]
    scheduler.cycle({JOB: None})
    assert scheduler.written()[3:] == [None]
    assert scheduler.client.events[2:] == [
        ("ReservationReleased", "reservation of 16 GPUs on nodes n3, n4 let go before the pod group started")
    ]
    assert scheduler.updates.held.gpus() == 0
    assert ANNOTATION not in scheduler.group["metadata"]["annotations"]


def test_a_restarted_scheduler_keeps_the_written_reservation_without_a_write_or_an_event() -> None:
    first = Scheduler()
    held = Reservation(("n1", "n2"), 600.4, 16.0)
    first.cycle({JOB: held})
    restarted = Scheduler(dict(first.group["metadata"]["annotations"]))
    restarted.cycle({})  # the cycle keeps it as it is
    restarted.cycle({JOB: held})  # or finds it again, to the microsecond
    assert restarted.client.patches == [] and restarted.client.events == []
    assert restarted.updates.held.gpus() == 16


def test_a_restarted_scheduler_takes_off_an_unreadable_annotation() -> None:
    restarted = Scheduler({ANNOTATION: "{not json"})
    restarted.cycle({})
    assert restarted.written() == [None] and restarted.client.events == []


def test_a_job_that_runs_holds_no_reservation_whatever_its_annotation_says() -> None:
    held = Reservation(("n1",), 600.0, 8.0)
    assert later_start(JobTimes(reservation=held), 30.0) == JobTimes(last_start=30.0)
    assert later_start(JobTimes(reservation=held), None) == JobTimes(reservation=held)


def explained(annotations: dict[str, str]) -> why.Explanation:
    explanation = why.Explanation("team", None, "big", "q", "Waiting")
    explanation.reservation = why.reservation_of(annotations)
    return explanation


def test_kubectl_kai_why_shows_the_reservation() -> None:
    value = annotation_value(Reservation(("n1", "n2"), 600.0, 16.0), clock())
    explanation = explained({ANNOTATION: value})
    assert "Reservation: 16 GPUs on nodes n1, n2, expected to start at 2027-01-01T00:10:00Z\n" in why.text(
        explanation
    )
    assert explanation.as_json()["reservation"] == {
        "nodes": ["n1", "n2"],
        "start": "2027-01-01T00:10:00Z",
        "gpus": 16.0,
    }
    broken = why.text(explained({ANNOTATION: '{"nodes": []}'}))
    assert "Reservation: unreadable (kai.scheduler/reservation: nodes: expected a non-empty list" in broken
    assert "Reservation" not in why.text(explained({}))
