"""An explanation's resource filters asked at some rows (`session.resource_shortfalls`, read from the
columns and fit masks kept for every node) answer as asked of every node, also after pods placed since
changed those columns; and a pod's count past its placement's static filters (`Session._count_no_fit`,
each row's first refusal looked for among the filters after the static ones) is that of every node."""

from __future__ import annotations

from unittest import mock

import numpy as np

from helpers import open_session, pod
from kai_scheduler.framework import session as session_module
from kai_scheduler.framework.no_fit_counts import NoFitCounts
from kai_scheduler.framework.session import Session, resource_shortfalls
from kai_scheduler.model.jobs import TaskInfo
from kai_scheduler.model.nodes import ALL_ROWS
from zoned_cluster import ZONED_CLUSTER, pending

OBJECTS = [
    *ZONED_CLUSTER,
    pod("whole", gpus=8, cpu="8", node_selector={"zone": "a"}),
    pod("cpu-heavy", gpus=1, cpu="40", node_selector={"zone": "b"}),
    pod("anywhere", gpus=2, cpu="1"),
]


def shortfalls_alike(session: Session, task: TaskInfo, rows: list[int]) -> None:
    nodes = session.snapshot.nodes
    at_rows = resource_shortfalls(nodes, task, np.asarray(rows, dtype=np.intp))
    everywhere = resource_shortfalls(nodes, task, ALL_ROWS)
    assert [name for name, _ in at_rows] == [name for name, _ in everywhere]
    for (_, asked), (_, every) in zip(at_rows, everywhere, strict=True):
        assert asked.tolist() == every[rows].tolist()


def test_shortfalls_at_rows_are_those_of_every_node_as_pods_are_placed() -> None:
    session = open_session(OBJECTS)
    rows = [1, 3, 4]
    statement = session.statement("allocate")
    for name in ("whole", "cpu-heavy", "anywhere"):
        shortfalls_alike(session, pending(session, name), rows)
    # A pod placed changes a row's usage: the columns and masks kept for every node follow it.
    filler = pending(session, "filler")
    placed = session.choose_node(filler)
    assert placed is not None
    statement.allocate(filler, placed.node, placed.gpu_groups, "placed between the asks")
    for name in ("whole", "cpu-heavy", "anywhere"):
        shortfalls_alike(session, pending(session, name), [placed.node, *rows])


def test_counts_past_the_static_filters_are_those_of_every_node() -> None:
    session = open_session(OBJECTS)
    # Any share of the nodes passing the static filters is counted past them, filter by filter.
    with (
        mock.patch.object(session_module, "_PAST_STATIC_SHARE", 1),
        mock.patch.object(session_module, "_ONE_BY_ONE", 0),
    ):
        for name in ("whole", "cpu-heavy", "anywhere"):
            task = pending(session, name)
            counted = session._count_no_fit(task, 0)
            every = NoFitCounts.of(session._no_fit_filters(task, ALL_ROWS), 0)
            assert counted.same_as(every), (counted.detail(), every.detail())
