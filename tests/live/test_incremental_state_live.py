"""Live mode's incrementally maintained state equals one rebuilt from scratch, after faults.

Issue #8: "A live test with faults (watch dropped, API server down, the run process killed and restarted)
ends with the incremental state equal to one rebuilt from scratch." The scheduler keeps its cluster state
current from informer events only; here its watches are dropped (and the history compacted, so the
informers must relist and reconcile), the API server goes down while pods are created, changed and
deleted, and the scheduler is stopped and started again. At the end its state must equal, field by field,
the state a brand-new scheduler builds from a fresh list of everything.
"""

from __future__ import annotations

import asyncio

from identities import client_as
from live_support import Live, in_thread, run

from helpers import fingerprint, node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.backoff import FAST_BACKOFF
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.loop import SchedulerLoop
from kai_scheduler.k8s.scheduler.state import StateBuilder


def bound(server: FakeApiServer) -> set[str]:
    return {p["metadata"]["name"] for p in server.store.list("pods", "default") if p["spec"].get("nodeName")}


async def rebuilt_from_scratch(server: FakeApiServer, loop: SchedulerLoop) -> dict[str, object]:
    """What a new scheduler sees: fresh informers, a fresh builder, the loop's in-flight memories."""
    async with (
        client_as(server, "scheduler") as client,
        InformerSet(client, backoff=FAST_BACKOFF) as informers,
    ):
        assert await informers.wait_synced(5)
        builder = StateBuilder(informers, SessionClock(start=loop.clock.start))
        builder.build(nominated=loop.nominated, evicting=loop.evicting, job_times=loop.job_times)
        return fingerprint(builder.cache.snapshot())


def current(loop: SchedulerLoop) -> dict[str, object]:
    loop.states.build(nominated=loop.nominated, evicting=loop.evicting, job_times=loop.job_times)
    return fingerprint(loop.states.cache.snapshot())


def test_state_after_faults_equals_a_rebuild(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1", gpus=8, gpu_memory=40000))
    store.create(node_manifest("n2", gpus=8, gpu_memory=40000))
    store.create(queue_manifest("team-a", gpu=8))
    store.create(queue_manifest("team-b", gpu=8))
    for i in range(4):
        store.create(pod_manifest(f"whole-{i}", "team-a", gpus=1))
    store.create(pod_group_manifest("gang", "team-b", min_member=2))
    for i in range(2):
        store.create(pod_manifest(f"gang-{i}", "team-b", group="gang", gpus=1))
    store.create(pod_manifest("half", "team-a", fraction=0.5))
    store.create(pod_manifest("foreign", scheduler="default-scheduler", node_name="n2", cpu="2"))

    async def first_life() -> None:
        async with Live(server) as live:
            await live.until(lambda: {"whole-3", "gang-1", "half"} <= bound(server))
            # Watches dropped, history compacted: the informers relist and reconcile.
            server.compact()
            server.drop_watches()
            store.create(pod_manifest("after-drop", "team-b", gpus=2))
            store.delete("pods", "whole-0", "default")
            await live.until(lambda: "after-drop" in bound(server))
            # The API server goes down while the cluster changes under it.
            await in_thread(server.stop)
            store.create(pod_manifest("during-outage", "team-a", gpus=1))
            store.delete("pods", "whole-1", "default")
            store.create(pod_group_manifest("late-gang", "team-b", min_member=2))
            await asyncio.sleep(1.0)
            await in_thread(server.start)
            await live.until(lambda: "during-outage" in bound(server), timeout=15)

    async def second_life() -> None:
        # The scheduler process was killed: a new one starts from a list, then things change again.
        async with Live(server) as live:
            store.create(pod_manifest("late-gang-0", "team-b", group="late-gang", gpus=1))
            store.create(pod_manifest("late-gang-1", "team-b", group="late-gang", gpus=1))
            await live.until(lambda: {"late-gang-0", "late-gang-1"} <= bound(server), timeout=15)
            server.drop_watches("pods")
            store.delete("pods", "whole-2", "default")
            finished = store.get("pods", "whole-3", "default")
            finished["status"]["phase"] = "Succeeded"  # the kubelet reports it done: a pod update alone
            store.apply(finished)
            await asyncio.sleep(0.5)  # a few cycles on the reconnected watches
            live.stop.set()
            for task in live.tasks:
                await task
            live.tasks.clear()
            assert current(live.loop) == await rebuilt_from_scratch(server, live.loop)

    run(first_life(), timeout=40)
    run(second_life(), timeout=40)
