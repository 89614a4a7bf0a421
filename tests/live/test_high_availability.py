"""High availability (issue #20): the chart installed with two replicas of each of the scheduler, binder,
pod grouper and status controllers, each pod a process run exactly as its Deployment says (`replicas.py`:
its args, its ServiceAccount's token, on the strict fake API server with the chart's RBAC and webhooks),
with only `--identity` and the lease timing added; the leaders of the scheduler and of the binder are
killed (SIGKILL) while pods are being bound.
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
from installed_chart import ChartPod
from live_support import eventually, run
from replicas import COMPONENTS, Replicas

from kai_fakeapi import Store

TIMING = ("4s", "3s", "500ms")  # lease duration, renew deadline, retry period


@contextlib.contextmanager
def replicated(folder: Path) -> Iterator[Replicas]:
    """The seeded cluster on the fake API server (its kubelet on), the chart installed on it with two
    replicas of each component running; a failure inside shows every replica's output."""
    store = Store(kubelet=True)
    seed(store)
    with (
        strict_server(chart=False, store=store, bookmark_interval=0.5) as server,
        Replicas(server, folder, timing=TIMING) as replicas,
    ):
        yield replicas


def names(replicas: Replicas, component: str) -> set[str]:
    """The pod names of `component`'s two replicas, as its Deployment names them."""
    found = {pod.name for pod in replicas.pods(component)}
    assert len(found) == 2
    return found


def test_the_standbys_take_over_from_killed_leaders_mid_run(tmp_path: Path) -> None:
    with replicated(tmp_path) as replicas:
        store = replicas.server.store

        async def body() -> Failover:
            await replicas.until_ready()
            # Before the kill, each component's Lease is held by one of its replicas.
            for component in COMPONENTS:
                assert replicas.holder(component) in names(replicas, component)
            failover = await busy_run_with_failover(replicas.server, replicas)
            assert failover.pods == len(store.list("pods", "default")) > failover.bound_before
            for component in KILLED:
                # The standby holds the Lease now (the killed one never comes back to take it).
                killed = failover.killed[component]
                assert failover.successors[component] == replicas.holder(component) != killed
                assert replicas.holder(component) in names(replicas, component)
            assert failover.next_bind > 0  # the new leaders bound what came after the kill
            assert problems(store) == []
            assert refusals(replicas.server) == []  # the chart grants each replica what it does
            return failover

        failover = run(body(), timeout=900)
        # The survivors are still running (the test's end stops them).
        survivors = [pod for pod in replicas.all if pod.name not in failover.killed.values()]
        assert len(survivors) == len(replicas.all) - len(KILLED)
        assert all(pod.child is not None and pod.child.returncode is None for pod in survivors)


def test_a_leader_paused_past_its_lease_steps_down_when_it_goes_on(tmp_path: Path) -> None:
    # It wakes with its caches as they were: nothing it decided from them may be written.
    with replicated(tmp_path) as replicas:

        async def body() -> ChartPod:
            await replicas.until_ready()
            paused = await busy_run_with_a_paused_leader(replicas.server, replicas)
            assert replicas.holder("scheduler") not in ("", paused.name)
            # Its cycles stop writing at once (`leading()`); its elector says so at its next attempt, a
            # retry period after it woke, which may come after every pod is bound.
            child = paused.child
            assert child is not None
            await eventually(lambda: f"{paused.name} lost the lease" in child.stderr_so_far(), timeout=60)
            assert problems(replicas.server.store) == []
            assert refusals(replicas.server) == []
            return paused

        paused = run(body(), timeout=900)
        assert paused.child is not None and paused.child.returncode is None
    assert f"{paused.name} lost the lease" in paused.child.stderr
