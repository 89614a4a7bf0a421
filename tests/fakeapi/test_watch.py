"""Watch: resume from a resourceVersion, bookmarks, 410 Gone on compacted history, selectors, drops."""

from __future__ import annotations

from typing import Any

PODS = "/api/v1/namespaces/default/pods"


def test_watch_resumes_from_a_resource_version(api: Any, watch: Any, make_pod: Any) -> None:
    a = api.ok("POST", PODS, make_pod("a"))
    rv_a = a["metadata"]["resourceVersion"]
    api.ok("POST", PODS, make_pod("b"))
    api.ok(
        "PATCH",
        f"{PODS}/a",
        {"metadata": {"labels": {"x": "1"}}},
        content_type="application/merge-patch+json",
    )
    stream = watch(f"{PODS}?watch=true&resourceVersion={rv_a}")
    ev1, ev2 = stream.next_of("ADDED", "MODIFIED"), stream.next_of("ADDED", "MODIFIED")
    assert (ev1["type"], ev1["object"]["metadata"]["name"]) == ("ADDED", "b")
    assert (ev2["type"], ev2["object"]["metadata"]["labels"]["x"]) == ("MODIFIED", "1")
    assert int(ev2["object"]["metadata"]["resourceVersion"]) > int(
        ev1["object"]["metadata"]["resourceVersion"]
    )
    api.ok("DELETE", f"{PODS}/b")
    ev3 = stream.next_of("DELETED")
    assert ev3["object"]["metadata"]["name"] == "b"
    assert int(ev3["object"]["metadata"]["resourceVersion"]) > int(
        ev2["object"]["metadata"]["resourceVersion"]
    )


def test_list_then_watch_misses_nothing(api: Any, watch: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    listed = api.ok("GET", PODS)
    stream = watch(f"{PODS}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
    api.ok("POST", PODS, make_pod("b"))
    ev = stream.next_of("ADDED", "MODIFIED", "DELETED")
    assert ev["object"]["metadata"]["name"] == "b"


def test_watch_without_version_starts_with_the_current_state(api: Any, watch: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    stream = watch(f"{PODS}?watch=true")
    assert stream.next_of("ADDED")["object"]["metadata"]["name"] == "a"


def test_bookmarks_carry_the_current_version(api: Any, watch: Any, make_pod: Any, server: Any) -> None:
    created = api.ok("POST", PODS, make_pod("a"))
    rv = created["metadata"]["resourceVersion"]
    api.ok(
        "POST",
        "/apis/scheduling.run.ai/v2/queues",
        {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"}},
    )
    stream = watch(f"{PODS}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}")
    bookmark = stream.next_of("BOOKMARK")
    assert bookmark["object"]["kind"] == "Pod"
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) == server.store.resource_version
    assert int(bookmark["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_send_initial_events_ends_with_an_annotated_bookmark(api: Any, watch: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    stream = watch(
        f"{PODS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    )
    assert stream.next()["type"] == "ADDED"
    bookmark = stream.next()
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_too_old_version_is_410_gone(api: Any, watch: Any, make_pod: Any, server: Any) -> None:
    old = api.ok("POST", PODS, make_pod("a"))["metadata"]["resourceVersion"]
    api.ok("POST", PODS, make_pod("b"))
    server.compact()
    stream = watch(f"{PODS}?watch=true&resourceVersion={old}")
    ev = stream.next()
    assert ev["type"] == "ERROR"
    assert (ev["object"]["kind"], ev["object"]["code"], ev["object"]["reason"]) == ("Status", 410, "Expired")
    assert stream.next() is None
    # From the current version a watch works again.
    current = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    fresh = watch(f"{PODS}?watch=true&resourceVersion={current}")
    api.ok("DELETE", f"{PODS}/a")
    assert fresh.next_of("DELETED")["object"]["metadata"]["name"] == "a"


def test_history_is_bounded(make_pod: Any, watch: Any) -> None:
    from kai_fakeapi import FakeApiServer, Store

    store = Store(history_limit=3)
    start = store.resource_version
    for i in range(5):
        store.create(make_pod(f"p{i}"))
    assert store.compacted_resource_version == store.resource_version - 3
    with FakeApiServer(store=store) as srv:
        old = watch(f"{PODS}?watch=true&resourceVersion={start}", url=srv.url)
        assert old.next()["object"]["code"] == 410
        old.close()
        since = store.compacted_resource_version
        recent = watch(f"{PODS}?watch=true&resourceVersion={since}", url=srv.url)
        assert [recent.next()["object"]["metadata"]["name"] for _ in range(3)] == ["p2", "p3", "p4"]
        recent.close()


def test_selector_changes_become_added_and_deleted(api: Any, watch: Any, make_pod: Any, server: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    rv = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    unbound = watch(f"{PODS}?watch=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3D")
    on_n1 = watch(f"{PODS}?watch=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3Dn1")
    server.store.bind("default", "a", "n1")
    gone = unbound.next_of("ADDED", "MODIFIED", "DELETED")
    assert gone["type"] == "DELETED" and "nodeName" not in gone["object"]["spec"]
    arrived = on_n1.next_of("ADDED", "MODIFIED", "DELETED")
    assert arrived["type"] == "ADDED" and arrived["object"]["spec"]["nodeName"] == "n1"
    assert gone["object"]["metadata"]["resourceVersion"] == arrived["object"]["metadata"]["resourceVersion"]


def test_drop_watches_cuts_streams_mid_way(api: Any, watch: Any, make_pod: Any, server: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    rv = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    s1 = watch(f"{PODS}?watch=true&resourceVersion={rv}")
    s2 = watch("/api/v1/nodes?watch=true")
    assert server.wait_for_watches(2, timeout=20)
    assert server.drop_watches("pods") == 1
    assert s1.next() is None
    assert server.wait_for_watches(0, "pods", timeout=20, exactly=True)
    assert server.open_watches() == 1
    server.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    assert s2.next_of("ADDED")["object"]["metadata"]["name"] == "n1"
    assert server.drop_watches(graceful=True) == 1
    assert s2.next() is None


def test_timeout_seconds_ends_the_stream_cleanly(api: Any, watch: Any) -> None:
    rv = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    stream = watch(f"{PODS}?watch=true&timeoutSeconds=1&resourceVersion={rv}")
    assert stream.next() is None


def test_a_watch_stream_announces_that_its_connection_ends_with_it(api: Any, watch: Any) -> None:
    """The server closes a watch's connection when the stream ends, cleanly too; a client that pools
    connections (aiohttp) must not send its next request into that socket."""
    rv = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    stream = watch(f"{PODS}?watch=true&timeoutSeconds=1&resourceVersion={rv}")
    assert stream.resp.getheader("Connection") == "close"
    assert stream.next() is None


def test_watch_events_as_tables_for_kubectl(api: Any, make_pod: Any, server: Any) -> None:
    import http.client
    import json

    api.ok("POST", PODS, make_pod("a"))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    conn.request(
        "GET",
        f"{PODS}?watch=true",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    resp = conn.getresponse()
    ev = json.loads(resp.readline())
    conn.close()
    assert ev["type"] == "ADDED" and ev["object"]["kind"] == "Table"
    assert ev["object"]["rows"][0]["cells"][0] == "a"
