"""When will my job start: a look-ahead simulation of a cluster state (docs/start-times.md).

`estimate_starts(query)` takes the state the scheduler serves (`controlplane.run_times.StartTimeQuery`), gives
every pod the duration it has left (known, estimated from similar completed pods, or unknown: the rule
of `controlplane.run_times`), and runs the simulator's engine on that copy, with the same configuration, from
the next cycle's time until every job that waits to start has started, the look-ahead is steady, or its
`max_cycles` run out. A job's estimate is the time of the look-ahead's cycle that binds its first pod
(gangs bind their minMember pods in one cycle); None when it does not start. It is pure apart from the
engine, and shares no object with its caller: the simulator calls it after a run (`start_estimates`),
live mode in a worker process off the scheduling path (`k8s/scheduler/start_times.py`).

What the copy lacks, so what an estimate cannot foresee: arrivals after the state (new jobs, a Job's
controller making its next pods), and time-based fair share's usage history (the look-ahead starts a new
one), as in the replay of a `/get-snapshot`.
"""

from __future__ import annotations

from collections.abc import Mapping

from kai_scheduler.api import constants as c
from kai_scheduler.api.objects import ApiObject, Pod, PodGroup
from kai_scheduler.controlplane.run_times import (
    RunHistory,
    StartTimeQuery,
    known_duration,
    remaining,
    shape_of,
    waiting_jobs,
)
from kai_scheduler.framework.decisions import SessionResult
from kai_scheduler.model.builder import job_key_of
from kai_scheduler.model.snapshot import PodState
from kai_scheduler.model.state_export import export_objects, session_instant
from kai_scheduler.sim.engine import CycleRecord, Simulation, SimulationOptions, SimulationResult

# Estimates are sums of simulated times: round away float noise (3599.9999999999995), keep real fractions.
_DIGITS = 6


def estimate_starts(query: StartTimeQuery, *, steady: bool = False) -> dict[str, float | None]:
    """Every job that waits to start (`run_times.waiting_jobs`) -> when it starts in the look-ahead, on
    the query's session clock (None: not within it). Nothing waits: no look-ahead. `steady`: the state is
    a steady one (nothing would change in it without a pod ending), so that, when no pod has a duration,
    the look-ahead would only repeat it: every estimate is None without running it."""
    state = query.state
    targets = waiting_jobs(state)
    if not targets:
        return {}
    groups = {entry.pod_group.key: entry.pod_group for entry in state.pod_groups}
    if steady and not _anything_ends(query, groups):
        return dict.fromkeys(sorted(targets))
    entries = {entry.pod.key: entry for entry in state.pods}
    objects: list[ApiObject] = []
    job_of: dict[str, str] = {}
    for obj in export_objects(state, origin=query.origin, now=query.start):
        if isinstance(obj, Pod) and obj.spec.scheduler_name == c.SCHEDULER_NAME:
            obj = _timed(obj, entries[obj.key], groups, query)
            job_of[obj.key] = job_key_of(obj)
        objects.append(obj)
    options = SimulationOptions(start=session_instant(query.origin, query.start), max_cycles=query.max_cycles)
    look_ahead = Simulation(objects, query.config, options)
    look_ahead.cluster.nominate(
        {
            entry.pod.key: (entry.nominated_node, entry.nominated_gpu_groups)
            for entry in state.pods
            if entry.nominated_node is not None
        }
    )
    starts: dict[str, float] = {}

    def observe(record: CycleRecord, result: SessionResult) -> None:
        del result
        for decision in record.decisions:
            job = job_of.get(decision.pod)
            if decision.type == "bind" and job in targets and job not in starts:
                starts[job] = record.time

    look_ahead.observers.append(observe)
    look_ahead.done = lambda: len(starts) == len(targets)
    look_ahead.run()
    return {
        job: round(query.start + starts[job], _DIGITS) if job in starts else None for job in sorted(targets)
    }


def _anything_ends(query: StartTimeQuery, groups: Mapping[str, PodGroup]) -> bool:
    """Whether some pod of ours that runs or waits has a duration (known or estimated)."""
    for entry in query.state.pods:
        pod = entry.pod
        if pod.spec.scheduler_name != c.SCHEDULER_NAME or entry.phase in ("Succeeded", "Failed"):
            continue
        if known_duration(pod) is not None:
            return True
        if query.history.estimate(shape_of(pod, groups.get(job_key_of(pod)))) is not None:
            return True
    return False


def _timed(pod: Pod, entry: PodState, groups: Mapping[str, PodGroup], query: StartTimeQuery) -> Pod:
    """The pod as the look-ahead runs it: a pending one for its whole duration; a running one until what
    is left of its duration, and for its whole duration again if it is evicted and runs again (as the
    simulator runs a pod: it says it arrived that much before second 0); without a duration, for good."""
    if entry.phase in ("Succeeded", "Failed"):
        return pod
    known = known_duration(pod)
    duration = known
    if duration is None:
        duration = query.history.estimate(shape_of(pod, groups.get(job_key_of(pod))))
    if entry.node_name is None:
        return _with_times(pod, duration, None)
    elapsed = query.start - query.started.get(pod.key, query.start)
    left = remaining(duration, known=known is not None, elapsed=elapsed)
    if duration is None or left is None:
        return _with_times(pod, None, None)
    return _with_times(pod, duration, left - duration)


def _with_times(pod: Pod, duration: float | None, arrival: float | None) -> Pod:
    """The pod with `duration` (None: none, it runs for good) and `arrival` (None: none, second 0) as its
    simulation annotations."""
    annotations = dict(pod.metadata.annotations)
    for name, value in ((c.SIM_DURATION_ANNOTATION, duration), (c.SIM_ARRIVAL_ANNOTATION, arrival)):
        if value is None:
            annotations.pop(name, None)
        else:
            annotations[name] = repr(float(value))
    if annotations == pod.metadata.annotations:
        return pod
    metadata = pod.metadata.model_copy(update={"annotations": annotations})
    return pod.model_copy(update={"metadata": metadata})


# --- after a simulation ------------------------------------------------------------------------------


def start_estimates(simulation: Simulation, result: SimulationResult) -> dict[str, float | None]:
    """For `simulate`'s result document, every pod group's start (`podGroups[].estimatedStart`): for one
    that waits to start when the run ends, the look-ahead's estimate from the final state (None: it does
    not start within the look-ahead); for one that started, when it did (the earliest scheduling time of
    its pods that run or ran to completion; None when none of them was scheduled in the run, as pods
    that the input gives as Succeeded).

    A run of exactly `--cycles` N cycles is a look at those cycles (the benchmarks time one cycle of a
    whole trace so): it gets no look-ahead, which would cost about as much again; its waiting groups get
    None (`--until` asks when they start)."""
    cluster = result.cluster
    groups = {group.key: group for group, _, _ in cluster.pod_groups}
    history = RunHistory()
    started: dict[str, float] = {}
    actual: dict[str, float | None] = {}
    for pod in cluster.arrived_pods():
        if pod.pod.spec.scheduler_name != c.SCHEDULER_NAME:
            continue
        job = pod.job_key
        if pod.phase == "Succeeded" and pod.duration is not None:
            # Every pod that succeeds in a simulation ran for its duration; one the input gives as
            # Succeeded with a duration says how long it ran.
            history.add(pod.key, shape_of(pod.pod, groups.get(job)), pod.duration)
        if pod.phase == "Running":
            started[pod.key] = pod.scheduled_at if pod.scheduled_at is not None else pod.arrival
        actual.setdefault(job, None)
        if pod.phase in ("Running", "Succeeded") and pod.scheduled_at is not None:
            first = actual[job]
            actual[job] = pod.scheduled_at if first is None else min(first, pod.scheduled_at)
    if simulation.options.cycles is not None:
        return actual
    last = result.cycles[-1].time if result.cycles else 0.0
    query = StartTimeQuery(
        state=cluster.cache.state(),
        config=simulation.config,
        origin=simulation.options.start,
        # The look-ahead's first cycle is the one the run would have run next.
        start=last + simulation.config.period,
        started=started,
        history=history,
        max_cycles=simulation.options.max_cycles,
    )
    estimates = estimate_starts(query, steady=result.steady)
    return {**actual, **estimates}


__all__ = ["estimate_starts", "start_estimates"]
