"""Events aggregated as client-go's recorder does: the same event on the same object again is one more
occurrence of the Event written (its count and last time), not a new Event; anything that differs is a
new Event; an Event the API server no longer has is written again."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

from kai_scheduler.k8s.runtime.client import ApiStatusError, JsonObject, ResourceKind
from kai_scheduler.k8s.runtime.events import EventRecorder, record_event

POD: JsonObject = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team-a", "uid": "u-1", "resourceVersion": "7"},
}


class EventServer:
    """Keeps Events as an API server does (a name made from generateName; a merge patch of the top-level
    fields), and counts the requests."""

    def __init__(self) -> None:
        self.events: dict[str, JsonObject] = {}
        self.requests: list[str] = []
        self._names = itertools.count()

    async def create(self, kind: ResourceKind, obj: JsonObject) -> JsonObject:
        self.requests.append(f"create {kind.plural}")
        name = f"{obj['metadata']['generateName']}{next(self._names)}"
        stored = {**obj, "metadata": {**obj["metadata"], "name": name}}
        self.events[name] = stored
        return stored

    async def patch(
        self, kind: ResourceKind, name: str, patch: Any, namespace: str | None = None, **options: Any
    ) -> JsonObject:
        self.requests.append(f"patch {kind.plural}")
        if name not in self.events or self.events[name]["metadata"]["namespace"] != namespace:
            raise ApiStatusError(404, "NotFound", f'events "{name}" not found')
        self.events[name] = {**self.events[name], **patch}
        return self.events[name]


def record(client: EventServer, obj: JsonObject = POD, *, at: str, **fields: str) -> bool:
    what = {"type": "Warning", "reason": "Unschedulable", "message": "no room", "component": "kai-scheduler"}
    what.update(fields)
    return asyncio.run(record_event(cast(Any, client), obj, stamp=at, **what))


def test_a_repeat_counts_into_the_event_written() -> None:
    server = EventServer()
    assert record(server, at="2026-01-02T03:00:00Z")
    # The object's resourceVersion changed meanwhile: still the same object.
    newer = {**POD, "metadata": {**POD["metadata"], "resourceVersion": "9"}}
    assert record(server, newer, at="2026-01-02T03:00:05Z")
    assert record(server, at="2026-01-02T03:00:09Z")
    [event] = server.events.values()
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2026-01-02T03:00:00Z"
    assert event["lastTimestamp"] == "2026-01-02T03:00:09Z"
    assert event["message"] == "no room"
    assert server.requests == ["create events", "patch events", "patch events"]


def test_what_differs_is_a_new_event() -> None:
    server = EventServer()
    other_pod = {**POD, "metadata": {**POD["metadata"], "name": "q", "uid": "u-2"}}
    same_name_new_pod = {**POD, "metadata": {**POD["metadata"], "uid": "u-3"}}
    record(server, at="t0")
    record(server, at="t1", message="over quota")
    record(server, at="t2", reason="OverLimit")
    record(server, at="t3", type="Normal")
    record(server, at="t4", component="podgroup-controller")
    record(server, other_pod, at="t5")
    record(server, same_name_new_pod, at="t6")
    assert len(server.events) == 7
    assert all(event["count"] == 1 for event in server.events.values())
    assert set(server.requests) == {"create events"}


def test_an_event_the_server_no_longer_has_is_written_again() -> None:
    server = EventServer()
    record(server, at="t0")
    record(server, at="t1")
    server.events.clear()  # expired
    assert record(server, at="t2")
    [event] = server.events.values()
    assert (event["count"], event["firstTimestamp"]) == (1, "t2")
    record(server, at="t3")
    [event] = server.events.values()
    assert (event["count"], event["lastTimestamp"]) == (2, "t3")


def test_a_refused_event_is_not_recorded_and_the_series_goes_on() -> None:
    server = EventServer()
    record(server, at="t0")

    async def refuse(*args: Any, **kwargs: Any) -> JsonObject:
        raise ApiStatusError(403, "Forbidden", "events is forbidden")

    allowed = server.patch
    server.patch = refuse  # type: ignore[method-assign]
    assert not record(server, at="t1")
    server.patch = allowed  # type: ignore[method-assign]
    assert record(server, at="t2")
    [event] = server.events.values()
    assert event["count"] == 2  # the refused occurrence was not counted as written


def test_the_least_recently_seen_series_is_forgotten_first() -> None:
    server = EventServer()
    recorder = EventRecorder(cast(Any, server), max_series=2)

    def occur(reason: str) -> None:
        event = {
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": "team-a",
                "name": "p",
                "uid": "u-1",
            },
            "metadata": {"generateName": "p.", "namespace": "team-a"},
            "source": {"component": "kai-scheduler"},
            "type": "Warning",
            "reason": reason,
            "message": "m",
            "firstTimestamp": "t",
            "lastTimestamp": "t",
            "count": 1,
        }
        assert asyncio.run(recorder.record(event))

    occur("A")
    occur("B")
    occur("A")  # A is the most recently seen now
    occur("C")  # forgets B
    occur("A")
    occur("B")  # a new Event
    counts = sorted((event["reason"], event["count"]) for event in server.events.values())
    assert counts == [("A", 3), ("B", 1), ("B", 1), ("C", 1)]
