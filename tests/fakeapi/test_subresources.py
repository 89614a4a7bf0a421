"""Pod `binding` and `eviction` subresources, graceful deletion and the kubelet option."""

from __future__ import annotations

from typing import Any

from kai_fakeapi import FakeApiServer

PODS = "/api/v1/namespaces/default/pods"


def binding(name: str, node: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, **meta},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def test_bind_answers_a_status_and_a_second_bind_is_409(api: Any, make_pod: Any, server: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    status, body = api.call("POST", f"{PODS}/a/binding", binding("a", "n1", annotations={"k": "v"}))
    assert status == 201
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = api.ok("GET", f"{PODS}/a")
    assert pod["spec"]["nodeName"] == "n1" and pod["metadata"]["annotations"] == {"k": "v"}
    assert [c["type"] for c in pod["status"]["conditions"]] == ["PodScheduled"]
    assert pod["status"]["phase"] == "Pending"
    status, body = api.call("POST", f"{PODS}/a/binding", binding("a", "n2"))
    assert (status, body["reason"]) == (409, "Conflict")
    assert (
        body["message"]
        == 'Operation cannot be fulfilled on pods/binding "a": pod a is already assigned to node "n1"'
    )
    assert api.ok("GET", f"{PODS}/a")["spec"]["nodeName"] == "n1"
    assert [(b.name, b.node) for b in server.store.binds] == [("a", "n1")]


def test_bind_errors(api: Any, make_pod: Any) -> None:
    assert api.call("POST", f"{PODS}/none/binding", binding("none", "n1"))[0] == 404
    api.ok("POST", PODS, make_pod("a"))
    assert api.call("POST", f"{PODS}/a/binding", binding("other", "n1"))[0] == 400
    assert api.call("POST", f"{PODS}/a/binding", binding("a", "n1", uid="not-the-uid"))[0] == 409
    assert api.call("POST", f"{PODS}/a/binding", {"metadata": {"name": "a"}, "target": {}})[0] == 422
    assert api.call("GET", f"{PODS}/a/binding")[0] == 405
    # The legacy collection: POST namespaces/<ns>/bindings with the pod's name.
    assert api.call("POST", "/api/v1/namespaces/default/bindings", binding("a", "n1"))[0] == 201
    assert api.ok("GET", f"{PODS}/a")["spec"]["nodeName"] == "n1"


def eviction(name: str, **options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    if options:
        body["deleteOptions"] = options
    return body


def test_eviction_marks_the_pod_as_a_disruption_target_then_deletes_it(
    api: Any, make_pod: Any, watch: Any, server: Any
) -> None:
    api.ok("POST", PODS, make_pod("a"))
    server.store.bind("default", "a", "n1")
    rv = api.ok("GET", PODS)["metadata"]["resourceVersion"]
    stream = watch(f"{PODS}?watch=true&resourceVersion={rv}")
    status, body = api.call("POST", f"{PODS}/a/eviction", eviction("a"))
    assert status == 201 and body["status"] == "Success"
    marked = stream.next_of("ADDED", "MODIFIED", "DELETED")
    assert marked["type"] == "MODIFIED"
    (condition,) = [c for c in marked["object"]["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (condition["status"], condition["reason"]) == ("True", "EvictionByEvictionAPI")
    assert stream.next_of("ADDED", "MODIFIED", "DELETED")["type"] == "DELETED"
    assert api.call("GET", f"{PODS}/a")[0] == 404
    assert api.call("POST", f"{PODS}/a/eviction", eviction("a"))[0] == 404
    assert [e.name for e in server.store.evictions] == ["a"]


def test_graceful_pod_deletion_sets_deletion_timestamp_first(make_pod: Any, watch: Any) -> None:
    with FakeApiServer(graceful_pod_deletion=True) as srv:
        store = srv.store
        for name in ("a", "b"):
            store.create(make_pod(name))
        store.bind("default", "a", "n1")
        rv = store.resource_version
        stream = watch(f"{PODS}?watch=true&resourceVersion={rv}", url=srv.url)
        store.evict("default", "a")  # bound: terminates gracefully
        store.delete("pods", "b")  # never scheduled: deleted at once
        assert "deletionTimestamp" not in stream.next()["object"]["metadata"]  # the DisruptionTarget mark
        ev = stream.next()
        assert ev["type"] == "MODIFIED" and ev["object"]["metadata"]["deletionGracePeriodSeconds"] == 30
        assert ev["object"]["metadata"]["deletionTimestamp"]
        assert stream.next()["type"] == "DELETED"
        from kai_fakeapi import ApiError

        try:
            store.bind("default", "a", "n2")
            raise AssertionError("bound a terminating pod")
        except ApiError as err:
            assert err.code == 409
        assert store.complete_pod_deletions() == 1
        last = stream.next()
        assert (last["type"], last["object"]["metadata"]["name"]) == ("DELETED", "a")
        stream.close()


def test_kubelet_option_runs_bound_pods(make_pod: Any) -> None:
    with FakeApiServer(kubelet=True) as srv:
        srv.store.create(make_pod("a"), keep_status=False)
        srv.store.bind("default", "a", "n1")
        pod = srv.store.get("pods", "a")
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["containerStatuses"][0]["ready"] is True
