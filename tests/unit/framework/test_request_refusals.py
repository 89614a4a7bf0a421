"""The first refusals past the static filters kept per request (`no_fit_counts.RequestRefusals`,
`Session._refusals_by_request`): a second shape of a request explained a few changes after the first is
counted from one column over every node, read at its rows; the column is brought up to date at the rows
changed since, and not read when too many changed or a predicate's mask is not read-only. Each count is
the count of every node."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from helpers import open_session, pod
from kai_scheduler.framework import session as session_module
from kai_scheduler.framework.no_fit_counts import NoFitCounts, Refusals, RequestRefusals, StaticRefusals
from kai_scheduler.framework.session import NamedPredicate, Session
from kai_scheduler.model.nodes import ALL_ROWS
from zoned_cluster import ZONED_CLUSTER, pending

# Three shapes of one request (8 GPUs, 8 CPUs): bound to zone a, to zone b, and to no zone.
OBJECTS = [
    *ZONED_CLUSTER,
    pod("in-a", gpus=8, cpu="8", node_selector={"zone": "a"}),
    pod("in-b", gpus=8, cpu="8", node_selector={"zone": "b"}),
    pod("anywhere", gpus=8, cpu="8"),
]


@pytest.fixture(autouse=True)
def rows_counted_apart() -> Iterator[None]:
    """However few nodes a shape's placement lets through, they are counted past its static filters
    (five nodes: a zone's are more than an eighth of them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session_module, "_PAST_STATIC_SHARE", 1)
        yield


def columns_read(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The refusals read from a request's column, per count."""
    read: list[list[int]] = []
    original = NoFitCounts.past_static_read

    def past_static_read(
        names: tuple[str, ...], static: StaticRefusals, refusals: Refusals, position: int
    ) -> NoFitCounts:
        read.append(refusals.tolist())
        return original(names, static, refusals, position)

    monkeypatch.setattr(NoFitCounts, "past_static_read", staticmethod(past_static_read))
    return read


def rows_brought_up_to_date(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    updated: list[list[int]] = []
    original = RequestRefusals.update

    def update(self: RequestRefusals, rows: list[int], refusals: list[int], position: int) -> None:
        updated.append(list(rows))
        original(self, rows, refusals, position)

    monkeypatch.setattr(RequestRefusals, "update", update)
    return updated


def counted_as_every_node(session: Session, name: str) -> NoFitCounts:
    task = pending(session, name)
    counted = session._count_no_fit(task, 0)
    every = NoFitCounts.of(session._no_fit_filters(task, ALL_ROWS), 0)
    assert counted.same_as(every), (counted.detail(), every.detail())
    return counted


def place_filler(session: Session) -> int:
    filler = pending(session, "filler")
    placed = session.choose_node(filler)
    assert placed is not None
    session.statement("allocate").allocate(filler, placed.node, placed.gpu_groups, "placed between")
    return placed.node


def test_a_second_shape_of_a_request_is_read_from_its_column(monkeypatch: pytest.MonkeyPatch) -> None:
    read = columns_read(monkeypatch)
    session = open_session(OBJECTS)
    counted_as_every_node(session, "in-a")
    assert read == []  # the request's first shape: its own rows asked
    in_b = counted_as_every_node(session, "in-b")
    # Zone b's nodes: b0 has too few GPUs, b1's taint is a static refusal (not read from the column).
    past_static = len(session.points.static_predicates) + len(session.points.task_predicates)
    assert read == [[past_static + 3]]
    assert "1 Insufficient GPUs" in in_b.detail()


def test_the_column_is_brought_up_to_date_at_the_rows_changed_since(monkeypatch: pytest.MonkeyPatch) -> None:
    read = columns_read(monkeypatch)
    updated = rows_brought_up_to_date(monkeypatch)
    session = open_session(OBJECTS)
    counted_as_every_node(session, "in-a")
    counted_as_every_node(session, "in-b")
    row = place_filler(session)
    counted_as_every_node(session, "anywhere")
    assert updated == [[row]]
    assert len(read) == 2


def test_no_column_is_read_after_too_many_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_module, "_FEW_CHANGES_CAUGHT_UP", 0)
    read = columns_read(monkeypatch)
    session = open_session(OBJECTS)
    counted_as_every_node(session, "in-a")
    counted_as_every_node(session, "in-b")
    place_filler(session)
    counted_as_every_node(session, "anywhere")
    assert len(read) == 1  # in-b's, nothing changed since in-a


def test_no_column_is_kept_of_a_mask_that_may_change_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    read = columns_read(monkeypatch)
    session = open_session(OBJECTS)
    writeable = np.ones(session.snapshot.nodes.size, dtype=np.bool_)
    session.points.task_predicates.append(NamedPredicate("open", "node(s) closed", lambda task: writeable))
    counted_as_every_node(session, "in-a")
    counted_as_every_node(session, "in-b")
    assert read == []
