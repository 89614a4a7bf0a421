"""What explains a pod that found no node, asked of a few nodes one at a time (`Session._first_refusals_at`,
which `no_fit_counts` counts again over the nodes that changed), answers as the node filters do over the
same nodes at once (`Session._no_fit_filters`, each node's first refusing filter): the same filter names
in the same order and the same first refusal at every node; and `Session.candidate_tests` asked node by
node answers as `candidate_nodes` (so does `Session.any_candidate`, and a node a node flag refuses, a
cordoned one, is a candidate for none); and a pod's explanation counted past its placement's static filters
(`Session._count_no_fit`, their counts kept for the session) counts as every node does, as pods are placed
between the counts, and so does such a count counted again over some rows later (`NoFitCounts.recount`,
which reads the refusals of those rows without working out every node's).

Generated clusters mix cordoned, tainted and labelled nodes of several sizes (with and without GPUs, GPU
memory known or not), partly used by running pods, and pending pods of every kind of request (CPU only,
whole GPUs, GPU fractions and GPU memory) with and without a node selector and a toleration.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, queue
from kai_scheduler.framework import session as session_module
from kai_scheduler.framework.no_fit_counts import NoFitCounts, first_refusals
from kai_scheduler.model.jobs import TaskStatus
from kai_scheduler.model.nodes import ALL_ROWS

TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    objects: list[Any] = [queue("q", gpu=-1)]
    count = draw(st.integers(2, 8))
    for i in range(count):
        objects.append(
            node(
                f"n{i}",
                gpus=draw(st.sampled_from([0, 2, 8])),
                cpu=draw(st.sampled_from([4, 16, 64])),
                pods=draw(st.sampled_from([2, 3, 110])),
                labels={"zone": draw(st.sampled_from(["z0", "z1"]))},
                taints=[TAINT] if draw(st.booleans()) and draw(st.booleans()) else None,
                unschedulable=draw(st.integers(0, 4)) == 0,
                gpu_memory=draw(st.sampled_from([None, 40_000, 80_000])),
            )
        )
    for i in range(draw(st.integers(0, 2 * count))):
        gpus = draw(st.sampled_from([0, 1, 2]))
        objects.append(
            pod(
                f"run-{i}",
                gpus=gpus,
                fraction=None if gpus else draw(st.sampled_from([None, 0.25, 0.5])),
                cpu=draw(st.sampled_from(["1", "4", "12"])),
                node_name=f"n{draw(st.integers(0, count - 1))}",
            )
        )
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["cpu", "gpus", "fraction", "gpu_memory"]))
        objects.append(
            pod(
                f"wait-{i}",
                gpus=draw(st.sampled_from([1, 2, 8])) if kind == "gpus" else 0,
                fraction=0.5 if kind == "fraction" else None,
                gpu_memory=20_000 if kind == "gpu_memory" else None,
                cpu=draw(st.sampled_from(["1", "8", "40"])),
                node_selector={"zone": "z1"} if draw(st.booleans()) else None,
                tolerations=[TOLERATION] if draw(st.booleans()) else None,
            )
        )
    return objects


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), data=st.data())
def test_refusals_asked_row_by_row_are_those_of_the_filters(objects: list[Any], data: st.DataObject) -> None:
    session = open_session(objects)
    size = session.snapshot.nodes.size
    pending = [task for task in session.snapshot.tasks.values() if task.status is TaskStatus.PENDING]
    for task in pending:
        if session.refused_everywhere(task):
            assert session.candidate_tests(task) is None
            continue
        rows = sorted(data.draw(st.sets(st.integers(0, size - 1), min_size=1)))
        filters = session._no_fit_filters(task, np.asarray(rows, dtype=np.intp))
        names, refusals = session._first_refusals_at(task, rows)
        assert names == tuple(name for name, _ in filters)
        assert refusals == first_refusals(filters).tolist()
        tests = session.candidate_tests(task)
        assert tests is not None
        holds, passes_rest = tests
        candidates = session.candidate_nodes(task)
        assert [holds(row) and passes_rest(row) for row in rows] == candidates[rows].tolist()
        assert session.any_candidate(task, rows) == bool(candidates[rows].any())
        flagged = [row for row in rows if session.refused_by_node_flags(row)]
        assert not candidates[flagged].any()
        assert all(
            refusals[rows.index(row)] == session.static_refusal_at(task.placement, row) for row in flagged
        )
        # Kept by placement and row for the session: asked again, of every row, as the masks answer.
        static = session.static_masks_of(task.placement)[1]
        assert [session.static_refusal_at(task.placement, row) for row in range(size)] == [
            next((index for index, (_, passing) in enumerate(static) if not passing[row]), -1)
            for row in range(size)
        ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), data=st.data())
def test_counts_past_the_static_filters_are_those_of_every_node(
    objects: list[Any], data: st.DataObject
) -> None:
    session = open_session(objects)
    pending = [task for task in session.snapshot.tasks.values() if task.status is TaskStatus.PENDING]
    statement = session.statement("allocate")
    nodes = session.snapshot.nodes
    # Any share of the nodes passing the static filters is counted past them (a few nodes, else).
    with mock.patch.object(session_module, "_PAST_STATIC_SHARE", 1):
        counted = []
        for task in data.draw(st.permutations(pending)):
            if session.refused_everywhere(task):
                continue
            fast = session._count_no_fit(task, 0)
            full = NoFitCounts.of(session._no_fit_filters(task, ALL_ROWS), 0)
            assert fast.same_as(full), (fast.detail(), full.detail())
            counted.append((task, session._count_no_fit(task, 0), nodes.change_position()))
            placed = session.choose_node(task)
            if placed is not None and data.draw(st.booleans()):
                statement.allocate(task, placed.node, placed.gpu_groups, "placed between the counts")
    # Counted again over the rows placed on since, and others, each node's refusal not worked out until
    # asked after.
    for task, counts, position in counted:
        changed = nodes.changed_since(position)
        assert changed is not None
        rows = sorted({*changed, *data.draw(st.sets(st.integers(0, nodes.size - 1)))})
        names, refusals = session._first_refusals_at(task, rows)
        assert names == counts.names
        counts.recount(rows, refusals, 1)
        full = NoFitCounts.of(session._no_fit_filters(task, ALL_ROWS), 1)
        assert counts.counts == full.counts, (counts.detail(), full.detail())
        assert [counts.refusal_at(row) for row in range(nodes.size)] == full.refusals.tolist()
        assert counts.same_as(full)
