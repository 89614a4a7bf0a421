"""The nodes passing a placement's static predicates found from the few rows its node selector names
(`static_masks.passing_rows`: the label index's rows of a value, every other predicate asked at those rows
alone) are those its masks over every node give (`Session.static_masks_of`), in the same order; each
predicate asked at some rows (`RowPredicate.at_rows`) answers as its mask there, and so do the nodes usable
by some pods (`Session.usable_nodes`, made from those rows); the first refusals among a placement's static
predicates counted from those rows (`StaticRefusals.of_selected_rows`: the node flags before the selector
counted once, `LeadingFlags`) are those counted from its masks, every node's and each refused row's; and a
label index carried through a respecify (`_LabelIndex.respecified`) gives a value's rows as one made afresh.

Generated clusters mix cordoned, tainted and labelled nodes (a rack and a zone label, not every node with
both; a value no node has), and pods with selectors of no, one or two labels, some with a required node
affinity, some tolerating the taint.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import node, open_session, pod, queue
from kai_scheduler.framework.no_fit_counts import LeadingFlags, StaticRefusals
from kai_scheduler.framework.static_masks import RowPredicate, passing_rows
from kai_scheduler.plugins.predicates import _LabelIndex

TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}
RACKS = ["r0", "r1", "r2", "r3"]
ZONES = ["z0", "z1"]


@st.composite
def node_labels(draw: st.DrawFn) -> dict[str, str]:
    labels = {}
    if draw(st.integers(0, 5)):
        labels["rack"] = draw(st.sampled_from(RACKS))
    if draw(st.booleans()):
        labels["zone"] = draw(st.sampled_from(ZONES))
    return labels


@st.composite
def selectors(draw: st.DrawFn) -> dict[str, str] | None:
    pairs = {}
    if draw(st.booleans()):
        pairs["rack"] = draw(st.sampled_from([*RACKS, "r9"]))  # r9: no node's
    if draw(st.booleans()):
        pairs["zone"] = draw(st.sampled_from(ZONES))
    return pairs or None


def required_zone(zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


@st.composite
def waiting_pod(draw: st.DrawFn, number: int) -> Any:
    affinity = required_zone(draw(st.sampled_from(ZONES))) if draw(st.integers(0, 4)) == 0 else None
    tolerations = [TOLERATION] if draw(st.booleans()) else None
    return pod(
        f"wait-{number}", gpus=1, node_selector=draw(selectors()), affinity=affinity, tolerations=tolerations
    )


@st.composite
def labelled_node(draw: st.DrawFn, number: int) -> Any:
    taints = [TAINT] if draw(st.integers(0, 3)) == 0 else None
    cordoned = draw(st.integers(0, 4)) == 0
    return node(f"n{number:02d}", labels=draw(node_labels()), taints=taints, unschedulable=cordoned)


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    objects: list[Any] = [queue("q", gpu=-1)]
    objects += [draw(labelled_node(i)) for i in range(draw(st.integers(1, 24)))]
    objects += [draw(waiting_pod(i)) for i in range(draw(st.integers(1, 8)))]
    return objects


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), data=st.data())
def test_a_selectors_rows_are_those_the_masks_pass(objects: list[Any], data: st.DataObject) -> None:
    session = open_session(objects)
    nodes, predicates = session.snapshot.nodes, session.points.static_predicates
    tasks = list(session.snapshot.tasks.values())
    for task in tasks:
        placement = task.placement
        passing, parts = session.static_masks_of(placement)
        rows = passing_rows(predicates, placement, nodes)
        plain_selector = bool(placement.node_selector) and placement.affinity is None
        assert (rows is not None) == plain_selector
        if rows is not None:
            assert rows.tolist() == np.flatnonzero(passing).tolist()
        assert session.static_passing_count(placement) == int(np.count_nonzero(passing))
        assert session.usable_nodes([task]).tolist() == passing.tolist()
        assert (
            session.usable_nodes(tasks).tolist()
            == np.logical_or.reduce([session.static_masks_of(other.placement)[0] for other in tasks]).tolist()
        )
        asked = np.array(
            sorted(data.draw(st.sets(st.integers(0, nodes.size - 1), max_size=nodes.size))), dtype=np.int64
        )
        for (_, _, predicate), (_, mask) in zip(predicates, parts, strict=True):
            assert isinstance(predicate, RowPredicate)
            assert predicate.at_rows(placement, nodes, asked).tolist() == mask[asked].tolist()
            selected = predicate.selected_rows(placement, nodes)
            if selected is not None:
                assert selected.tolist() == np.flatnonzero(mask).tolist()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters())
def test_first_refusals_counted_from_a_selectors_rows_are_those_the_masks_give(objects: list[Any]) -> None:
    session = open_session(objects)
    nodes, predicates = session.snapshot.nodes, session.points.static_predicates
    flags = LeadingFlags(predicates)
    for task in session.snapshot.tasks.values():
        placement = task.placement
        from_rows = StaticRefusals.of_selected_rows(predicates, placement, nodes, flags)
        assert (from_rows is not None) == (passing_rows(predicates, placement, nodes) is not None)
        if from_rows is None:
            continue
        from_masks = StaticRefusals.of_masks(session.static_masks_of(placement))
        assert from_rows.counts == from_masks.counts
        assert from_rows.passing.tolist() == from_masks.passing.tolist()
        every = from_masks.refusals()
        assert from_rows.refusals().tolist() == every.tolist()
        refused = set(range(nodes.size)) - set(from_masks.passing.tolist())
        for row in sorted(refused):
            assert from_rows.refusal_at(row) == from_masks.refusal_at(row) == every[row]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(objects=clusters(), data=st.data())
def test_a_carried_label_index_gives_a_values_rows_as_a_fresh_one(
    objects: list[Any], data: st.DataObject
) -> None:
    specs = open_session(objects).snapshot.nodes.specs
    # Some nodes relabelled (a new list of the nodes' facts, as a node table respecified makes).
    moved = data.draw(st.sets(st.integers(0, len(specs) - 1)))
    relabelled = [
        node(spec.name, labels=data.draw(node_labels())) if row in moved else None
        for row, spec in enumerate(specs)
    ]
    new_specs = open_session(
        [queue("q", gpu=-1), *(n for n in relabelled if n is not None)]
    ).snapshot.nodes.specs
    by_name = {spec.name: spec for spec in new_specs}
    respecified = [by_name[spec.name] if row in moved else spec for row, spec in enumerate(specs)]
    old = _LabelIndex(specs)
    for key, values in (("rack", RACKS), ("zone", ZONES)):
        old.rows_having(key, values[0])  # the key asked (and its rows sorted) before the respecify
    carried, fresh = old.respecified(respecified, sorted(moved)), _LabelIndex(respecified)
    for key, values in (("rack", [*RACKS, "r9"]), ("zone", ZONES)):
        for value in values:
            expected = np.flatnonzero(fresh.having(key, value)).tolist()
            assert carried.rows_having(key, value).tolist() == expected
            assert fresh.rows_having(key, value).tolist() == expected
            assert carried.having(key, value).tolist() == fresh.having(key, value).tolist()
