"""StuckInReleasing live (KAI v0.15+, #1578): a pod deleted on the API server carries its deletionTimestamp
into the scheduler's state, and once the threshold (2m) has passed on the session clock what it holds is
used, not releasing, so the pending pod is not pipelined onto it."""

from __future__ import annotations

from identities import client_as, refusals, strict_server
from live_support import run
from test_state import START, Ticking, built

from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import Store
from kai_scheduler.cycle import Scheduler
from kai_scheduler.framework.config import parse_config
from kai_scheduler.k8s.scheduler.live_state import LiveState
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.jobs import TaskStatus


def test_a_deleted_pod_turns_stuck_on_the_session_clock() -> None:
    store = Store(clock=Ticking(), graceful_pod_deletion=True)
    store.create(node_manifest("n1", gpus=1))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("going", gpus=1, node_name="n1", namespace="default"))
    store.delete("pods", "going", "default")  # the kubelet has not stopped it yet
    store.create(pod_manifest("waiting", gpus=1, namespace="default"))

    with strict_server(store=store, bookmark_interval=0.1) as server:

        async def body() -> LiveState:
            async with client_as(server, "scheduler") as client:
                live, _ = await built(client)
                return live

        live = run(body())
        assert refusals(server) == []
    going = next(p for p in live.state.pods if p.pod.metadata.name == "going")
    stamp = going.pod.metadata.deletion_timestamp
    assert going.terminating and stamp is not None
    assert going.deleted == stamp.timestamp() - START

    scheduler = Scheduler(parse_config({"actions": "allocate"}))
    cache = ClusterCache.of(live.state)
    soon = cache.snapshot(now=going.deleted + 60)
    assert soon.tasks["default/going"].status is TaskStatus.RELEASING
    decisions = scheduler.run(soon, cycle=1, now=going.deleted + 60).decisions
    assert [(d.type, d.pod) for d in decisions] == [("pipeline", "default/waiting")]
    cache.after_cycle(d.pod for d in decisions)

    late = cache.snapshot(now=going.deleted + 121)
    assert late.tasks["default/going"].status is TaskStatus.STUCK_IN_RELEASING
    assert scheduler.run(late, cycle=2, now=going.deleted + 121).decisions == []
