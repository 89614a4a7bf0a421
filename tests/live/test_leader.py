"""Leader election on a Lease, and the scheduler loop acting only while it leads: as the scheduler's
ServiceAccount, in the chart's namespace (where the chart's Role lets the components hold Leases)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from identities import ADMIN, ALL_IN_ONE, client_as
from live_support import Live, eventually, run

from chart_support import NAMESPACE
from helpers import node_manifest, pod_manifest, queue_manifest
from kai_fakeapi import FakeApiServer
from kai_scheduler.k8s.runtime.client import LEASES
from kai_scheduler.k8s.runtime.leader import Attempt, LeaderElector, LeaseTiming, micro_time, while_leading
from kai_scheduler.k8s.runtime.lightkube_client import LightkubeClient

MakeClient = Callable[..., LightkubeClient]
FAST = LeaseTiming(lease_duration=0.8, renew_deadline=0.5, retry_period=0.05)


def holder(server: FakeApiServer) -> str:
    lease = server.store.try_get("leases", "kai-scheduler", NAMESPACE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def test_one_leader_release_and_takeover(make_client: MakeClient, server: FakeApiServer) -> None:
    async def body() -> None:
        async with make_client("scheduler") as client:
            a = LeaderElector(client, namespace=NAMESPACE, identity="a", timing=FAST)
            # b's clock stands still, so a lease held by another never expires for b: b can only take
            # one that was released, however slowly this machine runs.
            b = LeaderElector(client, namespace=NAMESPACE, identity="b", timing=FAST, monotonic=lambda: 0.0)
            stop_a, stop_b = asyncio.Event(), asyncio.Event()
            task_a = asyncio.create_task(a.run(stop_a))
            await asyncio.wait_for(a.is_leader.wait(), 3)
            task_b = asyncio.create_task(b.run(stop_b))
            await eventually(lambda: b.holder == "a")  # b tried, and found the lease held
            assert a.is_leader.is_set() and not b.is_leader.is_set() and holder(server) == "a"
            stop_a.set()  # a releases the lease: b takes it without waiting for it to expire
            await task_a
            await asyncio.wait_for(b.is_leader.wait(), 10)
            assert holder(server) == "b" and not a.is_leader.is_set()
            stop_b.set()
            await task_b
            assert holder(server) == ""

    run(body())
    lease = server.store.get("leases", "kai-scheduler", NAMESPACE)
    assert lease["spec"]["leaseTransitions"] == 1


def test_expiry_takeover_and_loss_on_conflict(make_client: MakeClient, server: FakeApiServer) -> None:
    async def body() -> None:
        async with make_client("scheduler") as client:
            a = LeaderElector(client, namespace=NAMESPACE, identity="a", release_on_stop=False, timing=FAST)
            # b's clock moves only when the test moves it: the lease's expiry is a step of the test, not
            # a race with this machine's speed.
            clock = [0.0]
            b = LeaderElector(
                client, namespace=NAMESPACE, identity="b", timing=FAST, monotonic=lambda: clock[0]
            )
            stop_a, stop_b = asyncio.Event(), asyncio.Event()
            task_a = asyncio.create_task(a.run(stop_a))
            await asyncio.wait_for(a.is_leader.wait(), 3)
            task_b = asyncio.create_task(b.run(stop_b))
            await eventually(lambda: b.holder == "a")
            stop_a.set()  # a dies without releasing: b waits until the lease has not moved for its duration
            await task_a

            async def attempts_of_b(count: int) -> None:
                # a is gone: every read of the lease from now on is one of b's attempts, made one after
                # another, so when a second has begun the one before it is done.
                seen = len(server.requests(verb="get", resource="leases"))
                await eventually(lambda: len(server.requests(verb="get", resource="leases")) >= seen + count)

            await attempts_of_b(2)  # b has seen a's last renewal at 0
            clock[0] = 0.9  # the lease (1 s, as written) not expired yet on b's clock
            await attempts_of_b(2)
            assert not b.is_leader.is_set() and holder(server) == "a"
            clock[0] = 1.1  # now it has
            await asyncio.wait_for(b.is_leader.wait(), 10)
            # Someone else writes the lease: b sees another holder and stops leading at once.
            lease = await client.get(LEASES, "kai-scheduler", NAMESPACE)
            lease["spec"].update({"holderIdentity": "intruder", "renewTime": micro_time(time.time())})
            await client.replace(LEASES, lease)
            await eventually(lambda: not b.is_leader.is_set(), timeout=1)
            stop_b.set()
            await task_b

    run(body())
    assert holder(server) == "intruder"  # b did not release what it no longer holds


class SteppedElector(LeaderElector):
    """An elector on a clock of its own: each wait moves the clock on by the time waited (and is noted),
    so the moment it takes the lease over is exact, whatever the machine's speed."""

    def __init__(self, client: LightkubeClient, **kwargs: Any) -> None:
        self.now = 0.0
        self.waits: list[float] = []
        super().__init__(client, monotonic=lambda: self.now, **kwargs)

    async def _sleep(self, seconds: float, stop: asyncio.Event) -> None:
        self.waits.append(seconds)
        self.now += seconds
        if self.is_leader.is_set():
            stop.set()


def test_a_dead_leaders_successor_takes_over_when_the_lease_expires(
    make_client: MakeClient, server: FakeApiServer
) -> None:
    # The leader died after its last renewal: the lease stays as it left it. Retrying every 2 s, the
    # candidate would take it 16 s after first seeing it; it tries again at the expiry itself, 15 s.
    server.store.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "kai-scheduler", "namespace": NAMESPACE},
            "spec": {
                "holderIdentity": "dead",
                "leaseDurationSeconds": 15,
                "renewTime": micro_time(time.time()),
            },
        }
    )

    async def body() -> list[float]:
        async with make_client("scheduler") as client:
            candidate = SteppedElector(client, namespace=NAMESPACE, identity="next", timing=LeaseTiming())
            await candidate.run(asyncio.Event())
            assert candidate.transitions == 1
            return candidate.waits

    waits = run(body())
    assert waits == [2.0] * 7 + [1.0, 2.0]  # held 7 tries, then the expiry; the last wait is a renewal's
    assert holder(server) == ""  # released on stop


def test_a_leader_stopped_past_its_renew_deadline_does_not_lead_when_it_wakes(
    make_client: MakeClient, server: FakeApiServer
) -> None:
    async def body() -> None:
        async with make_client("scheduler") as client:
            now = [100.0]
            elector = LeaderElector(
                client, namespace=NAMESPACE, identity="me", timing=FAST, monotonic=lambda: now[0]
            )
            stop = asyncio.Event()
            campaign = asyncio.create_task(elector.run(stop))
            await asyncio.wait_for(elector.is_leader.wait(), 3)
            assert elector.leading()
            # The process is stopped (SIGSTOP, a long pause) for longer than its renew deadline: when it
            # runs again its lease may be another's, though it has not tried to renew it yet.
            now[0] += FAST.renew_deadline
            assert elector.is_leader.is_set() and not elector.leading()
            stop.set()
            await campaign

    run(body())


def test_a_lease_that_cannot_be_written_is_said(
    make_client: MakeClient, server: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    # Its namespace does not exist (or the replica may not write Leases): it would never lead.
    async def body() -> None:
        async with make_client(ADMIN) as client:
            elector = LeaderElector(client, namespace="nowhere", identity="me", timing=FAST)
            assert await elector.try_acquire_or_renew() is Attempt.FAILED

    with caplog.at_level(logging.WARNING, logger="kai_scheduler.k8s.runtime.leader"):
        run(body())
    [record] = caplog.records
    assert "cannot create lease nowhere/kai-scheduler" in record.getMessage()
    assert "not found" in record.getMessage()


def test_the_loop_acts_only_while_leading(server: FakeApiServer) -> None:
    store = server.store
    store.create(node_manifest("n1"))
    store.create(queue_manifest("q"))
    store.create(pod_manifest("p", gpus=1))

    async def body() -> None:
        client = client_as(server, ALL_IN_ONE)  # the elector of Live's process
        elector = LeaderElector(client, namespace=NAMESPACE, identity="me", timing=FAST)
        async with Live(server, binder=False, loop=False, leading=elector.leading) as live:
            stop = asyncio.Event()
            # Another replica holds the lease (for an hour): the elector campaigns and is refused.
            store.create(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": "kai-scheduler", "namespace": NAMESPACE},
                    "spec": {
                        "holderIdentity": "other",
                        "leaseDurationSeconds": 3600,
                        "renewTime": micro_time(time.time()),
                    },
                }
            )
            # The loop runs during each term the elector holds; here it holds none yet.
            scheduling = asyncio.create_task(while_leading(elector, live.loop.run, stop))
            campaign = asyncio.create_task(elector.run(stop))
            reads = len(server.requests(verb="get", resource="leases"))
            await live.until(lambda: len(server.requests(verb="get", resource="leases")) >= reads + 2)
            assert elector.holder == "other" and not elector.is_leader.is_set()
            assert live.loop.cycle == 0 and store.list("bindrequests") == []
            lease = store.get("leases", "kai-scheduler", NAMESPACE)
            lease["spec"]["holderIdentity"] = ""  # the other replica releases it
            store.update(lease)
            await live.until(lambda: len(store.list("bindrequests")) == 1)
            stop.set()
            await campaign
            await scheduling
        await client.aclose()

    run(body())
