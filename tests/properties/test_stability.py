"""Stability: from any state, repeated cycles reach a steady state and stay there (no reclaim ping-pong).

Issue #3 acceptance: "from any state your tests build, repeated cycles reach a steady state and stay there
(no reclaim ping-pong); a property test drives random clusters and workloads to show it." Reference:
kai-reference §4.3 (allocate, consolidation, reclaim, preempt, stalegangeviction, in that order), §5.4
(reclaim rules: a queue only takes back up to its fair share, and only from queues above theirs), and the
simulate contract ("Neither: run until the steady state: nothing is left to arrive or complete, and the
last cycle bound and evicted nothing"; evicted pods are recreated pending with the same name).

Random small clusters (1-4 nodes of 2-8 GPUs) and workloads (2-5 leaf queues, flat or under two
departments, random quotas / limits / weights / queue priorities; running and pending pods, gangs and
elastic jobs of every priority class) run to the steady state with the default configuration:

- the run reaches it within MAX_CYCLES (`summary.steady`);
- running the same input for 5 more cycles than that decides exactly the same, and nothing after;
- no pod is evicted more than MAX_EVICTIONS times (a pod that keeps being taken and given back is the
  signature of reclaim ping-pong).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import gang, node, pod, pod_group, queue, run
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.config import SchedulerConfig, parse_config
from kai_scheduler.sim.loader import load_manifests

MAX_CYCLES = 60
MAX_EVICTIONS = 2
# More examples for a deeper search: KAI_STABILITY_EXAMPLES=3000 pytest tests/properties/test_stability.py
EXAMPLES = int(os.environ.get("KAI_STABILITY_EXAMPLES", "40"))
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
PRIORITY_CLASSES = ("train", "build-preemptible", "build", "inference")


@dataclass(frozen=True)
class QueueSpec:
    name: str
    parent: str | None
    quota: int  # -1: unlimited
    limit: int  # -1: unlimited
    weight: int
    priority: int | None


@dataclass(frozen=True)
class JobSpec:
    name: str
    queue: str
    priority_class: str
    gpus: int  # per pod
    size: int  # pods
    min_member: int
    running: tuple[int, ...]  # node index of each running pod (the first pods); the rest are pending
    arrival: int  # seconds; only for jobs with nothing running


@dataclass(frozen=True)
class Workload:
    nodes: tuple[int, ...]  # GPUs per node
    queues: tuple[QueueSpec, ...]
    jobs: tuple[JobSpec, ...] = field(default_factory=tuple)

    def objects(self) -> list[ApiObject]:
        objects: list[ApiObject] = [node(f"n{i}", gpus=g) for i, g in enumerate(self.nodes)]
        for q in self.queues:
            objects.append(
                queue(
                    q.name,
                    parent=q.parent,
                    gpu=q.quota,
                    gpu_limit=q.limit,
                    gpu_weight=q.weight,
                    priority=q.priority,
                )
            )
        for job in self.jobs:
            objects.append(
                pod_group(
                    job.name,
                    job.queue,
                    min_member=job.min_member,
                    priority_class=job.priority_class,
                    arrival=job.arrival or None,
                )
            )
            for i in range(job.size):
                on = job.running[i] if i < len(job.running) else None
                objects.append(
                    pod(
                        f"{job.name}-{i}",
                        job.queue,
                        group=job.name,
                        gpus=job.gpus,
                        node_name=None if on is None else f"n{on}",
                    )
                )
        return objects


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    nodes = tuple(draw(st.lists(st.integers(2, 8), min_size=1, max_size=4)))
    leaves = draw(st.integers(2, 5))
    hierarchical = draw(st.booleans())
    queues: list[QueueSpec] = []
    parents: list[str | None] = [None]
    if hierarchical:
        parents = ["dept-0", "dept-1"]
        for name in parents:
            queues.append(_queue(draw, name, None))
    for i in range(leaves):
        parent = parents[i % len(parents)]
        queues.append(_queue(draw, f"q{i}", parent))
    leaf_names = [q.name for q in queues if q.name.startswith("q")]

    free = list(nodes)
    jobs: list[JobSpec] = []
    for j in range(draw(st.integers(1, 8))):
        gpus = draw(st.integers(1, 2))
        size = draw(st.integers(1, 3))
        min_member = draw(st.integers(1, size))
        wanted = draw(st.integers(0, size))
        # Running pods go where they fit (first fit from a drawn node); a gang may run partly.
        running: list[int] = []
        start = draw(st.integers(0, len(nodes) - 1))
        for _ in range(wanted):
            for k in range(len(nodes)):
                n = (start + k) % len(nodes)
                if free[n] >= gpus:
                    free[n] -= gpus
                    running.append(n)
                    break
        arrival = 0 if running else draw(st.sampled_from([0, 0, 3, 10]))
        jobs.append(
            JobSpec(
                name=f"j{j}",
                queue=draw(st.sampled_from(leaf_names)),
                priority_class=draw(st.sampled_from(PRIORITY_CLASSES)),
                gpus=gpus,
                size=size,
                min_member=min_member,
                running=tuple(running),
                arrival=arrival,
            )
        )
    return Workload(nodes, tuple(queues), tuple(jobs))


def _queue(draw: st.DrawFn, name: str, parent: str | None) -> QueueSpec:
    quota = draw(st.sampled_from([-1, 0, 1, 2, 4, 8]))
    limit = draw(st.sampled_from([-1, -1, -1, 4, 8, 16]))
    if limit >= 0 and quota > limit:
        limit = -1
    return QueueSpec(
        name=name,
        parent=parent,
        quota=quota,
        limit=limit,
        weight=draw(st.sampled_from([0, 1, 1, 2, 3])),
        priority=draw(st.sampled_from([None, None, None, 50, 200])),
    )


def _decisions(result: Any) -> list[tuple[int, str, str, str, str]]:
    return [(r.cycle, d.action, d.type, d.pod, d.node) for r in result.cycles for d in r.decisions]


def assert_stable(objects: list[ApiObject], scheduler_config: SchedulerConfig | None = None) -> None:
    """Reaches the steady state, stays there for 5 more cycles, and evicts no pod more than twice."""
    first = run(objects, scheduler_config, max_cycles=MAX_CYCLES)
    assert first.steady, (
        f"no steady state within {MAX_CYCLES} cycles; last decisions: {_decisions(first)[-12:]}"
    )
    reached = len(first.cycles)

    again = run(objects, scheduler_config, cycles=reached + 5)
    extra = [d for d in _decisions(again) if d[0] > reached]
    assert not extra, f"cycles after the steady state decided: {extra}"
    assert _decisions(again) == _decisions(first), "the same input decided differently"

    evictions = {p.key: p.evictions for p in again.cluster.pods if p.evictions > MAX_EVICTIONS}
    assert not evictions, f"pods evicted more than {MAX_EVICTIONS} times (ping-pong): {evictions}"


# derandomize: the same examples every run (they depend on this file only, not on the code under test).
@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(workloads())
def test_random_workloads_reach_a_steady_state_and_stay_there(workload: Workload) -> None:
    assert_stable(workload.objects())


def _scenario_params() -> list[Any]:
    # min-runtime-resolve-queue failed here on HEAD 9fc9999: a min-runtime expiry was no simulation event,
    # so the run was declared steady at 5s and the reclaim due at 10s came in the extra cycles.
    return [pytest.param(p.parent.name, id=p.parent.name) for p in sorted(SCENARIOS.glob("*/expected.yaml"))]


@pytest.mark.parametrize("name", _scenario_params())
def test_every_scenario_reaches_a_steady_state_and_stays_there(name: str) -> None:
    """The states the scenario tests build (tests/scenarios/*/input.yaml, with their configuration)."""
    expected = yaml.safe_load((SCENARIOS / name / "expected.yaml").read_text()) or {}
    objects = [loaded.obj for loaded in load_manifests([str(SCENARIOS / name / "input.yaml")])]
    assert_stable(objects, parse_config(expected["config"]) if "config" in expected else None)


# --- counterexamples found by the property test (shrunk by hand) ------------------------------------


def test_a_pipelined_reclaimer_keeps_the_capacity_it_was_promised() -> None:
    # Found by the property test. Ping-pong on HEAD 0362bdb: allocate handed the GPU released for b-1
    # back to q0's recreated victim (q1 ranked behind q0 by its head job, the 3-GPU gang `big`: (1+3)/2
    # = 2 > q0's (2+1)/2 = 1.5), and reclaim evicted q0's newest pod for b-1 again, every cycle. Passes
    # once pods pipelined in a cycle keep the capacity they were promised in the next.
    # 4 GPUs; q0 and q1 (quota 0, weight 1) have fair shares 2 / 2. q0 runs a-0 and asks for a-1, a-2;
    # q1 runs b-0 and asks for b-1 and for a gang of 3 that cannot fit.
    objects = [
        node("n0", gpus=4),
        queue("q0", gpu=0, gpu_weight=1),
        queue("q1", gpu=0, gpu_weight=1),
        pod("a-0", "q0", gpus=1, node_name="n0"),
        pod("a-1", "q0", gpus=1),
        pod("a-2", "q0", gpus=1),
        *gang("big", "q1", size=3, gpus=1),
        pod("b-0", "q1", gpus=1, node_name="n0"),
        pod("b-1", "q1", gpus=1),
    ]
    assert_stable(objects)


def test_a_queue_without_a_departmental_share_does_not_ping_pong() -> None:
    objects = [
        node("n0", gpus=4),
        queue("dept-0", gpu=0, gpu_weight=0),
        queue("q0", parent="dept-0", gpu=1, gpu_weight=0),
        queue("dept-1", gpu=2, gpu_weight=0),
        queue("q1", parent="dept-1", gpu=4, gpu_weight=0),
        *[pod(f"b-{i}", "q1", gpus=1, node_name="n0") for i in range(4)],
        pod("a-0", "q0", gpus=1),
    ]
    assert_stable(objects)
