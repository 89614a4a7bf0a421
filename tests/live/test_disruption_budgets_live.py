"""Preemption against PodDisruptionBudgets in live mode (issue #20), on a fake API server that enforces
budgets on the eviction subresource as kube-apiserver does.

Through the eviction API a budget refuses (429) the evictions beyond what it allows: the scheduler used
to evict a preemptor's victims that way, so with a budget allowing one disruption and a preemptor needing
more, one victim went for nothing and the refused ones were asked again every cycle while the preemptor
never started. KAI deletes its victims after marking them (DisruptionTarget); so do we, and beyond KAI the
victim search first looks for victims that no budget protects, saying in the eviction's message when it
had to go beyond one.
"""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, priority_class_manifest, queue_manifest
from kai_fakeapi import FakeApiServer, Store


def running(name: str, app: str) -> dict[str, Any]:
    """A train pod running and ready on n0 (what the disruption controller counts as healthy)."""
    pod = pod_manifest(name, "q", gpus=1, node_name="n0", priority_class="train", labels={"app": app})
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def budget(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def cluster(store: Store) -> None:
    """One 4-GPU node, a queue owed it, and KAI's train and inference priority classes."""
    store.create(node_manifest("n0", gpus=4))
    store.create(queue_manifest("q", gpu=4))
    for name, value in (("train", 50), ("inference", 125)):
        store.create(priority_class_manifest(name, value))


def inference_gang(store: Store, size: int) -> list[str]:
    store.create(pod_group_manifest("serve", "q", min_member=size, priority_class="inference"))
    names = [f"serve-{i}" for i in range(size)]
    for name in names:
        store.create(pod_manifest(name, "q", gpus=1, group="serve", priority_class="inference"))
    return names


def deleted(server: FakeApiServer) -> list[str]:
    return [str(r.name) for r in server.requests(verb="delete", resource="pods") if r.code == 200]


def schedule_until_bound(server: FakeApiServer, names: list[str]) -> None:
    """Run the scheduler and the binder until every pod of `names` is bound."""

    def bound() -> bool:
        return all((server.store.try_get("pods", n) or {}).get("spec", {}).get("nodeName") for n in names)

    async def body() -> None:
        async with Live(server) as live:
            await live.until(bound, timeout=20)

    run(body(), timeout=40)


def disruption_messages(server: FakeApiServer) -> dict[str, str]:
    """Each victim's DisruptionTarget message, from the status patches the scheduler sent."""
    messages = {}
    for event in server.store.history():
        if event.key != "pods":
            continue
        obj = event.obj
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "DisruptionTarget":
                messages[obj["metadata"]["name"]] = condition["message"]
    return messages


def test_a_budget_that_allows_fewer_disruptions_than_the_preemptor_needs_does_not_stop_it(
    server: FakeApiServer,
) -> None:
    # Four web pods fill the node; their budget allows one disruption; the inference gang needs three GPUs.
    store = server.store
    cluster(store)
    for i in range(4):
        store.create(running(f"web-{i}", "web"))
    store.create(budget("web", "web", maxUnavailable=1))
    serve = inference_gang(store, 3)
    schedule_until_bound(server, serve)
    victims = deleted(server)
    assert sorted(victims) == ["web-1", "web-2", "web-3"]  # three deletions, each once: none in vain
    assert server.requests(verb="create", resource="pods", subresource="eviction") == []
    messages = disruption_messages(server)
    beyond = [
        name for name in victims if "beyond PodDisruptionBudget default/web (allowed 1)" in messages[name]
    ]
    assert len(beyond) == 2  # the first victim was within what the budget allows
    assert store.try_get("pods", "web-0") is not None


def test_the_victims_no_budget_protects_go_first(server: FakeApiServer) -> None:
    # The newest pods (web) are KAI's first victims, but their budget allows no disruption: the older
    # batch pods, which no budget covers, go instead.
    store = server.store
    cluster(store)
    for i in range(2):
        store.create(running(f"batch-{i}", "batch"))
    for i in range(2):
        store.create(running(f"web-{i}", "web"))
    store.create(budget("web", "web", minAvailable=2))
    serve = inference_gang(store, 2)
    schedule_until_bound(server, serve)
    assert sorted(deleted(server)) == ["batch-0", "batch-1"]
    assert all("PodDisruptionBudget" not in message for message in disruption_messages(server).values())
    assert store.get("poddisruptionbudgets", "web")["status"]["disruptionsAllowed"] == 0
