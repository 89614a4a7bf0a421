"""Empty nodes alike (`framework.alike_nodes`): of the empty nodes of one capacity only the first is
scored, unless a scorer tells them apart for the pod (preferred node affinity, a PreferNoSchedule taint):
then the node it prefers is still chosen. (A nominated node is never empty: the session reserves it for
the pod nominated there.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers import node, open_session, pod, queue
from kai_scheduler.api.objects import ApiObject
from kai_scheduler.framework import alike_nodes

PREFER_C = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]},
            }
        ]
    }
}


@pytest.fixture(autouse=True)
def any_number_of_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alike_nodes, "FEW_CANDIDATES", 0)  # the shortcut even on these few nodes


def three_alike(**first: Any) -> list[ApiObject]:
    """Nodes a, b, c of one capacity, all empty (`first`: more for a), and node d holding a pod."""
    return [
        node("a", labels={"zone": "a"}, **first),
        node("b", labels={"zone": "b"}),
        node("c", labels={"zone": "c"}),
        node("d", labels={"zone": "d"}),
        queue("q"),
        pod("busy-d", gpus=7, node_name="d"),
    ]


def chosen(objects: list[ApiObject]) -> str:
    """The node the session chooses for pod p."""
    session = open_session(objects)
    placed = session.choose_node(session.snapshot.tasks["default/p"])
    assert placed is not None
    return session.snapshot.nodes.names[placed.node]


def test_binpack_takes_the_fullest_node_then_the_first_empty_one() -> None:
    assert chosen([*three_alike(), pod("p", gpus=1)]) == "d"
    assert chosen([*three_alike(), pod("p", gpus=2)]) == "a"


def test_preferred_node_affinity_tells_empty_nodes_apart() -> None:
    assert chosen([*three_alike(), pod("p", gpus=2, affinity=PREFER_C)]) == "c"


def test_a_prefer_no_schedule_taint_tells_empty_nodes_apart() -> None:
    taint = {"key": "old", "value": "yes", "effect": "PreferNoSchedule"}
    assert chosen([*three_alike(taints=[taint]), pod("p", gpus=2)]) == "b"


def test_only_the_first_empty_node_of_each_capacity_is_scored() -> None:
    objects = [*three_alike(), node("e", gpus=4), node("f", gpus=4), pod("p", gpus=1)]
    session = open_session(objects)
    task = session.snapshot.tasks["default/p"]
    rows = alike_nodes.rows_to_score(session, task, session.candidate_nodes(task))
    assert [session.snapshot.nodes.names[row] for row in rows] == ["a", "d", "e"]


def test_a_cluster_without_nodes_has_no_node_to_choose() -> None:
    session = open_session([queue("q"), pod("p", gpus=1)])
    assert session.choose_node(session.snapshot.tasks["default/p"]) is None


def test_distinct_rows_counts_and_places_rows_as_numpys_unique_along_rows_does() -> None:
    """`distinct_rows` against `np.unique(axis=0)` on random rows of few values (as a table's capacities
    are), negative and zero bits included, one row, several, and no column."""
    rng = np.random.default_rng(17)
    picks = np.array([0.0, -0.0, 1.5, 2.0, -3.0, np.inf, 8.0, 64_000.0]).view(np.int64)
    for _ in range(200):
        rows = rng.choice(picks, size=(int(rng.integers(1, 80)), int(rng.integers(0, 6))))
        count, place = alike_nodes.distinct_rows(rows)
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        assert count == len(distinct)
        assert place.tolist() == inverse.reshape(-1).tolist()
    assert alike_nodes.distinct_rows(np.zeros((0, 3), dtype=np.int64))[0] == 0
