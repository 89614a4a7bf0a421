"""Live mode's run estimates for reservation and backfill (issue #24): when each pod of ours is expected
to end, by the one rule of `controlplane.run_times.run_estimates`, from what the state builder holds.

Asked by the scheduler loop once per cycle, on the event loop, only when the `reservation` plugin is
configured, and handed to the cycle's driver as they are (`CycleDriver.estimates`): the completed runs
they learn from are the process's one `RunHistory`, which the start-time estimates also read and add to
on the event loop (`pod_runs.py`), so it is never read by the cycle's thread while it changes.

A running pod's run is counted from when it was placed, as this scheduler knows it: its `PodScheduled`
transition (the API server stamps it at the binding) or, still binding, its BindRequest's creation
(`job_starts.placed_at`); else its kubelet's `status.startTime`; else when this process first saw it on
a node. Each is the same at every cycle, so a pod's expected end (and a reservation that waits for it)
does not move from one cycle to the next while nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.controlplane.run_times import RunHistory, run_estimates
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.k8s.scheduler.job_starts import placed_at
from kai_scheduler.k8s.scheduler.live_state import TERMINAL_PHASES, LiveState, SessionClock
from kai_scheduler.k8s.scheduler.pod_runs import count_completed, started_at
from kai_scheduler.model.builder import job_key_of
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.model.snapshot import PodGroupState

# The plugin that reads run estimates (`plugins.reservation`): without it none are made.
RESERVATION_PLUGIN = "reservation"


def wants_run_estimates(config: SchedulerConfig) -> bool:
    return config.plugin(RESERVATION_PLUGIN) is not None


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


class LiveRunEstimates:
    """See the module doc. `history`: the process's completed runs (learnt from here too)."""

    def __init__(self, clock: SessionClock, history: RunHistory) -> None:
        self.clock = clock
        self.history = history
        self._first_seen: dict[str, float] = {}  # pod key -> when this process first saw it on a node
        self._counted: set[str] = set()  # Succeeded pods whose run is in the history

    def at(self, live: LiveState, groups: Mapping[str, PodGroupState], now: float) -> RunEstimates:
        """The estimates of `live`'s pods of ours at the cycle time `now`; `groups`: the PodGroups as the
        state builder holds them."""
        models = _PodGroups(groups)
        pods: list[tuple[Pod, bool]] = []
        started: dict[str, float] = {}
        first_seen: dict[str, float] = {}
        counted: set[str] = set()
        for key, state in live.our_pods.items():
            raw = live.pods.get(key)
            if state.phase in TERMINAL_PHASES:
                if state.phase == "Succeeded" and raw is not None:
                    counted.add(key)
                    if key not in self._counted:
                        group = models.get(job_key_of(state.pod))
                        count_completed(self.history, self.clock, raw, state.pod, group)
                continue
            on_node = state.node_name is not None
            pods.append((state.pod, on_node))
            if not on_node or raw is None:
                continue
            begun = placed_at(self.clock, raw, live.bind_requests.get(key))
            if begun is None:
                begun = started_at(self.clock, raw)
            if begun is None:
                begun = first_seen[key] = self._first_seen.get(key, now)
            started[key] = begun
        self._first_seen, self._counted = first_seen, counted
        return run_estimates(pods, models, started, self.history, now)


__all__ = ["RESERVATION_PLUGIN", "LiveRunEstimates", "wants_run_estimates"]
