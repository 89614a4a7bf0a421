"""Fairness convergence: a queue that took the whole cluster gives it back, and every queue reaches its
fair share within a few cycles.

Issue #3 acceptance: "in a simulated two-department, six-queue cluster where one queue has taken
everything and the others then submit, every queue reaches its fair share within a few cycles; the test
asserts the largest gap between allocation and fair share afterwards." Reference: kai-reference §5.2
(fair share divided top-down: departments, then their teams), §4.3 reclaim and §5.4 (queues below their
fair share take back from queues above theirs, compared where their branches split), simulate contract
(evicted pods are recreated pending; pipelined pods bind in a later cycle).

8 nodes x 8 GPUs. dept-a and dept-b are owed 24 GPUs each (the 16 left are shared by weight); their
teams a1, a2, a3 and b1, b2, b3 are owed 6, 8, 10 and 4, 8, 12, with over-quota weights 1, 1, 2 and
1, 2, 1. The hog queue (b3 or a1) runs 64 preemptible single-GPU pods; at 5s every other queue submits
40 single-GPU pods. A second variant mixes shapes (gangs, 2-GPU pods) and staggers the submissions over
5 seconds. Convergence is counted in cycles from the last submission (inclusive) to the first cycle after
which every queue holds exactly its fair share. Run with `-s` to see the figures (also recorded as junit
properties).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from helpers import gang, node, pod, queue, queues_by_name, run
from kai_scheduler.api.objects import Pod
from kai_scheduler.sim.results import result_document

NODES, GPUS_PER_NODE = 8, 8
ARRIVAL = 5
SUBMITTED = 40
DEPARTMENTS = {"dept-a": 24, "dept-b": 24}
TEAMS = {  # name: (department, quota, over-quota weight)
    "a1": ("dept-a", 6, 1),
    "a2": ("dept-a", 8, 1),
    "a3": ("dept-a", 10, 2),
    "b1": ("dept-b", 4, 1),
    "b2": ("dept-b", 8, 2),
    "b3": ("dept-b", 12, 1),
}
MAX_GAP = 0.0  # GPUs, at the end


def cluster(hog: str, *, mixed: bool = False) -> list[Any]:
    """The hog runs 64 single-GPU pods. The others submit at 5s 40 single-GPU pods each, or (mixed)
    each a gang of 4 single-GPU pods (minMember 2), six 2-GPU pods and ten single-GPU pods, the k-th
    of them at 5 + k seconds (the last at 9s)."""
    objects: list[Any] = [node(f"n{i}", gpus=GPUS_PER_NODE) for i in range(NODES)]
    objects += [queue(name, gpu=quota) for name, quota in DEPARTMENTS.items()]
    objects += [
        queue(name, parent=dept, gpu=quota, gpu_weight=weight)
        for name, (dept, quota, weight) in TEAMS.items()
    ]
    total = NODES * GPUS_PER_NODE
    objects += [
        pod(f"{hog}-run-{i}", hog, gpus=1, node_name=f"n{i // GPUS_PER_NODE}", priority_class="train")
        for i in range(total)
    ]
    for k, team in enumerate(t for t in TEAMS if t != hog):
        if not mixed:
            objects += [pod(f"{team}-new-{i}", team, gpus=1, arrival=ARRIVAL) for i in range(SUBMITTED)]
            continue
        arrival = ARRIVAL + k
        objects += gang(f"{team}-gang", team, size=4, min_member=2, gpus=1, arrival=arrival)
        objects += [pod(f"{team}-big-{i}", team, gpus=2, arrival=arrival) for i in range(6)]
        objects += [pod(f"{team}-new-{i}", team, gpus=1, arrival=arrival) for i in range(10)]
    return objects


def allocation_after_each_cycle(objects: list[Any], result: Any) -> list[tuple[int, float, dict[str, int]]]:
    """GPUs per team after each cycle's decisions are applied, replayed from the decisions."""
    pods = {f"default/{o.metadata.name}": o for o in objects if isinstance(o, Pod)}
    team_of = {key: o.metadata.labels["kai.scheduler/queue"] for key, o in pods.items()}
    gpus_of = {
        key: int(o.spec.containers[0].resources.requests.get("nvidia.com/gpu", "0"))
        for key, o in pods.items()
    }
    held = dict.fromkeys(TEAMS, 0)
    running = {key for key, o in pods.items() if o.spec.node_name is not None}
    for key in running:
        held[team_of[key]] += gpus_of[key]
    timeline = []
    for record in result.cycles:
        for d in record.decisions:
            if d.type == "bind":
                held[team_of[d.pod]] += gpus_of[d.pod]
                running.add(d.pod)
            elif d.type == "evict" and d.pod in running:
                # (A pod moved, then taken again in the same cycle, is evicted twice but held once.)
                held[team_of[d.pod]] -= gpus_of[d.pod]
                running.discard(d.pod)
        timeline.append((record.cycle, record.time, dict(held)))
    return timeline


def stops(result: Any) -> dict[str, int]:
    """How often each pod was evicted and not moved (pipelined again in the same cycle)."""
    counted: dict[str, int] = {}
    for record in result.cycles:
        moved = {d.pod for d in record.decisions if d.type == "pipeline"}
        for d in record.decisions:
            if d.type == "evict" and d.pod not in moved:
                counted[d.pod] = counted.get(d.pod, 0) + 1
    return counted


@pytest.mark.parametrize(
    ("hog", "mixed", "within"),
    [("b3", False, 3), ("a1", False, 3), ("b3", True, 4), ("a1", True, 4)],
    ids=["b3-single-gpu", "a1-single-gpu", "b3-mixed-staggered", "a1-mixed-staggered"],
)
def test_every_queue_reaches_its_fair_share_within_a_few_cycles(
    hog: str, mixed: bool, within: int, record_property: Callable[[str, object], None]
) -> None:
    objects = cluster(hog, mixed=mixed)
    result = run(objects, max_cycles=40)
    document = result_document(result)
    queues = queues_by_name(document)
    fair = {team: queues[team]["fairShare"]["gpu"] for team in TEAMS}

    # The fair shares divide the whole cluster: the departments 32 / 32 (24 each plus 8 of the 16 left,
    # equal weights), and each department's share among its teams.
    assert sum(fair.values()) == NODES * GPUS_PER_NODE
    assert queues["dept-a"]["fairShare"]["gpu"] == queues["dept-b"]["fairShare"]["gpu"] == 32.0
    for team, (_, quota, _) in TEAMS.items():
        assert fair[team] >= quota, team

    timeline = allocation_after_each_cycle(objects, result)
    gaps = [(cycle, time, max(abs(held[t] - fair[t]) for t in TEAMS)) for cycle, time, held in timeline]
    last_arrival = ARRIVAL + (len(TEAMS) - 2 if mixed else 0)
    first_after_arrival = next(cycle for cycle, time, _ in gaps if time >= last_arrival)
    converged_at = next(cycle for cycle, time, gap in gaps if time >= last_arrival and gap <= MAX_GAP)
    cycles_to_converge = converged_at - first_after_arrival + 1
    final_gap = gaps[-1][2]
    evictions = max(stops(result).values(), default=0)

    print(f"\nhog {hog}{' (mixed shapes, staggered arrivals)' if mixed else ''}: fair shares {fair}")
    for cycle, time, held in timeline:
        gap = max(abs(held[t] - fair[t]) for t in TEAMS)
        print(f"  cycle {cycle} at {time:g}s: {held}  largest gap {gap:g} GPU")
    print(
        f"  converged in {cycles_to_converge} cycles after the last submission (cycle {converged_at}); "
        f"largest gap at the end {final_gap:g} GPU; steady {result.steady} after {len(result.cycles)} "
        f"cycles; most times one pod was stopped {evictions}"
    )
    record_property("fair_shares", fair)
    record_property("cycles_to_converge", cycles_to_converge)
    record_property("final_largest_gap_gpu", final_gap)

    assert result.steady
    assert final_gap <= MAX_GAP
    assert cycles_to_converge <= within
    # It stays converged, and no pod was stopped twice on the way (no ping-pong); a victim that its
    # scenario moves (evicted and pipelined elsewhere in the same cycle) is not stopped.
    assert all(gap <= MAX_GAP for cycle, _, gap in gaps if cycle >= converged_at)
    assert evictions <= 1
    if not mixed:
        # Only the hog gave anything back, exactly what it held above its share. (With staggered
        # arrivals, teams that came early may hold more than their final share for a while, and give it
        # back when the later ones arrive.)
        evicted = [d for r in result.cycles for d in r.decisions if d.type == "evict"]
        assert {d.pod.split("/", 1)[1].split("-", 1)[0] for d in evicted} == {hog}
        assert len(evicted) == NODES * GPUS_PER_NODE - fair[hog]
