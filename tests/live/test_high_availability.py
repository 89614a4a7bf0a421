"""High availability (issue #20): two replicas of each of the scheduler, binder, pod grouper and status
controllers, each `kai-scheduler run --component=<c> --leader-elect` in a process of its own, as the chart
runs them; the leaders of the scheduler and of the binder are killed (SIGKILL) while pods are being bound.
The standbys take their Leases over and bind everything that fits: every pod bound exactly once, no node
ever over its GPUs, no BindRequest given up. Short leases (4 s) keep it quick; nothing is timed."""

from __future__ import annotations

from pathlib import Path

from failover_run import KILLED, Failover, busy_run_with_failover, problems, seed
from live_support import run
from replicas import COMPONENTS, Replicas

from kai_fakeapi import FakeApiServer, Store

TIMING = ("4s", "3s", "500ms")  # lease duration, renew deadline, retry period


def test_the_standbys_take_over_from_killed_leaders_mid_run(tmp_path: Path) -> None:
    store = Store(kubelet=True)
    seed(store)
    with (
        FakeApiServer(store=store, bookmark_interval=0.5) as server,
        Replicas(server, tmp_path, timing=TIMING) as replicas,
    ):

        async def body() -> Failover:
            await replicas.until_ready()
            # Before the kill, each component's Lease is held by one of its replicas.
            for component in COMPONENTS:
                assert replicas.holder(component) in {f"{component}-0", f"{component}-1"}
            failover = await busy_run_with_failover(server, replicas)
            assert failover.pods == len(store.list("pods", "default")) > failover.bound_before
            for component in KILLED:
                # The standby holds the Lease now (the killed one never comes back to take it).
                killed = failover.killed[component]
                assert failover.successors[component] == replicas.holder(component) != killed
                assert replicas.holder(component) in {f"{component}-0", f"{component}-1"}
            assert failover.next_bind > 0  # the new leaders bound what came after the kill
            assert problems(store) == []
            return failover

        failover = run(body(), timeout=900)
        # The survivors are still running (the test's end stops them).
        survivors = [r for r in replicas.all if r.identity not in failover.killed.values()]
        assert len(survivors) == 2 * len(COMPONENTS) - len(KILLED)
        assert all(r.child.returncode is None for r in survivors)
