"""High availability (issue #20): two replicas of each of the scheduler, binder, pod grouper and status
controllers, each `kai-scheduler run --component=<c> --leader-elect` in a process of its own, as the chart
runs them (each with its ServiceAccount's token, on the strict fake API server with the chart's RBAC); the
leaders of the scheduler and of the binder are killed (SIGKILL) while pods are being bound.
The standbys take their Leases over and bind everything that fits: every pod bound exactly once, no node
ever over its GPUs, no BindRequest given up. Short leases (4 s) keep it quick; nothing is timed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from failover_run import (
    KILLED,
    Failover,
    busy_run_with_a_paused_leader,
    busy_run_with_failover,
    problems,
    seed,
)
from identities import refusals, strict_server
from live_support import run
from replicas import COMPONENTS, Replica, Replicas

from kai_fakeapi import Store

TIMING = ("4s", "3s", "500ms")  # lease duration, renew deadline, retry period


@contextlib.contextmanager
def replicated(folder: Path) -> Iterator[Replicas]:
    """The seeded cluster on the fake API server (its kubelet on), and two replicas of each component on
    it; a failure inside shows every replica's output."""
    store = Store(kubelet=True)
    seed(store)
    with (
        strict_server(store=store, bookmark_interval=0.5) as server,
        Replicas(server, folder, timing=TIMING) as replicas,
    ):
        yield replicas


def test_the_standbys_take_over_from_killed_leaders_mid_run(tmp_path: Path) -> None:
    with replicated(tmp_path) as replicas:
        store = replicas.server.store

        async def body() -> Failover:
            await replicas.until_ready()
            # Before the kill, each component's Lease is held by one of its replicas.
            for component in COMPONENTS:
                assert replicas.holder(component) in {f"{component}-0", f"{component}-1"}
            failover = await busy_run_with_failover(replicas.server, replicas)
            assert failover.pods == len(store.list("pods", "default")) > failover.bound_before
            for component in KILLED:
                # The standby holds the Lease now (the killed one never comes back to take it).
                killed = failover.killed[component]
                assert failover.successors[component] == replicas.holder(component) != killed
                assert replicas.holder(component) in {f"{component}-0", f"{component}-1"}
            assert failover.next_bind > 0  # the new leaders bound what came after the kill
            assert problems(store) == []
            assert refusals(replicas.server) == []  # the chart grants each replica what it does
            return failover

        failover = run(body(), timeout=900)
        # The survivors are still running (the test's end stops them).
        survivors = [r for r in replicas.all if r.identity not in failover.killed.values()]
        assert len(survivors) == 2 * len(COMPONENTS) - len(KILLED)
        assert all(r.child.returncode is None for r in survivors)


def test_a_leader_paused_past_its_lease_steps_down_when_it_goes_on(tmp_path: Path) -> None:
    # It wakes with its caches as they were: nothing it decided from them may be written.
    with replicated(tmp_path) as replicas:

        async def body() -> Replica:
            await replicas.until_ready()
            paused = await busy_run_with_a_paused_leader(replicas.server, replicas)
            assert replicas.holder("scheduler") not in ("", paused.identity)
            assert problems(replicas.server.store) == []
            assert refusals(replicas.server) == []
            return paused

        paused = run(body(), timeout=900)
        assert paused.child.returncode is None
    assert f"{paused.identity} lost the lease" in paused.child.stderr
