"""`Session.usable_nodes` is kept by the placements asked about: on generated clusters and asks, every
answer (asked again, in another order, with other tasks alike) is the nodes passing the static predicates
of any of the tasks, worked out afresh."""

from __future__ import annotations

import random

import numpy as np
import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.framework.session import Session
from kai_scheduler.model.nodes import BoolArray
from kai_scheduler.model.snapshot import TaskInfo

RACKS = ("r0", "r1", "r2", "r3")


def _session(seed: int) -> Session:
    rng = random.Random(seed)
    nodes = [
        node(
            f"n{i}",
            labels={"rack": rng.choice(RACKS)},
            unschedulable=rng.random() < 0.2,
            taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.2 else None,
        )
        for i in range(rng.randint(3, 30))
    ]
    pods = [
        pod(f"p{i}", gpus=1, node_selector={"rack": rng.choice(RACKS)} if rng.random() < 0.7 else None)
        for i in range(12)
    ]
    return open_session([queue("q"), *nodes, *pods])


def _fresh(session: Session, tasks: list[TaskInfo]) -> BoolArray:
    usable = np.zeros(session.snapshot.nodes.size, dtype=np.bool_)
    for task in tasks:
        usable |= session.static_masks_of(task.placement)[0]
    return usable


@pytest.mark.parametrize("seed", range(25))
def test_kept_answers_match_the_static_masks_worked_out_afresh(seed: int) -> None:
    session = _session(seed)
    rng = random.Random(seed)
    tasks = list(session.snapshot.tasks.values())
    for _ in range(40):
        asked = rng.sample(tasks, rng.randint(1, 4))
        usable = session.usable_nodes(asked)
        assert np.array_equal(usable, _fresh(session, asked))
        assert not usable.flags.writeable  # shared by every asker for the session


def test_verify_mode_raises_when_a_kept_answer_differs() -> None:
    session = _session(0)
    task = next(iter(session.snapshot.tasks.values()))
    kept = session.usable_nodes([task])
    session.verify_carried = True
    assert session.usable_nodes([task]) is kept
    session._usable[(task.placement.key,)] = ~kept
    with pytest.raises(CarriedMismatch):
        session.usable_nodes([task])
