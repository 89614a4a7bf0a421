"""Live mode's start-time estimates (docs/start-times.md): every `interval`, off the scheduling path, the
look-ahead of `sim/estimates.py` on the state the scheduler last scheduled, written to each waiting
PodGroup as `kai.scheduler/estimated-start` (RFC 3339, to the second).

Off the scheduling path: the loop hands over the state of its next cycle only when asked
(`request_state`), which it makes anyway for that cycle; the look-ahead runs in a child process forked
for it (`runtime/forked.py`): it shares that state as it is, so nothing is serialised (pickling the state
of 8,000 pods held the interpreter lock for 1.4-2.8 s here, a fork takes about 10 ms), and a thread
would hold the lock against the cycle for the whole look-ahead. `fork=False` runs it on a thread (tests).
The estimator comes from the caller (the CLI passes `sim.estimates.estimate_starts`: the live edge does
not import the simulator's).

What this task adds to the state: when each running pod started (`status.startTime`), and the run times
of completed pods (`status.startTime` to their containers' latest `finishedAt`), remembered across
estimates in a `RunHistory` (a Succeeded pod may be deleted before a later estimate), the scheduler
loop's when the process runs one: the run estimates of reservation and backfill learn from it too
(`pod_runs.py`).

The state is the one a cycle started from, so the look-ahead's first cycle is that cycle again (same
state, same decisions): a job it starts at once is one that cycle placed, and gets no estimate.

Writes are rare: an annotation is written when a PodGroup starts waiting with an estimate, rewritten only
when the estimate moves by more than `tolerance` seconds (or 5% of the time until it, if more), and
removed when the group stops waiting or has no estimate any more. The loop's PodGroup effects
(`pod_groups.py`) remove it from a group its cycle places, in the patch that records the start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from kai_scheduler.api import constants as c
from kai_scheduler.controlplane.run_times import RunHistory, StartTimeQuery, waiting_jobs
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.framework.shard_config import ShardSpec
from kai_scheduler.k8s.runtime.access import access
from kai_scheduler.k8s.runtime.client import POD_GROUPS, ApiStatusError, JsonObject, KubeClient
from kai_scheduler.k8s.runtime.forked import in_forked_child
from kai_scheduler.k8s.runtime.informers import InformerSet
from kai_scheduler.k8s.runtime.objects import annotations_of, metadata_of
from kai_scheduler.k8s.runtime.wait import wait_or_stop
from kai_scheduler.k8s.scheduler.live_state import SessionClock
from kai_scheduler.k8s.scheduler.plugin_server import CycleState
from kai_scheduler.k8s.scheduler.pod_runs import count_completed, seconds_of, started_at
from kai_scheduler.model.builder import job_key_of
from kai_scheduler.model.partition import Partition

log = logging.getLogger(__name__)

ACCESS = (access(POD_GROUPS, "patch"),)  # the estimated-start annotation

StartTimeEstimator = Callable[[StartTimeQuery], Mapping[str, float | None]]

DEFAULT_INTERVAL = 30.0
DEFAULT_TOLERANCE = 60.0
# Beyond the absolute tolerance, an estimate far ahead may move by this part of the time until it.
_RELATIVE_TOLERANCE = 0.05
# An estimate this close to the cycle's own time is that cycle's placement (float noise aside).
_PLACED_BY_THE_CYCLE = 1e-6


class StartTimeAnnotations:
    """See the module doc. `cycles` answers the last published cycle state; `request_state` asks the loop
    to publish its next one; `partition`: the node pool the scheduler serves (its state is that pool's);
    `history`: the completed runs to learn from and add to (`pod_runs.py`; default: its own)."""

    def __init__(
        self,
        client: KubeClient,
        informers: InformerSet,
        config: SchedulerConfig,
        clock: SessionClock,
        estimate: StartTimeEstimator,
        *,
        cycles: Callable[[], CycleState | None],
        request_state: Callable[[], None],
        fork: bool = True,
        interval: float = DEFAULT_INTERVAL,
        tolerance: float = DEFAULT_TOLERANCE,
        partition: Partition | None = None,
        history: RunHistory | None = None,
    ) -> None:
        self.client = client
        self.informers = informers
        self.config = look_ahead_config(config, partition)
        self.clock = clock
        self.estimate = estimate
        self.cycles = cycles
        self.request_state = request_state
        self.fork = fork
        self.interval = interval
        self.tolerance = tolerance
        # Completed runs: the scheduler loop's own when given (reservation's run estimates read it too).
        self.history = history if history is not None else RunHistory()
        self.writes = 0  # PodGroup patches made, for tests and logs
        self._seen_cycle = -1

    async def run(self, stop: asyncio.Event) -> None:
        """Estimate and annotate every `interval` until `stop` is set (the first one interval after the
        start: a scheduler that just started has a backlog to place first)."""
        while not stop.is_set():
            await wait_or_stop(stop.wait(), stop, timeout=self.interval)
            if stop.is_set():
                return
            try:
                await self.run_once(stop)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("start-time estimates failed")

    async def run_once(self, stop: asyncio.Event | None = None) -> int:
        """Ask for the next cycle's state, estimate from it and write what changed; the writes made."""
        cycle = await self._next_cycle(stop)
        if cycle is None:
            return 0
        query = self.query(cycle)
        if self.fork:
            estimates = await in_forked_child(self.estimate, query)
        else:
            estimates = await asyncio.to_thread(self.estimate, query)
        return await self.annotate(cycle, estimates)

    async def _next_cycle(self, stop: asyncio.Event | None) -> CycleState | None:
        self.request_state()
        while True:
            cycle = self.cycles()
            if cycle is not None and cycle.cycle > self._seen_cycle:
                self._seen_cycle = cycle.cycle
                return cycle
            if stop is not None and stop.is_set():
                return None
            await asyncio.sleep(0.02)

    # --- the query -------------------------------------------------------------------------------

    def query(self, cycle: CycleState) -> StartTimeQuery:
        """The look-ahead's input: the cycle's state, its running pods' start times, the run history."""
        state = cycle.state
        groups = {entry.pod_group.key: entry.pod_group for entry in state.pod_groups}
        pods = self.informers.pods.cache
        started: dict[str, float] = {}
        for entry in state.pods:
            if entry.pod.spec.scheduler_name != c.SCHEDULER_NAME:
                continue
            raw = pods.get(entry.pod.key)
            if raw is None:
                continue
            if entry.phase == "Succeeded":
                count_completed(self.history, self.clock, raw, entry.pod, groups.get(job_key_of(entry.pod)))
            elif entry.node_name is not None and (begun := started_at(self.clock, raw)) is not None:
                started[entry.pod.key] = begun
        return StartTimeQuery(
            state=state,
            config=self.config,
            origin=cycle.origin,
            # The state is the one the cycle started from (not the one its decisions left): the look-ahead
            # begins with that very cycle, and a job it starts at once was placed by it.
            start=cycle.now,
            started=started,
            history=self.history,
        )

    # --- the annotations -------------------------------------------------------------------------

    async def annotate(self, cycle: CycleState, estimates: Mapping[str, float | None]) -> int:
        """Write the estimates of the waiting PodGroups, remove those of the others; the writes made."""
        waiting = waiting_jobs(cycle.state)
        now = self.clock.now()
        writes = 0
        for entry in cycle.state.pod_groups:
            key = entry.pod_group.key
            obj = self.informers.pod_groups.cache.get(key)
            if obj is None:
                continue
            current = annotations_of(obj).get(c.ESTIMATED_START_ANNOTATION)
            estimate = estimates.get(key) if key in waiting else None
            if estimate is not None and estimate <= cycle.now + _PLACED_BY_THE_CYCLE:
                estimate = None  # the cycle itself placed it: it does not wait
            changed, value = self._new_value(current, estimate, now)
            if changed and await self._patch(obj, value):
                writes += 1
        self.writes += writes
        if writes:
            log.info("start-time estimates: %d PodGroup annotations written", writes)
        return writes

    def _new_value(self, current: Any, estimate: float | None, now: float) -> tuple[bool, str | None]:
        """Whether the annotation changes (`current` is what it holds), and to what (None: removed)."""
        if estimate is None:
            return current is not None, None
        written = seconds_of(self.clock, current)
        if written is not None:
            slack = max(self.tolerance, _RELATIVE_TOLERANCE * (estimate - now))
            if abs(written - estimate) <= slack:
                return False, None
        return True, self.clock.stamp(estimate)

    async def _patch(self, obj: JsonObject, value: str | None) -> bool:
        meta = metadata_of(obj)
        patch = {"metadata": {"annotations": {c.ESTIMATED_START_ANNOTATION: value}}}
        try:
            await self.client.patch(POD_GROUPS, str(meta.get("name")), patch, meta.get("namespace"))
        except ApiStatusError as error:
            if error.code == 404:
                return False
            raise
        return True


def look_ahead_config(config: SchedulerConfig, partition: Partition | None) -> SchedulerConfig:
    """The configuration the look-ahead schedules a node pool's state with: that pool's shard, as the
    scheduler serves it (the simulator would take objects with the pool's label for another shard's)."""
    if partition is None or partition.value is None:
        return config  # the default shard: what the simulator makes of labelled input by itself
    shard = ShardSpec(partition.pool, partition.value)
    return replace(config, node_pool_label_key=partition.label_key, shards=(shard,))


__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_TOLERANCE",
    "StartTimeAnnotations",
    "StartTimeEstimator",
    "look_ahead_config",
]
