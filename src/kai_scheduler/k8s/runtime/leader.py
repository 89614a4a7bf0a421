"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it.

Candidates share one Lease. The holder renews it every `retry_period` seconds (setting `renewTime`); the
others watch it and take it over once it has not changed for `lease_duration` seconds, measured on their
own clock from when they last saw it change (so clock skew between machines does not matter). Every write
is a replace with the Lease's resourceVersion, so of two candidates only one wins (the other gets 409).

`is_leader` (an `asyncio.Event`) is set while this candidate holds the lease. It is cleared at once when a
renewal meets a conflict (someone else holds the lease now), or when renewals have failed for
`renew_deadline` seconds (the API server is unreachable: another candidate may take over soon after).
`leading()`, what a component asks before it writes, also says no once the last renewal is
`renew_deadline` old: a process that was stopped or starved past its lease learns that it lost it only at
its next attempt, and must not act on its stale caches before.
On stop, a leader releases the lease (empties the holder) so that a successor need not wait it out.

A candidate that finds the lease held tries again after `retry_period`, or at the moment the lease would
expire if that is sooner: after a leader dies, its successor takes over once the lease has expired by its
own clock, not up to a retry period later (client-go retries on its period only, with jitter).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum

from kai_scheduler.api.timestamps import format_epoch
from kai_scheduler.k8s.runtime.access import Access, access
from kai_scheduler.k8s.runtime.client import LEASES, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.wait import wait_or_stop

log = logging.getLogger(__name__)


def lease_access(namespace: str) -> Access:
    """What a candidate does with the Leases of `namespace`: read, create and replace them."""
    return access(LEASES, "get", "create", "update", namespace=namespace)


TIMING_ORDER = "leader election needs 0 < retry_period < renew_deadline < lease_duration"


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """client-go's three durations of leader election, in seconds. The defaults are KAI's (its controllers
    keep controller-runtime's 15 s / 10 s / 2 s; its scheduler retries every 5 s)."""

    lease_duration: float = 15.0  # how long a lease not renewed stays held
    renew_deadline: float = 10.0  # how long a leader keeps leading while its renewals fail
    retry_period: float = 2.0  # how often candidates try to take, and leaders to renew, the lease

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(TIMING_ORDER)


class Attempt(Enum):
    ACQUIRED = "acquired"  # we hold the lease (taken or renewed)
    HELD = "held"  # someone else holds a live lease
    CONFLICT = "conflict"  # our write lost a race
    FAILED = "failed"  # the API server could not be asked


def micro_time(seconds: float) -> str:
    """Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return format_epoch(seconds, "microseconds")


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class LeaderElector:
    """See the module doc. `wall` stamps `acquireTime` / `renewTime`; `monotonic` measures durations."""

    def __init__(
        self,
        client: KubeClient,
        name: str = "kai-scheduler",
        namespace: str = "kai-scheduler",
        identity: str | None = None,
        *,
        timing: LeaseTiming = LeaseTiming(),
        release_on_stop: bool = True,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.lease_duration = timing.lease_duration
        self.renew_deadline = timing.renew_deadline
        self.retry_period = timing.retry_period
        self.release_on_stop = release_on_stop
        self.wall = wall
        self.monotonic = monotonic
        self.is_leader = asyncio.Event()
        self.holder: str | None = None  # the holder as last seen
        self.transitions = 0  # times this candidate became leader
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._expires_at = 0.0  # when the lease held by another expires (monotonic), if not renewed
        self._renewed_at = 0.0  # when the last attempt that took or renewed the lease began (monotonic)
        self._acquired_at: str | None = None

    # --- one attempt -----------------------------------------------------------------------------

    def _spec(self, previous: JsonObject | None) -> JsonObject:
        now = micro_time(self.wall())
        spec = dict(previous or {})
        ours = spec.get("holderIdentity") == self.identity
        transitions = int(spec.get("leaseTransitions") or 0)
        if previous is not None and not ours:
            transitions += 1
        spec.update(
            {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else now,
                "renewTime": now,
                "leaseTransitions": transitions,
            }
        )
        return spec

    async def try_acquire_or_renew(self) -> Attempt:
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except ApiStatusError as error:
            if error.code != 404:
                log.info("leader election: cannot read lease %s/%s: %s", self.namespace, self.name, error)
                return Attempt.FAILED
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(None),
            }
            try:
                created = await self.client.create(LEASES, body)
            except ApiStatusError as create_error:
                return self._refused("create", create_error)
            except (ConnectionError, OSError):
                return Attempt.FAILED
            self._observe(created)
            return Attempt.ACQUIRED
        except (ConnectionError, OSError) as error:
            log.info("leader election: API server unreachable: %s", error)
            return Attempt.FAILED
        spec = lease.get("spec") or {}
        self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            self._expires_at = self._observed_at + duration
            if self.monotonic() < self._expires_at:
                return Attempt.HELD
        lease["spec"] = self._spec(spec)
        try:
            updated = await self.client.replace(LEASES, lease)
        except ApiStatusError as error:
            return self._refused("update", error)
        except (ConnectionError, OSError):
            return Attempt.FAILED
        self._observe(updated)
        return Attempt.ACQUIRED

    def _refused(self, verb: str, error: ApiStatusError) -> Attempt:
        """A write the API server turned down: a race lost (409), or one that will fail every time until
        someone acts (its namespace missing, not allowed), which is said: else this replica would never
        lead and never tell why."""
        if error.code == 409:
            return Attempt.CONFLICT
        log.warning("leader election: cannot %s lease %s/%s: %s", verb, self.namespace, self.name, error)
        return Attempt.FAILED

    def _observe(self, lease: JsonObject) -> None:
        spec = lease.get("spec") or {}
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
        self.holder = record[0] or None
        if record != self._observed:
            self._observed = record
            self._observed_at = self.monotonic()

    async def release(self) -> None:
        """Give the lease up (only if we still hold it)."""
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(
                {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time(self.wall())}
            )
            lease["spec"] = spec
            await self.client.replace(LEASES, lease)
        except (ApiStatusError, ConnectionError, OSError) as error:
            log.info("leader election: release failed: %s", error)

    # --- running ---------------------------------------------------------------------------------

    async def _sleep(self, seconds: float, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    def _lose(self, why: str) -> None:
        if self.is_leader.is_set():
            log.warning(
                "leader election: %s lost the lease %s/%s (%s)", self.identity, self.namespace, self.name, why
            )
        self.is_leader.clear()

    def leading(self) -> bool:
        """Whether this candidate holds the lease now: it leads, and took or renewed the lease less than
        `renew_deadline` ago. A process that was stopped or starved for longer wakes up with `is_leader`
        still set, its lease taken over meanwhile and its caches stale; until its next attempt finds that
        out, anything it decided must not be written."""
        return self.is_leader.is_set() and self.monotonic() - self._renewed_at < self.renew_deadline

    def _next_try(self, attempt: Attempt) -> float:
        """Seconds to the next attempt: the retry period, or less when a held lease expires sooner."""
        if attempt is not Attempt.HELD:
            return self.retry_period
        return min(self.retry_period, max(0.0, self._expires_at - self.monotonic()))

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign, then renew, until `stop` is set; then release the lease if held."""
        try:
            while not stop.is_set():
                began = self.monotonic()  # the lease's new renewTime is no earlier than this
                attempt = await self.try_acquire_or_renew()
                if attempt is Attempt.ACQUIRED:
                    self._renewed_at = began
                    if not self.is_leader.is_set():
                        self.transitions += 1
                        log.info("leader election: %s leads %s/%s", self.identity, self.namespace, self.name)
                        self.is_leader.set()
                elif self.is_leader.is_set():
                    if attempt in (Attempt.CONFLICT, Attempt.HELD):
                        self._lose(f"held by {self.holder}" if attempt is Attempt.HELD else "conflict")
                    elif self.monotonic() - self._renewed_at > self.renew_deadline:
                        self._lose("renewals failed past the deadline")
                await self._sleep(self._next_try(attempt), stop)
        finally:
            was_leader = self.is_leader.is_set()
            self.is_leader.clear()
            if was_leader and self.release_on_stop:
                await self.release()


async def while_leading(
    elector: LeaderElector, work: Callable[[asyncio.Event], Awaitable[None]], stop: asyncio.Event
) -> None:
    """Run `work(term_stop)` during each leadership term; `term_stop` is set when the term ends."""
    while not stop.is_set():
        if not await wait_or_stop(elector.is_leader.wait(), stop):
            return
        term_stop = asyncio.Event()

        async def watch_term(term: asyncio.Event = term_stop) -> None:
            while elector.is_leader.is_set() and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.1)
            term.set()

        watcher = asyncio.create_task(watch_term())
        try:
            await work(term_stop)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


async def run_leading(
    elector: LeaderElector, work: Callable[[asyncio.Event], Awaitable[None]], stop: asyncio.Event
) -> None:
    """Campaign with `elector` and run `work` during each term, until `stop` is set."""
    await asyncio.gather(elector.run(stop), while_leading(elector, work, stop))


async def lead(
    elector: LeaderElector | None, work: Callable[[asyncio.Event], Awaitable[None]], stop: asyncio.Event
) -> None:
    """The live edge's one leadership mechanism: run `work(term)` until `stop`, during each term
    `elector` holds its Lease (`term` is set when the term ends), or all along without an elector. A
    component never sees the elector; one that must not act on a term that ended meanwhile (the
    scheduling loop, whose cycle takes time) is handed `elector.leading`."""
    if elector is None:
        await work(stop)
        return
    await run_leading(elector, work, stop)


__all__ = [
    "Attempt",
    "LeaderElector",
    "LeaseTiming",
    "default_identity",
    "lead",
    "micro_time",
    "run_leading",
    "while_leading",
]
