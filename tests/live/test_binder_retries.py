"""The binder's retries on the reconciler base: a failed attempt waits out its backoff although the
Pending status it wrote comes back as an event (and resyncs queue it meanwhile), and a request deleted
while it waits is forgotten, so that the scheduler's next request for the pod is carried out at once."""

from __future__ import annotations

from live_support import Live, run

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer

KEY = "default/p"


def test_a_failed_attempt_waits_out_its_backoff_until_its_request_is_replaced(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("p", gpus=1))
    server.fail_next(1, 500, verb="create", resource="pods/binding", name="p")

    def binding_calls() -> int:
        return len(server.requests(verb="create", resource="pods", subresource="binding"))

    async def body() -> None:
        # A failed first attempt waits 1 << 1 x 30 s: far longer than this test runs.
        async with Live(server, backoff_base=30.0) as live:
            binder = live.binder

            def pending_seen() -> bool:
                request = live.informers.bind_requests.cache.get(KEY) or {}
                return (request.get("status") or {}).get("failedAttempts") == 1

            await live.until(pending_seen)  # the binder's own write, back as an event
            await live.until(lambda: len(binder.queue) == 0 and not binder.queue.processing)
            wait = binder.queue.due_in(KEY)
            assert wait is not None and 30.0 < wait <= 60.0
            assert binding_calls() == 1 and binder.stats.failures == 1
            assert binder.reconcile_stats.retried == 1
            uid = store.get("bindrequests", "p")["metadata"]["uid"]
            store.delete("bindrequests", "p", "default")

            def replaced_and_bound() -> bool:
                request = store.try_get("bindrequests", "p") or {}
                new = request.get("metadata", {}).get("uid") not in (None, uid)
                return new and store.get("pods", "p")["spec"].get("nodeName") == "n1"

            await live.until(replaced_and_bound)
        assert binding_calls() == 2

    run(body(), timeout=30)
