"""What the state builder hands the scheduling loop besides the `ClusterState` (`LiveState`: the objects,
per job its pods, `JobPods`, the jobs that changed), the loop's memory of placements (`Placed`), and the
session clock (`SessionClock`).

The session clock: the core measures time in seconds on one clock (`now`, minimum runtimes, staleness).
Live, that clock is seconds since the scheduler loop started (`SessionClock.start`, a wall-clock instant in
UTC); an RFC 3339 timestamp converts to it by subtracting the start, so times before the start are
negative, and back by adding it. The annotations are what survives a restart; the clock itself does not
need to."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from kai_scheduler.api.numa_placement import NumaZonePlacement
from kai_scheduler.api.timestamps import format_epoch, parse_rfc3339
from kai_scheduler.framework.decisions import ClaimAllocation
from kai_scheduler.k8s.runtime.client import (
    JsonObject,
)
from kai_scheduler.model.cache import ClusterCache
from kai_scheduler.model.snapshot import ClusterState, JobTimes, PodState

if TYPE_CHECKING:
    from kai_scheduler.k8s.scheduler.notices import Noticed
    from kai_scheduler.k8s.scheduler.waiting import Waiting

TERMINAL_PHASES = ("Succeeded", "Failed")


class SessionClock:
    """Seconds since `start` (a wall-clock instant, seconds since the epoch; default: now), and RFC 3339
    timestamps to and from that clock. `wall` is the wall clock (tests may pass their own)."""

    def __init__(self, start: float | None = None, wall: Callable[[], float] = time.time) -> None:
        self.wall = wall
        self.start = wall() if start is None else start

    def now(self) -> float:
        return self.wall() - self.start

    def seconds(self, stamp: str | datetime) -> float:
        """An RFC 3339 timestamp (or an aware datetime) on the session clock."""
        moment = parse_rfc3339(stamp) if isinstance(stamp, str) else stamp
        return moment.timestamp() - self.start

    def stamp(self, seconds: float) -> str:
        """A session-clock time as RFC 3339 in UTC, to the second (Go's time.RFC3339)."""
        return format_epoch(self.start + seconds)


@dataclass(frozen=True, slots=True)
class Placed:
    """A node and the shared GPUs on it: a pipelined pod's nomination, or a bind not yet seen (with the
    DRA claims it allocates and the NUMA zones it is predicted to take)."""

    node: str
    gpu_groups: tuple[str, ...] = ()
    claims: tuple[ClaimAllocation, ...] = ()
    numa_zones: tuple[NumaZonePlacement, ...] = ()


@dataclass(slots=True)
class JobPods:
    """One job's pods of ours that the state holds, as the loop's bookkeeping reads them (kept per changed
    pod). Finished pods count only in `pods`."""

    pods: int = 0
    running: int = 0  # bound (or binding), not terminating
    unbound: int = 0  # not bound (terminating or not): the job still waits for a placement
    waiting: dict[str, None] = field(default_factory=dict)  # the unbound ones not terminating, as a set
    # Those placed by a BindRequest the binder has not carried out yet (counted in `running`), as a set.
    binding: dict[str, None] = field(default_factory=dict)

    def count(self, key: str, state: PodState, sign: int, *, bound: bool = True) -> None:
        """Count the pod `key` in (`sign` 1) or out (-1); `bound`: its spec names its node (else a
        BindRequest does)."""
        self.pods += sign
        if state.phase in TERMINAL_PHASES:
            return
        if state.node_name is not None:
            self.running += 0 if state.terminating else sign
            if sign < 0:
                self.binding.pop(key, None)
            elif not bound:
                self.binding[key] = None
            return
        self.unbound += sign
        if state.terminating:
            return
        if sign > 0:
            self.waiting[key] = None
        else:
            self.waiting.pop(key, None)


class LiveState:
    """What the loop needs to act on the decisions of one cycle, as of one `StateBuilder.build`.

    Everything but `state` is kept current by the builder per changed object and handed here as read-only
    views of the builder's own (no copy, no walk over every pod): they are as of this build until the next
    one, i.e. for the cycle this build starts. `state`, the whole `ClusterState` (every pod, in creation
    order), is made from the cache only when asked for, which must be before the next `build` (the cache
    has moved on by then: asking later is an error, never a state of another moment)."""

    def __init__(
        self,
        cache: ClusterCache,
        *,
        pods: Mapping[str, JsonObject],
        our_pods: Mapping[str, PodState],
        job_of_pod: Mapping[str, str],
        pod_groups: Mapping[str, JsonObject],
        active_jobs: Set[str],
        bind_requests: Mapping[str, JsonObject],
        job_times: Mapping[str, JobTimes],
        job_pods: Mapping[str, JobPods],
        changed_jobs: Set[str],
        conditioned_groups: Set[str],
        skipped: tuple[str, ...] = (),
        rejected: Mapping[str, Waiting] | None = None,
        invalid_groups: Mapping[str, str] | None = None,
        noticed: tuple[Noticed, ...] = (),
    ) -> None:
        self.pods = pods  # pod key -> the pod as cached (every pod that parsed)
        self.our_pods = our_pods  # pod key -> its PodState, for our pods (nomination not applied)
        self.job_of_pod = job_of_pod  # pod key -> job key, for our pods
        self.pod_groups = pod_groups  # job key -> the PodGroup as cached
        self.active_jobs = active_jobs  # jobs with a pod bound (or binding) and not finished
        self.bind_requests = bind_requests  # pod key -> its BindRequest (any phase, any incarnation)
        self.job_times = job_times  # job key -> its times, as the cycle starts with them
        self.job_pods = job_pods  # job key -> its pods (jobs with pods of ours)
        self.changed_jobs = changed_jobs  # jobs whose pods or PodGroup changed since the last build
        self.conditioned_groups = conditioned_groups  # PodGroups whose status has schedulingConditions
        self.skipped = skipped  # objects left out because they do not validate
        # Waiting pods of ours the scheduler cannot take, and why (pod key -> `Waiting`); PodGroups that
        # break KAI's admission rules (key -> the problem, its field first). Read-only views, as above.
        self.rejected: Mapping[str, Waiting] = rejected if rejected is not None else {}
        self.invalid_groups: Mapping[str, str] = invalid_groups if invalid_groups is not None else {}
        self.noticed = noticed  # warnings about the objects read for this build (`notices.py`)
        self._cache: ClusterCache | None = cache
        self._state: ClusterState | None = None

    @property
    def state(self) -> ClusterState:
        if self._state is None:
            if self._cache is None:
                raise RuntimeError("LiveState.state asked for after the next build: the cache has moved on")
            self._state = self._cache.state()
        return self._state

    def expire(self) -> None:
        """The cache is about to change: `state` can no longer be made (one made already stays)."""
        self._cache = None


__all__ = ["TERMINAL_PHASES", "JobPods", "LiveState", "Placed", "SessionClock"]
