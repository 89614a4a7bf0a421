"""What every effect of a scheduling cycle shares: the API client, a bound on the writes in flight, the
events the scheduler records, and the report of what the cycle did (`CycleReport`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field

from kai_scheduler.framework.decisions import Decision, SessionResult
from kai_scheduler.k8s.runtime.client import ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.events import record_event
from kai_scheduler.k8s.scheduler.live_state import SessionClock


@dataclass(slots=True)
class CycleReport:
    """What one `run_once` did."""

    cycle: int
    now: float
    result: SessionResult | None = None
    bind_requests: list[str] = field(default_factory=list)  # pod keys a BindRequest was created for
    evictions: list[str] = field(default_factory=list)  # pod keys evicted
    ungated: list[str] = field(default_factory=list)  # pod keys whose queue-admission gate came off
    pod_group_updates: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    acted: bool = True  # False when leadership was lost before the decisions were carried out

    @property
    def decisions(self) -> list[Decision]:
        return self.result.decisions if self.result is not None else []


class Effects:
    """The client the effects write with, at most `concurrency` writes at once, and the events recorded
    as `scheduler_name` (none without `record_events`)."""

    def __init__(
        self,
        client: KubeClient,
        clock: SessionClock,
        *,
        scheduler_name: str,
        record_events: bool = True,
        concurrency: int = 16,
    ) -> None:
        self.client = client
        self.clock = clock
        self.scheduler_name = scheduler_name
        self.record_events = record_events
        self._semaphore = asyncio.Semaphore(concurrency)

    async def limited(self, call: Awaitable[None], report: CycleReport, what: str) -> None:
        async with self._semaphore:
            try:
                await call
            except (ApiStatusError, ConnectionError, OSError) as error:
                report.errors.append(f"{what}: {error}")

    async def event(self, obj: JsonObject, kind: str, reason: str, message: str) -> None:
        stamp = self.clock.stamp(self.clock.now())
        await record_event(
            self.client,
            obj,
            type=kind,
            reason=reason,
            message=message,
            component=self.scheduler_name,
            stamp=stamp,
        )


__all__ = ["CycleReport", "Effects"]
