"""Live mode's run estimates for reservation and backfill (issue #24): when each pod of ours is expected
to end, by the one rule of `controlplane.run_times.run_estimates`, from what the state builder holds.

Asked by the scheduler loop once per cycle, on the event loop, only when the `reservation` plugin is
configured, and handed to the cycle's driver as they are (`CycleDriver.estimates`): the completed runs
they learn from are the process's one history (`RunLog`, a `RunHistory` that counts its changes), which
the start-time estimates also read and add to on the event loop (`pod_runs.py`), so it is never read by
the cycle's thread while it changes. A pod's estimate is kept from cycle to cycle until something it
reads changes (`controlplane.kept_run_estimates`, shared with the simulator): 10,000 pods cost about 16 ms
of CPU a cycle, 150 ms worked out anew.

A running pod's run is counted from when it was placed, as this scheduler knows it: its `PodScheduled`
transition (the API server stamps it at the binding) or, still binding, its BindRequest's creation
(`job_starts.placed_at`); else its kubelet's `status.startTime`; else when this process first saw it on
a node. Each is the same at every cycle, so a pod's expected end (and a reservation that waits for it)
does not move from one cycle to the next while nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kai_scheduler.api.objects import PodGroup
from kai_scheduler.controlplane.kept_run_estimates import KeptRunEstimates, RunLog, Sources
from kai_scheduler.controlplane.run_times import PodRun, pod_run
from kai_scheduler.k8s.scheduler.job_starts import placed_at
from kai_scheduler.k8s.scheduler.live_state import TERMINAL_PHASES, LiveState, SessionClock
from kai_scheduler.k8s.scheduler.pod_runs import count_completed, started_at
from kai_scheduler.model.builder import job_key_of
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.model.snapshot import PodGroupState


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
    """See the module doc. `history`: the process's completed runs (learnt from here too).

    A pod's run is worked out again when its objects change (the state builder hands a changed pod,
    PodGroup or BindRequest on as a new object) or, without a duration of its own, when the history does;
    otherwise the last one stands (`KeptRunEstimates`)."""

    def __init__(self, clock: SessionClock, history: RunLog) -> None:
        self.clock = clock
        self.history = history
        self._kept = KeptRunEstimates(history)
        self._counted: set[str] = set()  # Succeeded pods whose run is in the history

    def at(self, live: LiveState, groups: Mapping[str, PodGroupState], now: float) -> RunEstimates:
        """The estimates of `live`'s pods of ours at the cycle time `now`; `groups`: the PodGroups as the
        state builder holds them."""
        models = _PodGroups(groups)
        self._count_completed(live, models)

        def pods() -> Iterator[tuple[str, Sources]]:
            for key, state in live.our_pods.items():
                if state.phase in TERMINAL_PHASES:
                    continue
                job = live.job_of_pod.get(key)
                group = groups.get(job) if job is not None else None
                yield key, (state, live.pods.get(key), live.bind_requests.get(key), group)

        def work_out(key: str, last: PodRun | None) -> PodRun:
            state = live.our_pods[key]
            on_node = state.node_name is not None
            begun = self._begun(live, key, last.begun if last is not None else None, now) if on_node else None
            return pod_run(
                state.pod, models.get(job_key_of(state.pod)), self.history, on_node=on_node, begun=begun
            )

        return self._kept.at(pods(), work_out, now)

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

    def _begun(self, live: LiveState, key: str, seen: float | None, now: float) -> float:
        """When a pod on a node began to run, as counted (see the module doc); `seen`: as counted last time
        (None: it was not on a node)."""
        raw = live.pods.get(key)
        begun = None
        if raw is not None:
            begun = placed_at(self.clock, raw, live.bind_requests.get(key))
            if begun is None:
                begun = started_at(self.clock, raw)
        if begun is None:  # neither said: since this process first saw it on a node
            begun = seen if seen is not None else now
        return begun


__all__ = ["LiveRunEstimates", "RunLog"]
