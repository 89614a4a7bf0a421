"""A pod whose node selector passes few nodes finds its candidates among those nodes alone
(`Session._few_candidates`): the same nodes, in the same order, as the whole cluster's masks give
(`Session.candidate_nodes`), as a session fills the nodes, some of them tainted, cordoned or running pods
that are being deleted; a selector passing many nodes takes the masks."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.api.objects import ApiObject

RACKS = 8
MIG_STRATEGY = "nvidia.com/mig.strategy"
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}


def cluster_and_backlog(seed: int) -> list[ApiObject]:
    """24 nodes, three a rack (a few of them mixed MIG nodes), and pods selecting a rack (some tolerating a
    taint), or selecting none."""
    rng = random.Random(seed)
    objects: list[ApiObject] = [queue("q", gpu=-1)]
    for i in range(3 * RACKS):
        objects.append(
            node(
                f"n{i:02d}",
                gpus=rng.choice((4, 8)),
                cpu=rng.choice(("16", "64")),
                # (A mixed MIG node takes no GPU pod but a MIG instance's: a per-pod mask that narrows.)
                labels={"rack": f"r{i % RACKS}", **({MIG_STRATEGY: "mixed"} if i % 7 == 3 else {})},
                taints=[TAINT] if rng.random() < 0.15 else None,
                unschedulable=rng.random() < 0.05,
            )
        )
    for j in range(12):
        where = f"n{rng.randrange(3 * RACKS):02d}"
        objects.append(
            pod(f"run{j}", gpus=rng.choice((1, 2)), cpu="2", node_name=where, terminating=j % 3 == 0)
        )
    for j in range(60):
        ask: dict[str, Any] = {"cpu": rng.choice(("1", "4", "12", "250m"))}
        shape = rng.choice(("gpus", "fraction", "cpu"))
        if shape == "gpus":
            ask["gpus"] = rng.choice((1, 2, 4, 8))
        elif shape == "fraction":
            ask["fraction"] = rng.choice((0.25, 0.5))
        if rng.random() < 0.8:
            ask["node_selector"] = {"rack": f"r{rng.randrange(RACKS)}"}
        if rng.random() < 0.3:
            ask["tolerations"] = [TOLERATION]
        objects.append(pod(f"p{j:02d}", **ask))
    return objects


@pytest.mark.parametrize("seed", range(4))
def test_a_selectors_few_nodes_give_the_candidates_the_cluster_gives(seed: int) -> None:
    session = open_session(cluster_and_backlog(seed))
    checked = 0
    for j in range(60):
        task = session.snapshot.tasks[f"default/p{j:02d}"]
        few = session._few_candidates(task)
        if task.placement.node_selector:
            assert few is not None
            assert few.tolist() == np.flatnonzero(session.candidate_nodes(task)).tolist()
            checked += few.size > 0
        placed = session.choose_node(task)
        if placed is not None:
            statement = session.statement("allocate")
            statement.allocate(task, placed.node, placed.gpu_groups, "test")
            statement.commit()
    assert checked > 10


def test_a_pod_without_a_selector_takes_the_whole_clusters_masks() -> None:
    session = open_session(cluster_and_backlog(0))
    tasks = session.snapshot.tasks.values()
    unselective = next(t for t in tasks if t.name.startswith("p") and not t.placement.node_selector)
    assert session._few_candidates(unselective) is None
