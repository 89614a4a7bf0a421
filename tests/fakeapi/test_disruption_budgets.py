"""PodDisruptionBudgets on the `pods/eviction` subresource, as a real API server and its disruption
controller enforce them: seen through our LightkubeClient, raw HTTP and kubectl."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.client import ApiStatusError, ResourceKind
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

T = TypeVar("T")
PDBS = ResourceKind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True)
PDB_PATH = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
POD_PATH = "/api/v1/namespaces/default/pods"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def run(body: Callable[[LightkubeClient], Coroutine[Any, Any, T]], server: FakeApiServer) -> T:
    async def main() -> T:
        async with LightkubeClient.from_url(server.url, timeout=5.0) as client:
            return await body(client)

    return asyncio.run(main())


def seed_pod(
    server: FakeApiServer, name: str, *, phase: str = "Running", ready: bool = True, app: str = "web"
) -> None:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}] if phase == "Running" else []
    server.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox:1.36"}]},
            "status": {"phase": phase, "conditions": conditions},
        }
    )


def budget(name: str = "web", app: str = "web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def create_budget(server: FakeApiServer, body: dict[str, Any]) -> dict[str, Any]:
    async def create(client: LightkubeClient) -> dict[str, Any]:
        await client.create(PDBS, body)
        return await client.get(PDBS, body["metadata"]["name"], "default")

    return run(create, server)


def evict(server: FakeApiServer, name: str) -> ApiStatusError | None:
    async def attempt(client: LightkubeClient) -> ApiStatusError | None:
        try:
            await client.evict("default", name)
        except ApiStatusError as error:
            return error
        return None

    return run(attempt, server)


def pod_names(server: FakeApiServer) -> list[str]:
    return [p["metadata"]["name"] for p in server.store.list("pods")]


def status_of(server: FakeApiServer, name: str = "web") -> dict[str, Any]:
    status: dict[str, Any] = server.store.get("poddisruptionbudgets", name)["status"]
    return status


def counts(status: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        status["currentHealthy"],
        status["desiredHealthy"],
        status["expectedPods"],
        status["disruptionsAllowed"],
    )


def test_a_budget_gets_the_status_the_disruption_controller_keeps(server: FakeApiServer) -> None:
    for name in ("a", "b", "c"):
        seed_pod(server, name)
    seed_pod(server, "other", app="db")
    created = create_budget(server, budget(minAvailable=2))
    assert counts(created["status"]) == (3, 2, 3, 1)
    assert created["status"]["observedGeneration"] == created["metadata"]["generation"] == 1
    (condition,) = created["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    server.store.set_status("pods", "a", {"conditions": [{"type": "Ready", "status": "False"}]})
    assert counts(status_of(server)) == (2, 2, 3, 0)
    assert status_of(server)["conditions"][0]["reason"] == "InsufficientPods"
    # Percentages are rounded up: 34% of 3 pods may be unavailable, 2 of them.
    server.store.patch(
        "poddisruptionbudgets", "web", {"spec": {"minAvailable": None, "maxUnavailable": "34%"}}
    )
    assert counts(status_of(server)) == (2, 1, 3, 1)
    assert status_of(server)["observedGeneration"] == 2
    server.store.delete("pods", "b")
    assert counts(status_of(server)) == (1, 1, 2, 0)  # 34% of 2 rounds up to 1 too


def test_an_eviction_the_budget_allows_is_counted_and_the_next_one_refused(
    server: FakeApiServer, api: Any
) -> None:
    for name in ("a", "b", "c"):
        seed_pod(server, name)
    create_budget(server, budget(minAvailable=2))
    assert evict(server, "a") is None
    assert pod_names(server) == ["b", "c"]
    # The handler wrote its decrement and the pod into disruptedPods; the controller then saw the pod go.
    decrements = [
        e.obj["status"]
        for e in server.store.history()
        if e.key == "poddisruptionbudgets.policy" and "a" in e.obj.get("status", {}).get("disruptedPods", {})
    ]
    assert decrements and decrements[0]["disruptionsAllowed"] == 0
    assert counts(status_of(server)) == (2, 2, 2, 0) and "disruptedPods" not in status_of(server)

    refused = evict(server, "b")
    assert refused is not None and (refused.code, refused.reason, refused.message) == (
        429,
        "TooManyRequests",
        VIOLATION,
    )
    assert refusal_cause(api, "b") == (
        429,
        "The disruption budget web needs 2 healthy pods and has 2 currently",
        None,
    )
    assert pod_names(server) == ["b", "c"]
    assert [(r.name, r.budget, r.code) for r in server.store.refused_evictions] == [("b", "web", 429)] * 2
    assert [e.name for e in server.store.evictions] == ["a"]


def eviction_body(name: str, **delete_options: Any) -> dict[str, Any]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    return {**body, "deleteOptions": delete_options} if delete_options else body


def refusal_cause(api: Any, name: str) -> tuple[int, str, Any]:
    """(code, the DisruptionBudget cause's message, retryAfterSeconds) of a raw eviction."""
    status, body = api.call("POST", f"{POD_PATH}/{name}/eviction", eviction_body(name))
    (cause,) = body["details"]["causes"]
    assert cause["reason"] == "DisruptionBudget"
    return status, cause["message"], body["details"].get("retryAfterSeconds")


def test_the_status_the_handler_writes_stays_while_the_controller_is_down(server: FakeApiServer) -> None:
    for name in ("a", "b", "c"):
        seed_pod(server, name)
    create_budget(server, budget(maxUnavailable=1))
    server.store.disruption_controller = False
    assert evict(server, "a") is None
    status = status_of(server)
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["a"]
    assert status["conditions"][0]["reason"] == "InsufficientPods"
    refused = evict(server, "b")
    assert refused is not None and refused.code == 429


def test_finished_pending_and_terminating_pods_are_evicted_without_a_budget_check(
    server: FakeApiServer,
) -> None:
    seed_pod(server, "done", phase="Succeeded")
    seed_pod(server, "failed", phase="Failed")
    seed_pod(server, "waiting", phase="Pending")
    seed_pod(server, "running")
    create_budget(server, budget(minAvailable="100%"))
    assert status_of(server)["disruptionsAllowed"] == 0
    for name in ("done", "failed", "waiting"):
        assert evict(server, name) is None
    assert pod_names(server) == ["running"]
    assert evict(server, "running") is not None


def test_more_than_one_budget_is_the_servers_500(server: FakeApiServer, api: Any) -> None:
    seed_pod(server, "a")
    seed_pod(server, "b")
    create_budget(server, budget("one", minAvailable=0))
    create_budget(server, budget("two", minAvailable=0))
    status, body = api.call("POST", f"{POD_PATH}/a/eviction", eviction_body("a"))
    assert status == 500
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": MULTIPLE,
        "code": 500,
    }
    assert pod_names(server) == ["a", "b"]


def test_a_budget_behind_its_generation_is_still_being_processed(server: FakeApiServer, api: Any) -> None:
    seed_pod(server, "a")
    seed_pod(server, "b")
    create_budget(server, budget(minAvailable=0))
    server.store.disruption_controller = False
    api.ok(
        "PATCH",
        f"{PDB_PATH}/web",
        {"spec": {"minAvailable": 1}},
        content_type="application/merge-patch+json",
    )
    assert refusal_cause(api, "a") == (
        429,
        "The disruption budget web is still being processed by the server.",
        10,
    )
    server.store.disruption_controller = True
    assert evict(server, "a") is None


def test_unhealthy_pods_follow_the_unhealthy_pod_eviction_policy(server: FakeApiServer) -> None:
    for name in ("a", "b"):
        seed_pod(server, name)
    seed_pod(server, "sick", ready=False)
    seed_pod(server, "sick2", ready=False)
    create_budget(server, budget(minAvailable=2))
    assert counts(status_of(server)) == (2, 2, 4, 0)
    # The application is not disrupted (2 healthy of 2): an unready pod may go, the budget stays.
    assert evict(server, "sick") is None
    assert status_of(server)["disruptionsAllowed"] == 0
    server.store.patch("poddisruptionbudgets", "web", {"spec": {"minAvailable": 3}})
    refused = evict(server, "sick2")  # IfHealthyBudget: 2 healthy of 3 wanted
    assert refused is not None and refused.code == 429
    server.store.patch("poddisruptionbudgets", "web", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})
    assert evict(server, "sick2") is None
    assert pod_names(server) == ["a", "b"]
    assert evict(server, "a") is not None  # a healthy pod is still guarded


def test_a_dry_run_eviction_is_checked_and_changes_nothing(server: FakeApiServer, api: Any) -> None:
    for name in ("a", "b"):
        seed_pod(server, name)
    create_budget(server, budget(minAvailable=1))
    before = server.store.get("poddisruptionbudgets", "web")
    assert api.call("POST", f"{POD_PATH}/a/eviction?dryRun=All", eviction_body("a"))[0] == 201
    assert api.call("POST", f"{POD_PATH}/a/eviction", eviction_body("a", dryRun=["All"]))[0] == 201
    assert server.store.get("poddisruptionbudgets", "web") == before
    assert pod_names(server) == ["a", "b"] and server.store.evictions == []
    assert "DisruptionTarget" not in str(server.store.get("pods", "a")["status"])
    server.store.set_status("pods", "b", {"conditions": [{"type": "Ready", "status": "False"}]})
    assert api.call("POST", f"{POD_PATH}/a/eviction?dryRun=All", eviction_body("a"))[0] == 429


def test_an_eviction_names_its_pod(api: Any, server: FakeApiServer) -> None:
    seed_pod(server, "a")
    status, body = api.call("POST", f"{POD_PATH}/a/eviction", {"apiVersion": "policy/v1", "kind": "Eviction"})
    assert (status, body["message"]) == (400, "name in URL does not match name in Eviction object")


def test_kubectl_shows_the_budget_and_drain_is_refused_by_it(kubectl: Any, server: FakeApiServer) -> None:
    server.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    for name in ("a", "b"):
        seed_pod(server, name)
    kubectl(
        "apply",
        "-f",
        "-",
        input_text="apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
        "spec:\n  minAvailable: 1\n  selector: {matchLabels: {app: web}}\n",
    )
    table = kubectl("get", "pdb").stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "MIN",
        "AVAILABLE",
        "MAX",
        "UNAVAILABLE",
        "ALLOWED",
        "DISRUPTIONS",
        "AGE",
    ]
    assert table[1].split()[:4] == ["web", "1", "N/A", "1"]
    drain = kubectl("drain", "n1", "--force", "--timeout=5s", check=False)
    assert drain.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in drain.stderr
    assert len(pod_names(server)) == 1  # one of the two went; the budget kept the other
    assert kubectl("get", "pdb", "web", "--no-headers").stdout.split()[3] == "0"
    assert {r.code for r in server.store.refused_evictions} == {429}


def test_kubectl_drain_dry_run_asks_for_server_dry_run_evictions(kubectl: Any, server: FakeApiServer) -> None:
    server.store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    seed_pod(server, "a")
    create_budget(server, budget(minAvailable=0))
    out = kubectl("drain", "n1", "--force", "--dry-run=server").stdout
    assert "evicting pod default/a (server dry run)" in out
    assert [r.code for r in server.requests(subresource="eviction")] == [201]  # (dryRun in deleteOptions)
    assert pod_names(server) == ["a"] and server.store.evictions == []
