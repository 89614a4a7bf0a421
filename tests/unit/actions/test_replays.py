"""The victim solver's replays (actions/solvers/replays.py) save work and never change a decision.

Reclaim tries the same victim sets for one pending job after another; what re-placing a set did before
the preemptor's turn is kept, and a preemptor known to fit nowhere at its turn (every victim went back
home, or it fits none of the nodes the victims left) is not simulated again. The workloads here are shaped
like the openb trace, where that is most of reclaim's work: four queues sharing the cluster evenly, whole-
and shared-GPU pods of one priority, more asked for than there is. Since KAI v0.17's reclaim victim filter
only queues above their deserved quota give victims, and those rank after the reclaimer unless their
queue priority is higher: here q0 and q1 (priority 200) fill the cluster first, q2 and q3 (100) arrive
a second later and reclaim from them.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from helpers import node, pod, queue, run
from kai_scheduler.actions.solvers import replays as replays_module
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.model.nodes import SoonRoom

QUEUES = ("q0", "q1", "q2", "q3")
FIRST = ("q0", "q1")  # the queues whose pods run first, and that rank first


def openb_like(seed: int) -> list[ApiObject]:
    rng = random.Random(seed)
    sizes = [rng.choice((2, 4, 8)) for _ in range(10)]
    nodes = [node(f"n{i:02d}", gpus=size, cpu="64", memory="256Gi") for i, size in enumerate(sizes)]
    gpus = sum(sizes)
    queues = [queue(name, gpu=gpus / len(QUEUES), priority=200 if name in FIRST else 100) for name in QUEUES]
    pods = []
    for i in range(int(gpus * 1.6)):
        shape: dict[str, Any] = {"cpu": f"{rng.randint(1, 16)}", "memory": f"{rng.randint(2, 64)}Gi"}
        if rng.random() < 0.45:
            shape["fraction"] = rng.choice((0.25, 0.3, 0.5, 0.6, 0.75))
        else:
            shape["gpus"] = rng.choice((1, 1, 1, 2))
        name = QUEUES[i % len(QUEUES)]
        if name not in FIRST:
            shape["arrival"] = "1s"
        pods.append(pod(f"p{i:03d}", name, priority_class="train", **shape))
    return [*nodes, *queues, *pods]


def decisions(objects: list[ApiObject]) -> list[tuple[Any, ...]]:
    result = run(objects, cycles=2)
    return [
        (r.cycle, d.action, d.type, d.pod, d.node, tuple(d.gpu_groups))
        for r in result.cycles
        for d in r.decisions
    ]


# Seed 151 has a preemptor that fits on a node its victims left, after victims that moved: ruling that
# node out would change its decisions (see the last test).
SEEDS = (55, 101, 151)


def test_the_replays_change_no_decision_and_rule_out_scenarios(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decisions with the replays equal those without (every scenario simulated in full), and the room
    kept for the nodes the victims left did rule scenarios out (so this test can tell)."""
    ruled_out: Counter[bool] = Counter()
    rules_out = replays_module.Prefix.rules_out

    def counting(self: replays_module.Prefix, request: Any) -> bool:
        answer = rules_out(self, request)
        ruled_out[answer] += 1
        return answer

    monkeypatch.setattr(replays_module.Prefix, "rules_out", counting)
    with_replays = {seed: decisions(openb_like(seed)) for seed in SEEDS}
    assert ruled_out[True] > 0, "no scenario was ruled out by the nodes the victims left"
    assert any(any(d[2] == "evict" for d in found) for found in with_replays.values())

    monkeypatch.setattr(replays_module.Replays, "get", lambda self, victims: None)
    for seed in SEEDS:
        assert decisions(openb_like(seed)) == with_replays[seed], f"seed {seed}"


def test_a_preemptor_that_fits_a_node_the_victims_left_is_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The room kept for a node the victims left is looked at: a solver that took every such node to be
    full would decide otherwise (seed 151)."""
    expected = decisions(openb_like(151))
    monkeypatch.setattr(SoonRoom, "may_hold", lambda self, request: False)
    assert decisions(openb_like(151)) != expected
