"""A run replayed from its result document: the pods' arrivals, the binds and evictions of `decisions` in
order, and the completions of the pods that ended `Succeeded` (their last start plus their duration), into
step functions over simulated time (GPUs allocated and pods pending per queue, fragmented GPUs), each pod
group's arrival, start and completion, and every eviction with the work it cost.

Pure: the document and the run's facts (`sim.timeseries.RunFacts`) in, a `Timeline` out. A pod's state
changes exactly as the simulated cluster changed it (`sim.in_memory_cluster.SimCluster.apply`): a bind
runs it, an evict of a running pod stops it and makes it pending again (an evict of a pod that is not
running, one moved and taken again in the same cycle, changes nothing), and completions come before a
cycle's decisions at the same time, as the engine completes what is due before it schedules.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kai_scheduler.sim.timeseries import RunFacts

FloatArray = npt.NDArray[np.float64]
NO_QUEUE = "(no queue)"
_EPS = 1e-9

# Events at one instant, in the order the simulated cluster takes them: completions, the controllers'
# deletions, arrivals, the cycle's decisions.
_COMPLETE, _DELETE, _ARRIVE, _DECIDE = 0, 1, 2, 3


@dataclass(slots=True)
class GroupTimes:
    key: str
    queue: str
    min_member: int
    arrival: float
    start: float | None = None  # when it first had minMember pods running
    completion: float | None = None  # when its last pod succeeded, once all of them have
    # Running from the input (bound in the manifests): it did not wait in this run, so it has no wait
    # time nor completion time of its own.
    preexisting: bool = False


@dataclass(frozen=True, slots=True)
class Eviction:
    time: float
    pod: str
    queue: str
    action: str
    ran_seconds: float  # how long it had run since its last start
    gpu: float


@dataclass(eq=False)
class Timeline:
    end: float
    capacity: float
    queues: list[str]  # leaf queues, then any other queue that pods name
    leaf_queues: list[str]
    # Step functions: row i holds from times[i] until times[i + 1] (the last until `end`).
    times: FloatArray
    allocated: dict[str, FloatArray]  # GPU units by queue
    pending: dict[str, FloatArray]  # pending pods by queue
    total_allocated: FloatArray
    fragmented: FloatArray  # idle GPU units no waiting request can use (see `fragmented_gpus`)
    fair_share_times: FloatArray
    fair_share: dict[str, FloatArray]
    groups: list[GroupTimes]
    evictions: list[Eviction] = field(default_factory=list)


def integral(times: FloatArray, values: FloatArray, end: float) -> float:
    """The time integral over [0, end] of a step function (0 before its first step)."""
    if times.size == 0:
        return 0.0
    starts = np.clip(times, 0.0, end)
    stops = np.clip(np.append(times[1:], end), 0.0, end)
    return float(np.sum(values * np.maximum(stops - starts, 0.0)))


def time_weighted_mean(times: FloatArray, values: FloatArray, end: float) -> float:
    """The mean of a step function over [0, end]; over an empty run (end 0), its value at the end."""
    if end <= 0:
        return float(values[-1]) if values.size else 0.0
    return integral(times, values, end) / end


def fragmented_gpus(
    free_whole: FloatArray,
    shared_free: FloatArray,
    whole_waiting: Counter[int],
    portion_waiting: Counter[float],
) -> float:
    """Idle GPU capacity that none of the waiting GPU requests can use, counting GPUs only.

    A node's idle whole GPUs are fragmented when fewer than the smallest waiting whole-GPU request asks for
    and no fractional request waits (one would fit on any idle GPU); the idle part of a shared GPU is
    fragmented when it is smaller than the smallest waiting fraction (all of it when only whole-GPU requests
    wait). Nothing waiting, nothing is fragmented: idle capacity nobody asks for is slack, not waste.
    """
    if not whole_waiting and not portion_waiting:
        return 0.0
    total = 0.0
    if not portion_waiting:
        smallest = min(whole_waiting)
        total += float(free_whole[free_whole < smallest].sum())
    if shared_free.size:
        if portion_waiting:
            smallest_portion = min(portion_waiting)
            total += float(shared_free[shared_free < smallest_portion - _EPS].sum())
        else:
            total += float(shared_free.sum())
    return total


@dataclass(slots=True)
class _Run:
    """A running pod: since when, where, on which shared GPUs, how many GPU units."""

    start: float
    node: str | None
    groups: tuple[str, ...]
    gpu: float
    whole: int
    portion: float


class _Replay:
    def __init__(self, document: dict[str, Any], facts: RunFacts) -> None:
        self.facts = facts
        queues = document["queues"]
        parents = {q["parent"] for q in queues if q["parent"]}
        self.leaf_queues = [q["name"] for q in queues if q["name"] not in parents]
        self.pods = {f"{p['namespace']}/{p['name']}": p for p in document["pods"]}
        others = sorted({self._queue(key) for key in self.pods} - set(self.leaf_queues))
        self.queues = self.leaf_queues + others
        self.queue_index = {name: i for i, name in enumerate(self.queues)}
        self.alloc = np.zeros(len(self.queues))
        self.pend = np.zeros(len(self.queues))
        self.total = 0.0
        nodes = list(facts.node_gpus)
        self.node_index = {name: i for i, name in enumerate(nodes)}
        self.node_free = np.array([float(facts.node_gpus[n]) for n in nodes])
        # Shared GPUs in use: their node and the part of them taken, and how many pods hold each.
        self.shared: dict[str, list[Any]] = {}
        self.whole_waiting: Counter[int] = Counter()
        self.portion_waiting: Counter[float] = Counter()
        self.running: dict[str, _Run] = {}
        min_member = {f"{g['namespace']}/{g['name']}": g["minMember"] for g in document["podGroups"]}
        self.groups: dict[str, GroupTimes] = {}
        for key, pod in self.pods.items():
            group = self.groups.get(pod["podGroup"])
            arrival = facts.pods[key].arrival
            if group is None:
                self.groups[pod["podGroup"]] = GroupTimes(
                    pod["podGroup"], self._queue(key), int(min_member.get(pod["podGroup"], 1)), arrival
                )
            else:
                group.arrival = min(group.arrival, arrival)
        self.group_running: Counter[str] = Counter()
        self.evictions: list[Eviction] = []
        # Each pod's last bind or evict, by its index in the decisions.
        self.last_decision: dict[str, int] = {}

    def _queue(self, pod: str) -> str:
        queue = self.pods[pod]["queue"]
        return str(queue) if queue else NO_QUEUE

    # --- pod state changes -----------------------------------------------------------------------

    def _start(self, pod: str, time: float, node: str | None, groups: tuple[str, ...]) -> None:
        facts = self.facts
        request = facts.pods[pod].request
        portion = facts.gpu_portion(pod, node) if request.is_shared_gpu else 0.0
        run = _Run(time, node, groups, facts.gpu_units(pod, node), request.whole_gpus, portion)
        self.running[pod] = run
        self._count(pod, run.gpu)
        row = self.node_index.get(node) if node is not None else None
        if row is not None:
            self.node_free[row] -= run.whole
            for group in groups:
                held = self.shared.get(group)
                if held is None:
                    held = self.shared[group] = [row, 0.0, 0]
                    self.node_free[row] -= 1
                held[1] += portion
                held[2] += 1
        key = self.pods[pod]["podGroup"]
        self.group_running[key] += 1
        times = self.groups[key]
        if times.start is None and self.group_running[key] >= times.min_member:
            times.start = time

    def _stop(self, pod: str) -> _Run:
        run = self.running.pop(pod)
        self._count(pod, -run.gpu)
        row = self.node_index.get(run.node) if run.node is not None else None
        if row is not None:
            self.node_free[row] += run.whole
            for group in run.groups:
                held = self.shared[group]
                held[1] -= run.portion
                held[2] -= 1
                if held[2] == 0:
                    del self.shared[group]
                    self.node_free[row] += 1
        self.group_running[self.pods[pod]["podGroup"]] -= 1
        return run

    def _count(self, pod: str, gpu: float) -> None:
        queue = self.queue_index[self._queue(pod)]
        self.alloc[queue] += gpu
        self.total += gpu

    def _waiting(self, pod: str, change: int) -> None:
        self.pend[self.queue_index[self._queue(pod)]] += change
        request = self.facts.pods[pod].request
        if request.is_shared_gpu:
            shape = self.facts.gpu_portion(pod, None)
            self.portion_waiting[shape] += change
            if self.portion_waiting[shape] <= 0:
                del self.portion_waiting[shape]
        elif request.whole_gpus > 0:
            self.whole_waiting[request.whole_gpus] += change
            if self.whole_waiting[request.whole_gpus] <= 0:
                del self.whole_waiting[request.whole_gpus]

    # --- events ----------------------------------------------------------------------------------

    def arrive(self, pod: str, time: float) -> None:
        facts = self.facts.pods[pod]
        if facts.ended_before:
            return
        if facts.initial_node is not None:
            self._start(pod, time, facts.initial_node, facts.initial_groups)
            self.groups[self.pods[pod]["podGroup"]].preexisting = True
        else:
            self._waiting(pod, +1)

    def decide(self, decision: dict[str, Any], seq: int) -> None:
        pod, time = decision["pod"], decision["time"]
        if decision["type"] == "bind":
            self._waiting(pod, -1)
            self._start(pod, time, decision["node"], tuple(decision["gpuGroups"]))
        elif pod in self.running:  # an evict of a running pod: it stops and is pending again
            run = self._stop(pod)
            queue = self._queue(pod)
            self.evictions.append(Eviction(time, pod, queue, decision["action"], time - run.start, run.gpu))
            if not (self.pods[pod]["phase"] == "Failed" and self.last_decision.get(pod) == seq):
                self._waiting(pod, +1)  # unless its controller replaced it (it ends Failed)

    def complete(self, pod: str) -> None:
        self._stop(pod)

    def delete(self, pod: str) -> None:
        """Its controller deleted it unfinished: it stops, or waits no more."""
        if pod in self.running:
            self._stop(pod)
        else:
            self._waiting(pod, -1)

    def fragmented(self) -> float:
        shared = np.fromiter((1.0 - held[1] for held in self.shared.values()), float, len(self.shared))
        return fragmented_gpus(
            self.node_free, np.maximum(shared, 0.0), self.whole_waiting, self.portion_waiting
        )


def replay(document: dict[str, Any], facts: RunFacts) -> Timeline:
    """The run's timeline from its result document and facts."""
    state = _Replay(document, facts)
    events: list[tuple[float, int, int, Any]] = []
    last_bind: dict[str, float] = {}
    for seq, decision in enumerate(document["decisions"]):
        pod_facts = facts.pods.get(decision["pod"])
        # Decisions before a pod arrived were for one of the same name that ended before it was made
        # again (a StatefulSet's ordinal): the document follows the last one only, and so does the replay.
        if pod_facts is None or decision["time"] < pod_facts.arrival - _EPS:
            continue
        if decision["type"] in ("bind", "evict"):
            events.append((decision["time"], _DECIDE, seq, decision))
            state.last_decision[decision["pod"]] = seq
            if decision["type"] == "bind":
                last_bind[decision["pod"]] = decision["time"]
    for seq, (key, pod) in enumerate(state.pods.items()):
        pod_facts = facts.pods[key]
        events.append((pod_facts.arrival, _ARRIVE, seq, key))
        if pod["phase"] == "Succeeded" and pod_facts.duration is not None:
            start = last_bind.get(key, pod_facts.arrival if pod_facts.initial_node is not None else None)
            if start is not None:
                events.append((start + pod_facts.duration, _COMPLETE, seq, key))
        if pod["phase"] == "Failed" and pod_facts.deleted_at is not None:
            events.append((pod_facts.deleted_at, _DELETE, seq, key))
    events.sort(key=lambda event: (event[0], event[1], event[2]))
    end = float(document["summary"]["time"])
    times: list[float] = []
    alloc_rows: list[FloatArray] = []
    pend_rows: list[FloatArray] = []
    totals: list[float] = []
    fragmented: list[float] = []
    completed: dict[str, float] = {}
    for i, (time, kind, seq, item) in enumerate(events):
        if kind == _DECIDE:
            state.decide(item, seq)
        elif kind == _ARRIVE:
            state.arrive(item, time)
        elif kind == _DELETE:
            state.delete(item)
        else:
            state.complete(item)
            completed[item] = time
        if i + 1 < len(events) and events[i + 1][0] == time:
            continue  # the state after every event at this instant
        times.append(max(time, 0.0))
        alloc_rows.append(state.alloc.copy())
        pend_rows.append(state.pend.copy())
        totals.append(state.total)
        fragmented.append(state.fragmented())
    _completions(state, completed)
    alloc = np.array(alloc_rows).reshape(len(times), len(state.queues))
    pend = np.array(pend_rows).reshape(len(times), len(state.queues))
    share_times = np.array([t for t, _ in facts.fair_shares], dtype=float)
    return Timeline(
        end=end,
        capacity=float(document["summary"]["gpu"]["capacity"]),
        queues=state.queues,
        leaf_queues=state.leaf_queues,
        times=np.array(times, dtype=float),
        allocated={q: np.maximum(alloc[:, i], 0.0) for i, q in enumerate(state.queues)},
        pending={q: pend[:, i] for i, q in enumerate(state.queues)},
        total_allocated=np.maximum(np.array(totals, dtype=float), 0.0),
        fragmented=np.array(fragmented, dtype=float),
        fair_share_times=share_times,
        fair_share={
            q: np.array([shares.get(q, 0.0) for _, shares in facts.fair_shares], dtype=float)
            for q in state.queues
        },
        groups=list(state.groups.values()),
        evictions=state.evictions,
    )


def _completions(state: _Replay, completed: dict[str, float]) -> None:
    """A group completes when every pod of it has succeeded (but those its controller replaced, which end
    `Failed`): at its last pod's completion."""
    finish: dict[str, float] = {}
    unfinished: set[str] = set()
    for key, pod in state.pods.items():
        group = pod["podGroup"]
        if key in completed:
            finish[group] = max(finish.get(group, -math.inf), completed[key])
        elif pod["phase"] != "Failed":
            unfinished.add(group)
    for key, times in state.groups.items():
        if key in finish and key not in unfinished and times.start is not None:
            times.completion = finish[key]
