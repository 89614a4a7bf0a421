"""Live mode's run estimates for reservation and backfill (issue #24): when each pod of ours is expected
to end, by the one rule of `controlplane.run_times.run_estimates`, from what the state builder holds.

Asked by the scheduler loop once per cycle, on the event loop, only when the `reservation` plugin is
configured, and handed to the cycle's driver as they are (`CycleDriver.estimates`): the completed runs
they learn from are the process's one history (`RunLog`, a `RunHistory` that counts its changes), which
the start-time estimates also read and add to on the event loop (`pod_runs.py`), so it is never read by
the cycle's thread while it changes. A pod's estimate is kept from cycle to cycle until something it
reads changes (`LiveRunEstimates`): 10,000 pods cost about 16 ms of CPU a cycle, 150 ms worked out anew.

A running pod's run is counted from when it was placed, as this scheduler knows it: its `PodScheduled`
transition (the API server stamps it at the binding) or, still binding, its BindRequest's creation
(`job_starts.placed_at`); else its kubelet's `status.startTime`; else when this process first saw it on
a node. Each is the same at every cycle, so a pod's expected end (and a reservation that waits for it)
does not move from one cycle to the next while nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kai_scheduler.api.objects import PodGroup
from kai_scheduler.controlplane.run_times import RunHistory, Shape, known_duration, run_estimates
from kai_scheduler.k8s.runtime.client import JsonObject
from kai_scheduler.k8s.scheduler.job_starts import placed_at
from kai_scheduler.k8s.scheduler.live_state import TERMINAL_PHASES, LiveState, SessionClock
from kai_scheduler.k8s.scheduler.pod_runs import count_completed, started_at
from kai_scheduler.model.builder import job_key_of
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.model.snapshot import PodGroupState, PodState

# The plugin that reads run estimates (`plugins.reservation`): without it none are made.


class _PodGroups(Mapping[str, PodGroup]):
    """The PodGroups by job key, as a view of the state builder's (no copy per cycle)."""

    def __init__(self, states: Mapping[str, PodGroupState]) -> None:
        self._states = states

    def __getitem__(self, key: str) -> PodGroup:
        return self._states[key].pod_group

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)


@dataclass(frozen=True, slots=True)
class _Estimate:
    """One pod's estimate, with what it was worked out from (the objects, by identity)."""

    state: PodState
    raw: JsonObject | None
    request: JsonObject | None
    group: PodGroupState | None
    begun: float | None  # when it began to run (a pod on a node), as counted
    from_history: bool  # no duration of its own: the history gave it (or found none)
    end: float | None
    duration: float | None


class RunLog(RunHistory):
    """A `RunHistory` that says when it may have changed (`version`), so that estimates worked out from
    it are worked out again only then."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0

    def add(self, run_id: str, shape: Shape, seconds: float) -> None:
        super().add(run_id, shape, seconds)
        self.version += 1


class LiveRunEstimates:
    """See the module doc. `history`: the process's completed runs (learnt from here too).

    Each pod's estimate is worked out by the rule (`run_estimates`, one pod at a time) when something it
    reads changed: its objects (the state builder hands a changed pod, PodGroup or BindRequest on as a new
    object), the history (for a pod without a duration of its own), or the clock, once it passed the
    pod's expected end (an outrun duration). Otherwise the last one stands: a pod's expected end is when
    it began plus its duration, whatever the cycle's time, so a cycle over 10,000 unchanged pods costs
    lookups, not 10,000 durations parsed and shapes made."""

    def __init__(self, clock: SessionClock, history: RunLog) -> None:
        self.clock = clock
        self.history = history
        self._estimates: dict[str, _Estimate] = {}
        self._history_version = -1
        self._counted: set[str] = set()  # Succeeded pods whose run is in the history

    def at(self, live: LiveState, groups: Mapping[str, PodGroupState], now: float) -> RunEstimates:
        """The estimates of `live`'s pods of ours at the cycle time `now`; `groups`: the PodGroups as the
        state builder holds them."""
        models = _PodGroups(groups)
        self._count_completed(live, models)
        history_moved = self.history.version != self._history_version
        self._history_version = self.history.version
        estimates: dict[str, _Estimate] = {}
        ends: dict[str, float] = {}
        durations: dict[str, float] = {}
        for key, state in live.our_pods.items():
            if state.phase in TERMINAL_PHASES:
                continue
            raw, request = live.pods.get(key), live.bind_requests.get(key)
            job = live.job_of_pod.get(key)
            group = groups.get(job) if job is not None else None
            last = self._estimates.get(key)
            if (
                last is None
                or last.state is not state
                or last.raw is not raw
                or last.request is not request
                or last.group is not group
                or (last.from_history and history_moved)
                or (last.end is not None and last.end < now)
            ):
                seen = last.begun if last is not None else None
                last = self._estimate(key, state, raw, request, group, models, seen, now)
            estimates[key] = last
            if last.end is not None:
                ends[key] = last.end
            if last.duration is not None:
                durations[key] = last.duration
        self._estimates = estimates
        return RunEstimates(ends, durations)

    def _count_completed(self, live: LiveState, models: Mapping[str, PodGroup]) -> None:
        counted: set[str] = set()
        for key, state in live.our_pods.items():
            raw = live.pods.get(key)
            if state.phase != "Succeeded" or raw is None:
                continue
            counted.add(key)
            if key not in self._counted:
                group = models.get(job_key_of(state.pod))
                count_completed(self.history, self.clock, raw, state.pod, group)
        self._counted = counted

    def _estimate(
        self,
        key: str,
        state: PodState,
        raw: JsonObject | None,
        request: JsonObject | None,
        group: PodGroupState | None,
        models: Mapping[str, PodGroup],
        seen: float | None,
        now: float,
    ) -> _Estimate:
        """`seen`: when the pod began to run as counted last time (None: it was not on a node)."""
        on_node = state.node_name is not None
        begun = None
        if on_node:
            begun = placed_at(self.clock, raw, request) if raw is not None else None
            if begun is None and raw is not None:
                begun = started_at(self.clock, raw)
            if begun is None:  # neither said: since this process first saw it on a node
                begun = seen if seen is not None else now
        started = {key: begun} if begun is not None else {}
        one = run_estimates([(state.pod, on_node)], models, started, self.history, now)
        return _Estimate(
            state,
            raw,
            request,
            group,
            begun,
            known_duration(state.pod) is None,
            one.ends.get(key),
            one.durations.get(key),
        )


__all__ = ["LiveRunEstimates", "RunLog"]
