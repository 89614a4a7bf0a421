"""How long pods run, for the start-time look-ahead (`sim/estimates.py`), and what both edges hand it
(`StartTimeQuery`). Pure: the simulator and live mode fill it in from their own records.

A pod's duration, by this rule (docs/start-times.md):

1. Known: its `simulation.kai.scheduler/duration` annotation.
2. Else estimated from similar completed pods: the median run time of the latest `HISTORY_PER_SHAPE`
   completed pods of the same shape (`Shape`: the same queue, the same job size, i.e. the PodGroup's
   minMember (1 for a pod without one), and the same request per pod: CPU, memory, whole or shared GPUs,
   other devices); when there is none, of the same queue and request per pod, whatever the job's size.
3. Else unknown: in the look-ahead it runs for good, so whatever waits only for it gets no estimate.

A running pod's remaining time is its duration less the time it has run. One that has outrun an
estimated duration has no estimate any more (the estimate was wrong: unknown); one that has outrun its
known duration is taken to end at once.
"""

from __future__ import annotations

import functools
import statistics
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from kai_scheduler.api import constants as c
from kai_scheduler.api.durations import parse_duration
from kai_scheduler.api.objects import Pod, PodGroup
from kai_scheduler.framework.config import SchedulerConfig
from kai_scheduler.model.builder import job_key_of, pod_request
from kai_scheduler.model.reservations import RunEstimates
from kai_scheduler.model.snapshot import ClusterState

# Completed pods remembered per shape: the latest ones, since a team's jobs change over weeks.
HISTORY_PER_SHAPE: Final = 20
# Completed pods whose run was counted, remembered by id so that none counts twice (live mode sees a
# Succeeded pod at every estimate until it is deleted); the oldest ids are forgotten beyond this.
_SEEN_LIMIT: Final = 100_000
_TERMINAL: Final = ("Succeeded", "Failed")
_JUST_AFTER: Final = 1e-6
# The plugin that asks the edges for run estimates each cycle (`plugins.reservation`).
RESERVATION_PLUGIN: Final = "reservation"


def wants_run_estimates(config: SchedulerConfig) -> bool:
    """Whether cycles under `config` need run estimates (`CycleDriver.estimates`): reservations are on."""
    return config.plugin(RESERVATION_PLUGIN) is not None


@dataclass(frozen=True, slots=True)
class Shape:
    """What makes two pods' jobs similar: the queue, the job's size and the pod's own request."""

    queue: str
    pods: int
    request: tuple[object, ...]


def shape_of(pod: Pod, group: PodGroup | None) -> Shape:
    """A pod's shape; `group`: its PodGroup (None: the pod is its own job, as the pod grouper makes it)."""
    label = pod.metadata.labels.get(c.QUEUE_LABEL) or c.DEFAULT_QUEUE
    if group is None:
        return Shape(label, 1, pod_request(pod).shape())
    return Shape(group.spec.queue or label, group.spec.gang_min_member, pod_request(pod).shape())


def known_duration(pod: Pod) -> float | None:
    """The pod's `simulation.kai.scheduler/duration` (None: none, or not a duration)."""
    text = pod.metadata.annotations.get(c.SIM_DURATION_ANNOTATION)
    return None if text is None else _seconds_of(text)


@functools.lru_cache(maxsize=8192)
def _seconds_of(text: str) -> float | None:
    """A duration annotation's seconds, None if it is not a non-negative duration (asked for every pod of
    every cycle when reservations are on: a cluster's pods share a few thousand values at most)."""
    try:
        seconds = parse_duration(text)
    except ValueError:
        return None  # live mode reads what users wrote; the simulator's loader refuses it earlier
    return seconds if seconds >= 0 else None


class RunHistory:
    """Run times of completed pods by shape (the latest `per_shape` of each), and the estimate they give."""

    def __init__(self, per_shape: int = HISTORY_PER_SHAPE) -> None:
        self.per_shape = per_shape
        self._exact: dict[Shape, deque[float]] = {}
        self._loose: dict[tuple[str, tuple[object, ...]], deque[float]] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()

    def add(self, run_id: str, shape: Shape, seconds: float) -> None:
        """Count the completed run `run_id` (a pod's uid or key) once, whatever how often it is added."""
        if run_id in self._seen or seconds < 0:
            return
        self._seen[run_id] = None
        if len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        self._exact.setdefault(shape, deque(maxlen=self.per_shape)).append(seconds)
        loose = (shape.queue, shape.request)
        self._loose.setdefault(loose, deque(maxlen=self.per_shape)).append(seconds)

    def estimate(self, shape: Shape) -> float | None:
        """The median run time of similar completed pods (see the module doc), or None."""
        runs = self._exact.get(shape) or self._loose.get((shape.queue, shape.request))
        return float(statistics.median(runs)) if runs else None

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._exact.values())


def remaining(duration: float | None, *, known: bool, elapsed: float) -> float | None:
    """What is left of a running pod's `duration` after `elapsed` seconds (None: unknown)."""
    if duration is None:
        return None
    left = duration - elapsed
    if left >= 0:
        return left
    return 0.0 if known else None


@dataclass(frozen=True, slots=True)
class StartTimeQuery:
    """What the look-ahead starts from: the cluster `state` as the scheduler serves it, scheduled with
    `config`, on a session clock whose second 0 is `origin`. `start` is the look-ahead's second 0 on that
    clock (the time of the next scheduling cycle); `started`, for running pods, when each began to run
    (a running pod without an entry is taken to have just started); `history`, the completed runs."""

    state: ClusterState
    config: SchedulerConfig
    origin: datetime
    start: float
    started: Mapping[str, float] = field(default_factory=dict)
    history: RunHistory = field(default_factory=RunHistory)
    max_cycles: int = 1000


def waiting_jobs(state: ClusterState) -> dict[str, int]:
    """The jobs that wait to start, each with its minMember: fewer than minMember of its pods run (bound,
    not finished, not terminating) and at least one waits for a placement. (A job running at or above its
    minMember with more pods pending has started: only its extra pods wait.)"""
    min_member = {g.pod_group.key: g.pod_group.spec.gang_min_member for g in state.pod_groups}
    running: dict[str, int] = {}
    pending: set[str] = set()
    for entry in state.pods:
        pod = entry.pod
        if pod.spec.scheduler_name != c.SCHEDULER_NAME or entry.phase in _TERMINAL:
            continue
        job = job_key_of(pod)
        if entry.node_name is None:
            if not entry.terminating:
                pending.add(job)
        elif not entry.terminating:
            running[job] = running.get(job, 0) + 1
    return {job: min_member.get(job, 1) for job in pending if running.get(job, 0) < min_member.get(job, 1)}


@dataclass(frozen=True, slots=True)
class PodRun:
    """What the rule reads of one pod of ours, whatever the cycle's time: its duration (None: unknown),
    whether the user gave it (`known`), and whether it holds a node's resources (`on_node`), since
    `begun` (None: it has just started)."""

    key: str
    duration: float | None
    known: bool
    on_node: bool
    begun: float | None = None


def pod_run(
    pod: Pod, group: PodGroup | None, history: RunHistory, *, on_node: bool, begun: float | None
) -> PodRun:
    """`pod`'s run by the rule; `group`: its PodGroup (None: it is its own job)."""
    known = known_duration(pod)
    if known is not None:
        return PodRun(pod.key, known, True, on_node, begun)
    return PodRun(pod.key, history.estimate(shape_of(pod, group)), False, on_node, begun)


def estimates_at(runs: Iterable[PodRun], now: float) -> RunEstimates:
    """When the pods of `runs` are expected to end at the time `now` (see `run_estimates`)."""
    ends: dict[str, float] = {}
    durations: dict[str, float] = {}
    changes_at: float | None = None
    for run in runs:
        duration = run.duration
        if duration is None:
            continue
        durations[run.key] = duration
        if not run.on_node:
            continue
        begun = run.begun
        left = remaining(duration, known=run.known, elapsed=now - (now if begun is None else begun))
        if left is not None:
            ends[run.key] = now + left
            if not run.known:
                # Past its estimate it has no expected end: right after now when it reaches it now.
                outrun = now + max(left, _JUST_AFTER)
                changes_at = outrun if changes_at is None else min(changes_at, outrun)
    return RunEstimates(ends, durations, changes_at)


def run_estimates(
    pods: Iterable[tuple[Pod, bool]],
    groups: Mapping[str, PodGroup],
    started: Mapping[str, float],
    history: RunHistory,
    now: float,
) -> RunEstimates:
    """When each pod is expected to end, by the rule above, for reservation and backfill
    (`model.reservations`). `pods`: the pods of ours that hold resources on a node (True) or wait (False),
    finished ones left out; one on a node ends `now` plus what is left of its duration (`started`: when it
    began to run; missing, it has just started); each runs for its whole duration once placed (again).
    `groups`: the PodGroups by job key (a pod without one is its own job)."""
    return estimates_at(
        (
            pod_run(
                pod,
                groups.get(job_key_of(pod)),
                history,
                on_node=on_node,
                begun=started.get(pod.key) if on_node else None,
            )
            for pod, on_node in pods
        ),
        now,
    )


__all__ = [
    "HISTORY_PER_SHAPE",
    "RESERVATION_PLUGIN",
    "PodRun",
    "RunHistory",
    "Shape",
    "StartTimeQuery",
    "estimates_at",
    "known_duration",
    "pod_run",
    "remaining",
    "run_estimates",
    "shape_of",
    "waiting_jobs",
    "wants_run_estimates",
]
