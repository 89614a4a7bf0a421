"""Fault injection: failing requests, lost responses, cut connections, the server down and back."""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any

import pytest

PODS = "/api/v1/namespaces/default/pods"


def test_fail_next_n_requests_of_a_kind(api: Any, make_pod: Any, server: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    server.fail_next(2, 500, verb="get", resource="pods")
    assert api.call("GET", f"{PODS}/a")[0] == 500
    assert api.call("GET", PODS)[0] == 200  # a list is not a get
    status, body = api.call("GET", f"{PODS}/a")
    assert (status, body["reason"]) == (500, "InternalError")
    assert api.call("GET", f"{PODS}/a")[0] == 200
    assert server.pending_faults() == []


def test_429_carries_retry_after(api: Any, server: Any) -> None:
    server.fail_next(1, 429, resource="nodes", retry_after=3)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    conn.request("GET", "/api/v1/nodes")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 429 and resp.getheader("Retry-After") == "3"


def test_409_on_bind_fails_before_the_write(api: Any, make_pod: Any, server: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    server.fail_next(1, 409, verb="create", resource="pods/binding")
    body = {"metadata": {"name": "a"}, "target": {"kind": "Node", "name": "n1"}}
    assert api.call("POST", f"{PODS}/a/binding", body)[0] == 409
    assert "nodeName" not in api.ok("GET", f"{PODS}/a")["spec"]
    assert api.call("POST", f"{PODS}/a/binding", body)[0] == 201
    assert len(server.requests(verb="create", resource="pods", subresource="binding")) == 2


def test_after_commit_loses_the_response(api: Any, make_pod: Any, server: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    server.fail_next(1, 500, resource="pods/binding", after_commit=True)
    body = {"metadata": {"name": "a"}, "target": {"kind": "Node", "name": "n1"}}
    assert api.call("POST", f"{PODS}/a/binding", body)[0] == 500
    assert api.ok("GET", f"{PODS}/a")["spec"]["nodeName"] == "n1"  # the bind happened
    assert api.call("POST", f"{PODS}/a/binding", body)[0] == 409  # so a retry conflicts


def test_status_zero_cuts_the_connection(api: Any, server: Any) -> None:
    server.fail_next(1, 0, verb="list", resource="nodes")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        api.call("GET", "/api/v1/nodes")
    assert api.call("GET", "/api/v1/nodes")[0] == 200


def test_410_fault_on_watch_is_an_error_event(server: Any, watch: Any) -> None:
    server.fail_next(1, 410, verb="watch", resource="pods")
    ev = watch(f"{PODS}?watch=true&resourceVersion=1").next()
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410


def test_down_and_up_on_the_same_port_keeps_the_store(
    api: Any, make_pod: Any, server: Any, watch: Any
) -> None:
    api.ok("POST", PODS, make_pod("a"))
    rv = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    stream = watch(f"{PODS}?watch=true&resourceVersion={rv}")
    assert server.wait_for_watches(1, timeout=20)
    port = server.port
    with server.down():
        assert stream.next() is None  # open watches are cut
        with pytest.raises(ConnectionRefusedError):
            api.call("GET", PODS)
        server.store.create(make_pod("b"))  # the world moves on while the API is down
    assert server.port == port
    listed = api.ok("GET", PODS)
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a", "b"]
    resumed = watch(f"{PODS}?watch=true&resourceVersion={rv}")
    assert resumed.next_of("ADDED")["object"]["metadata"]["name"] == "b"


def test_restart_with_downtime(api: Any, server: Any) -> None:
    before = server.store.resource_version
    started = time.monotonic()
    server.restart(downtime=0.2)
    assert time.monotonic() - started >= 0.2
    assert api.ok("GET", "/api/v1/namespaces")["metadata"]["resourceVersion"] == str(before)


def test_concurrent_writers_get_distinct_versions_and_conflicts(api: Any, server: Any) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    base = api.ok(
        "POST",
        path,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"n": "0"}},
    )
    results: list[int] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        body = {**base, "data": {"n": str(i + 1)}}  # never the current value: no no-op
        status, _ = api.call("PUT", f"{path}/cm", body)
        with lock:
            results.append(status)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [200] + [409] * 7  # one stale-version winner
    for i in range(20):
        api.ok("POST", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    versions = [int(c["metadata"]["resourceVersion"]) for c in api.ok("GET", path)["items"]]
    assert len(set(versions)) == len(versions)


def test_request_log(api: Any, server: Any) -> None:
    server.clear_requests()
    api.call("GET", "/api/v1/nodes")
    api.call("GET", "/api/v1/nodes/x")
    (listed,) = server.requests(verb="list", resource="nodes")
    assert (listed.method, listed.path, listed.code) == ("GET", "/api/v1/nodes", 200)
    assert server.requests(verb="get")[0].code == 404


def test_resource_without_subresource_matches_only_the_main_resource(
    api: Any, make_pod: Any, server: Any
) -> None:
    api.ok("POST", PODS, make_pod("a"))
    server.fail_next(1, 503, verb="patch", resource="pods")
    patch = {"status": {"phase": "Running"}}
    assert api.call("PATCH", f"{PODS}/a/status", patch, content_type="application/merge-patch+json")[0] == 200
    assert api.call("PATCH", f"{PODS}/a", {}, content_type="application/merge-patch+json")[0] == 503
    server.fail_next(1, 500, subresource="status")
    assert api.call("GET", f"{PODS}/a/status")[0] == 500
