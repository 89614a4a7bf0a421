"""A gang whose pods complete is never a stale gang, live. KAI v0.17.0 drops Succeeded and Failed pods at
watch time (#1647, `pkg/scheduler/cache/cache.go` filterTerminalPods), which made a gang whose first pods
succeed look below its minMember and stale-evictable; KAI fixed it after v0.17 (#2012) by keeping
Succeeded pods. Here the scheduler keeps finished pods of a job and a Succeeded one makes the gang not
stale, as KAI's stale rule has it ("no Succeeded pods")."""

from __future__ import annotations

from live_support import Live, run

from helpers import node_manifest, pod_group_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer


def running_gang(server: FakeApiServer, name: str) -> None:
    """Gang `name` (minMember 2, stale the moment it is found so) runs `<name>-0` and `<name>-1` on n0."""
    group = pod_group_manifest(name, "q", min_member=2)
    group["spec"]["stalenessGracePeriod"] = "0s"
    server.store.create(group)
    for i in range(2):
        pod = pod_manifest(f"{name}-{i}", "q", gpus=1, group=name, node_name="n0")
        pod["status"] = {"phase": "Running"}
        server.store.create(pod)


def test_a_gang_whose_pod_succeeded_is_not_stale_evicted(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n0", gpus=4))
    store.create(queue_manifest("q"))
    running_gang(server, "completing")
    running_gang(server, "broken")  # the control: its second pod is deleted, so it is stale

    def seen(live: Live) -> bool:
        pods = live.informers.pods.cache
        done = pods.get("default/completing-1", {}).get("status", {}).get("phase") == "Succeeded"
        return done and "default/broken-1" not in pods

    async def body() -> None:
        async with Live(server, binder=False, loop=False) as live:
            first = await live.loop.run_once()
            assert first.evictions == []
            store.set_status("pods", "completing-1", {"phase": "Succeeded"})
            store.delete("pods", "broken-1")
            await live.until(lambda: seen(live))
            evictions = []
            for _ in range(3):
                evictions += (await live.loop.run_once()).evictions
            assert evictions == ["default/broken-0"]

    run(body())
