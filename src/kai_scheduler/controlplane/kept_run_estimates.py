"""Run estimates kept from cycle to cycle, for reservation and backfill (issue #24), by both edges: live
mode (`k8s/scheduler/run_estimates.py`) and the simulator (`sim/run_estimates.py`).

The rule (`run_times`) reads a pod's annotations, request and PodGroup for its duration, and its records
for when it began to run; only the sums of `run_times.estimates_at` depend on the cycle's time. So each
pod's `PodRun` is worked out again only when something it reads changes: what its edge says it was made
from (its objects, compared as equal: the same objects, as a rule) or, for a pod without a duration of its
own, the history of completed runs. A cycle over tens of thousands of unchanged pods then costs lookups and
a few sums, not durations parsed and shapes made for every pod, and gives what the rule gives worked out
anew (the same floats: the sums are made at each cycle's time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kai_scheduler.controlplane.run_times import PodRun, RunHistory, Shape, estimates_at
from kai_scheduler.model.reservations import RunEstimates

# What a pod's run was worked out from, as its edge sees it.
Sources = tuple[object, ...]
# Works a pod's run out (its key, and its run as last worked out: None the first time).
WorkOut = Callable[[str, PodRun | None], PodRun]


class RunLog(RunHistory):
    """A `RunHistory` that says when it may have changed (`version`), so that estimates worked out from
    it are worked out again only then."""

    def __init__(self) -> None:
        super().__init__()
        self.version = 0

    def add(self, run_id: str, shape: Shape, seconds: float) -> None:
        super().add(run_id, shape, seconds)
        self.version += 1


class KeptRunEstimates:
    """See the module doc. `history`: the completed runs the pods without a duration are estimated from."""

    def __init__(self, history: RunLog) -> None:
        self.history = history
        self._kept: dict[str, tuple[Sources, PodRun]] = {}
        self._history_version = -1

    def at(self, pods: Iterable[tuple[str, Sources]], work_out: WorkOut, now: float) -> RunEstimates:
        """The estimates at the time `now` of `pods` (key, what its run is worked out from): the pods of
        ours not finished; `work_out` is asked for those whose run must be worked out (again)."""
        history_moved = self.history.version != self._history_version
        self._history_version = self.history.version
        last_kept = self._kept
        kept: dict[str, tuple[Sources, PodRun]] = {}
        for key, sources in pods:
            last = last_kept.get(key)
            if last is None or last[0] != sources or (history_moved and not last[1].known):
                last = (sources, work_out(key, None if last is None else last[1]))
            kept[key] = last
        self._kept = kept
        return estimates_at((run for _, run in kept.values()), now)


__all__ = ["KeptRunEstimates", "RunLog", "Sources", "WorkOut"]
