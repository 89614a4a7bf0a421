"""Rules of a real API server the fake holds clients to (issue #20): custom objects pruned and validated
against their CRD's schema, a namespace that must exist, status kept apart from the rest of an object."""

from __future__ import annotations

from typing import Any

QUEUES = "/apis/scheduling.run.ai/v2/queues"
PODS = "/api/v1/namespaces/default/pods"


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def test_custom_objects_are_pruned_and_validated_against_their_schema(api: Any) -> None:
    created = api.ok("POST", QUEUES, {**queue("q", priority=5, colour="blue"), "extra": {"x": 1}})
    assert created["spec"] == {"priority": 5} and "extra" not in created
    status, body = api.call("POST", QUEUES, queue("bad", priority="high"))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"].startswith('Queue.scheduling.run.ai "bad" is invalid: spec.priority: ')
    assert body["details"]["causes"][0]["field"] == "spec.priority"
    assert api.call("GET", f"{QUEUES}/bad")[0] == 404
    patched = api.call(
        "PATCH", f"{QUEUES}/q", {"spec": {"priority": "high"}}, content_type="application/merge-patch+json"
    )
    assert patched[0] == 422
    assert api.ok("GET", f"{QUEUES}/q")["spec"] == {"priority": 5}


def test_objects_of_the_same_content_get_the_same_answer_and_types_are_not_confused(api: Any) -> None:
    for name in ("a", "b"):  # the second is answered as the first was, under its own name
        created = api.ok("POST", QUEUES, {**queue(name, priority=5, colour="blue"), "extra": {"x": 1}})
        assert created["spec"] == {"priority": 5} and "extra" not in created
        status, body = api.call("POST", QUEUES, queue(f"bad-{name}", priority="high"))
        assert status == 422 and body["message"].startswith(
            f'Queue.scheduling.run.ai "bad-{name}" is invalid'
        )
    # Equal in Python to what was admitted before (5.0 == 5, True == 1), not in the schema's types.
    for number, other in ((5, 5.0), (1, True)):
        assert api.ok("POST", QUEUES, queue(f"n{number}", priority=number))["spec"] == {"priority": number}
        assert api.call("POST", QUEUES, queue(f"o{number}", priority=other))[0] == 422, other


def test_a_create_in_a_namespace_that_does_not_exist_is_404(api: Any, make_pod: Any) -> None:
    status, body = api.call("POST", "/api/v1/namespaces/nowhere/pods", make_pod("a", "nowhere"))
    assert (status, body["message"]) == (404, 'namespaces "nowhere" not found')
    assert api.call("GET", "/api/v1/namespaces/nowhere")[0] == 404


def test_a_pods_status_and_the_rest_of_it_are_written_apart(api: Any, make_pod: Any) -> None:
    api.ok("POST", PODS, make_pod("a"))
    running = api.ok(
        "PATCH",
        f"{PODS}/a/status",
        {"status": {"phase": "Running"}, "spec": {"nodeName": "n9"}},
        content_type="application/merge-patch+json",
    )
    assert running["status"]["phase"] == "Running" and "nodeName" not in running["spec"]
    pod = api.ok("GET", f"{PODS}/a")
    pod["status"] = {"phase": "Failed"}
    pod["metadata"]["labels"] = {"app": "renamed"}
    replaced = api.ok("PUT", f"{PODS}/a", pod)
    assert replaced["status"]["phase"] == "Running" and replaced["metadata"]["labels"] == {"app": "renamed"}
