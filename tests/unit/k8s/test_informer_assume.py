"""`Informer.assume`: a write of this process in the cache before the watch brings it, and the watch's
events (and lists) that come after it, older or newer."""

from __future__ import annotations

from typing import Any, cast

from kai_scheduler.k8s.runtime.client import BIND_REQUESTS, JsonObject, KubeClient, WatchEvent
from kai_scheduler.k8s.runtime.informer import Informer


def request(version: int, uid: str = "new") -> JsonObject:
    meta = {"name": "p", "namespace": "default", "uid": uid, "resourceVersion": str(version)}
    return {"kind": "BindRequest", "metadata": meta, "spec": {"podName": "p"}}


def informer(seen: int) -> tuple[Informer, list[str]]:
    """An informer (never run: events are fed by hand) that has seen up to version `seen`, and a log of
    its handler calls."""
    made = Informer(cast(KubeClient, None), BIND_REQUESTS)
    made.resource_version = str(seen)
    calls: list[str] = []

    def named(what: str) -> Any:
        return lambda *objs: calls.append(f"{what} {objs[-1]['metadata']['resourceVersion']}")

    made.add_handler(named("add"), named("update"), named("delete"))
    return made, calls


def test_an_assumed_object_is_cached_at_once_and_the_watch_takes_over() -> None:
    made, calls = informer(seen=5)
    made.assume(request(7))
    assert made.get("p", "default") == request(7) and calls == ["add 7"]
    made.apply_event(WatchEvent("ADDED", request(7)))  # the write's echo: nothing new for the handlers
    assert made.resource_version == "7" and calls == ["add 7"]
    made.apply_event(WatchEvent("MODIFIED", request(8)))
    made.apply_event(WatchEvent("DELETED", request(9)))
    assert made.cache == {} and calls == ["add 7", "update 8", "delete 9"]


def test_older_events_of_its_name_do_not_undo_it() -> None:
    # An earlier (Failed) request of the same pod, deleted before the new one was created: the watch
    # brings that deletion after the new one is assumed.
    made, calls = informer(seen=5)
    made.apply_event(WatchEvent("ADDED", request(3, uid="old")))
    made.assume(request(7))
    made.apply_event(WatchEvent("DELETED", request(6, uid="old")))
    assert made.get("p", "default") == request(7)
    assert made.resource_version == "6"
    made.apply_event(WatchEvent("DELETED", request(9)))
    assert made.cache == {}
    assert calls == ["add 3", "update 7", "delete 9"]


def test_an_object_the_watch_has_passed_is_not_assumed() -> None:
    # Created, then deleted by someone else, and both events seen before the create's answer is handled:
    # assuming it would bring back a request that no longer exists.
    made, calls = informer(seen=5)
    made.apply_event(WatchEvent("ADDED", request(7)))
    made.apply_event(WatchEvent("DELETED", request(8)))
    made.assume(request(7))
    assert made.cache == {} and calls == ["add 7", "delete 8"]


def test_a_list_older_than_it_keeps_it_a_newer_one_decides() -> None:
    made, _ = informer(seen=5)
    made.assume(request(7))
    made._replace([], "6")  # a relist that began before the create
    assert made.get("p", "default") == request(7)
    made._replace([], "9")  # one after it: the request is gone
    assert made.cache == {}


def test_versions_that_are_not_numbers_are_cached_as_they_come() -> None:
    made, calls = informer(seen=5)
    made.resource_version = "opaque"
    obj = request(7)
    obj["metadata"]["resourceVersion"] = "x7"
    made.assume(obj)
    made.apply_event(WatchEvent("DELETED", obj))
    assert made.cache == {} and calls == ["add x7", "delete x7"]
