"""The binder's retries on the reconciler base: a failed attempt waits out its backoff although the
Pending status it wrote comes back as an event (and resyncs queue it meanwhile), and a request deleted
while it waits is forgotten, so that a new request for the pod, of the same name, is carried out at once.
The requests are written here (no scheduling loop), so only the binder decides."""

from __future__ import annotations

from typing import Any

from live_support import Live, run

from helpers import node_manifest, pod_manifest
from kai_fakeapi import FakeApiServer

KEY = "default/p"


def bind_request(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """What the scheduler writes for a whole-GPU pod: owned by that pod incarnation."""
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod["metadata"]["name"],
        "uid": pod["metadata"]["uid"],
    }
    return {
        "apiVersion": "scheduling.run.ai/v1alpha2",
        "kind": "BindRequest",
        "metadata": {"name": "p", "namespace": "default", "ownerReferences": [owner]},
        "spec": {"podName": "p", "selectedNode": node, "receivedResourceType": "Regular"},
    }


def test_a_failed_attempt_waits_out_its_backoff_until_its_request_is_replaced(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    pod = store.create(pod_manifest("p", gpus=1))
    server.fail_next(1, 500, verb="create", resource="pods/binding", name="p")

    def binding_calls() -> int:
        return len(server.requests(verb="create", resource="pods", subresource="binding"))

    async def body() -> None:
        # A failed first attempt waits 1 << 1 x 30 s: far longer than this test runs.
        async with Live(server, loop=False, backoff_base=30.0) as live:
            binder = live.binder
            store.create(bind_request(pod, "n1"))

            def pending_seen() -> bool:
                request = live.informers.bind_requests.cache.get(KEY) or {}
                return (request.get("status") or {}).get("failedAttempts") == 1

            await live.until(pending_seen)  # the binder's own write, back as an event
            await live.until(lambda: len(binder.queue) == 0 and not binder.queue.processing)
            wait = binder.queue.due_in(KEY)
            assert wait is not None and 30.0 < wait <= 60.0
            assert binding_calls() == 1 and binder.stats.failures == 1
            assert binder.reconcile_stats.retried == 1
            store.delete("bindrequests", "p", "default")
            await live.until(lambda: KEY not in live.informers.bind_requests.cache)
            store.create(bind_request(pod, "n1"))
            await live.until(lambda: store.get("pods", "p")["spec"].get("nodeName") == "n1")
        assert binding_calls() == 2

    run(body(), timeout=30)


def test_a_request_replaced_under_its_name_starts_with_no_failed_attempts(server: FakeApiServer) -> None:
    """The scheduler makes its next request for a pod under the old one's name and caches it at once
    (`Informer.assume`): the old request's deletion, older than the new one, never reaches the binder."""
    store = server.store
    store.create(node_manifest("n1"))
    pod = store.create(pod_manifest("p", gpus=1))
    server.fail_next(1, 500, verb="create", resource="pods/binding", name="p")
    once = bind_request(pod, "n1")
    once["spec"]["backoffLimit"] = 1

    def status() -> dict[str, Any]:
        return (live.informers.bind_requests.cache.get(KEY) or {}).get("status") or {}

    async def body() -> None:
        nonlocal live
        async with Live(server, loop=False) as live:
            store.create(once)
            await live.until(lambda: status().get("phase") == "Failed")
            assert status()["failedAttempts"] == 1
            store.delete("bindrequests", "p", "default")
            # The new request may fail once and still bind: with the old one's attempt inherited, that
            # failure would be its second of two, and it would be given up.
            again = bind_request(pod, "n1")
            again["spec"]["backoffLimit"] = 2
            server.fail_next(1, 500, verb="create", resource="pods/binding", name="p")
            live.informers.bind_requests.assume(store.create(again))
            await live.until(lambda: status().get("phase") == "Succeeded")
            assert status()["failedAttempts"] == 1
            assert store.get("pods", "p")["spec"]["nodeName"] == "n1"

    live: Live
    run(body(), timeout=30)
