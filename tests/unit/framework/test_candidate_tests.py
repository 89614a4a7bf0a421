"""A pod's candidates asked one node at a time (`Session.candidate_tests`, which the ranked index walks
with) answer as the whole cluster's masks do (`Session.candidate_nodes`), with per-pod predicates whose
masks pass every node and cannot change (left out of the walk), pass every node but may change (a
writeable array, a read-only view of one), or leave some nodes out; every pod asked after each change."""

from __future__ import annotations

import random

import numpy as np
import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import BoolArray

NODES = 12


def cluster(seed: int) -> list[ApiObject]:
    rng = random.Random(seed)
    objects: list[ApiObject] = [queue("q", gpu=-1)]
    objects += [node(f"n{i:02d}", gpus=rng.choice((2, 8)), cpu=rng.choice(("4", "64"))) for i in range(NODES)]
    objects += [pod(f"run{j}", gpus=1, cpu="2", node_name=f"n{rng.randrange(NODES):02d}") for j in range(6)]
    objects += [pod(f"p{j}", gpus=rng.choice((0, 1, 4)), cpu=rng.choice(("1", "8"))) for j in range(8)]
    return objects


def one_by_one(session: Session, task: TaskInfo) -> list[bool]:
    tests = session.candidate_tests(task)
    assert tests is not None
    holds, passes_rest = tests
    return [holds(row) and passes_rest(row) for row in range(session.snapshot.nodes.size)]


def add_predicates(session: Session, rng: random.Random) -> list[BoolArray]:
    """Predicates handing out: a read-only array passing every node, a writeable one and a read-only view
    of a writeable one (both passing every node until the test changes them), and a mask made per pod
    leaving a node out. Returns the two that may change."""
    size = session.snapshot.nodes.size
    everywhere = np.ones(size, dtype=np.bool_)
    everywhere.flags.writeable = False
    changing = np.ones(size, dtype=np.bool_)
    under_view = np.ones(size, dtype=np.bool_)
    view = under_view.view()
    view.flags.writeable = False

    def per_pod(task: TaskInfo) -> BoolArray:
        mask = np.ones(size, dtype=np.bool_)
        mask[rng.randrange(size)] = False
        return mask

    for name, passing in (
        ("everywhere", lambda task: everywhere),
        ("changing", lambda task: changing),
        ("view", lambda task: view),
        ("per-pod", per_pod),
    ):
        session.points.task_predicates.append(NamedPredicate(name, "refused", passing))
    return [changing, under_view]


@pytest.mark.parametrize("seed", range(8))
def test_node_by_node_answers_as_the_masks_do(seed: int) -> None:
    rng = random.Random(seed)
    session = open_session(cluster(seed))
    changing = add_predicates(session, rng)
    pods = [t for t in session.snapshot.tasks.values() if t.node < 0]
    for step in range(4):
        for task in pods:
            # The per-pod mask is drawn again by each ask: the same draw for both.
            state = rng.getstate()
            expected = session.candidate_nodes(task).tolist()
            rng.setstate(state)
            assert one_by_one(session, task) == expected, (step, task.key)
        changing[step % 2][rng.randrange(NODES)] = False
