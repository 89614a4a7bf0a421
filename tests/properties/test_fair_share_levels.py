"""Fair-share levels carried from one division to the next (`division.divide(carried=...)`): over generated
queue trees and a run of changes to their inputs, the shares given with the levels carried are the bits of
a division in full, levels whose inputs stay are not divided again, and a wrong carried level is caught by
the verify mode of `compute_fair_shares`."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai_scheduler.framework.job_memos import CarriedMismatch
from kai_scheduler.model.fair_share_record import DivisionRecorder
from kai_scheduler.model.queues import QueueInfo, QueueTree
from kai_scheduler.model.resources import Resources
from kai_scheduler.plugins.proportion import division
from kai_scheduler.plugins.proportion.division import LevelShares, QueueShareInput, divide
from kai_scheduler.plugins.proportion.plugin import compute_fair_shares

MAX_QUEUES = 9

# Whole numbers, halves, arbitrary floats and a negative zero (its shares may differ in sign from 0.0's).
amounts = st.one_of(
    st.integers(0, 12).map(float),
    st.integers(0, 24).map(lambda halves: halves / 2),
    st.floats(0, 12, allow_nan=False, allow_infinity=False),
    st.just(-0.0),
)
quotas = st.one_of(st.just(-1.0), amounts)
weights = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 2.0, 3.0]), st.floats(0, 10))
usages = st.one_of(st.just(0.0), st.floats(0, 1))
# What a change moves in one queue, and a strategy for the new value.
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "request": amounts,
    "deserved": quotas,
    "limit": quotas,
    "over_quota_weight": weights,
    "usage": usages,
    "priority": st.integers(1, 3),
    "creation_rank": st.integers(0, 10),
}


@st.composite
def trees(draw: st.DrawFn) -> list[QueueShareInput]:
    queues: list[QueueShareInput] = []
    for index in range(draw(st.integers(1, MAX_QUEUES))):
        parent = draw(st.none() | st.sampled_from(range(index))) if index else None
        name, parent_name = f"q{index}", None if parent is None else f"q{parent}"
        queues.append(QueueShareInput(name, parent_name, **draw(st.fixed_dictionaries(FIELDS))))
    return queues


@st.composite
def changes(draw: st.DrawFn, count: int) -> tuple[float | None, list[tuple[int, str, Any]]]:
    """A new total (None: the same), and what moves in which queues (maybe nothing)."""
    # Mostly one kind of change at a time, as between two cycles: a request, most often.
    total = draw(st.one_of(st.none(), st.none(), st.none(), st.floats(0, 40)))
    moves = draw(
        st.lists(
            st.sampled_from([*sorted(FIELDS), "request", "request", "request"]).flatmap(
                lambda field: st.tuples(st.integers(0, count - 1), st.just(field), FIELDS[field])
            ),
            max_size=3,
        )
    )
    return total, moves


def bits(shares: dict[str, float]) -> dict[str, str]:
    return {name: share.hex() for name, share in shares.items()}


@settings(max_examples=300, deadline=None)
@given(
    st.data(), trees(), st.floats(0, 40), st.sampled_from([1.0, 0.5, 0.0, 2.0]), st.sampled_from([1.0, 0.5])
)
def test_carried_levels_give_the_bits_of_a_full_division(
    data: st.DataObject, queues: list[QueueShareInput], total: float, k_value: float, unit: float
) -> None:
    carried: LevelShares = {}
    for _ in range(data.draw(st.integers(1, 6))):
        new_total, moves = data.draw(changes(len(queues)))
        total = total if new_total is None else new_total
        for index, field, value in moves:
            queues[index] = queues[index]._replace(**{field: value})
        full = divide(total, queues, k_value=k_value, unit=unit)
        assert bits(divide(total, queues, k_value=k_value, unit=unit, carried=carried)) == bits(full)


def test_a_level_whose_inputs_stay_is_not_divided_again(monkeypatch: pytest.MonkeyPatch) -> None:
    def queue(name: str, parent: str | None, request: float) -> QueueShareInput:
        return QueueShareInput(name, parent, 1, 0, deserved=2, limit=-1, over_quota_weight=1, request=request)

    queues = [queue("a", None, 0), queue("a1", "a", 3), queue("a2", "a", 5), queue("b", None, 0)]
    queues += [queue("b1", "b", 4), queue("b2", "b", 1)]
    carried: LevelShares = {}
    first = divide(10, queues, carried=carried)
    divided: list[str | None] = []
    divide_level = division._divide_level

    def counted(total: float, siblings: list[QueueShareInput], *args: Any) -> dict[str, float]:
        divided.append(siblings[0].parent)
        return divide_level(total, siblings, *args)

    monkeypatch.setattr(division, "_divide_level", counted)
    assert divide(10, queues, carried=carried) == first
    assert divided == []
    # b2 asks for more, but b's request stays above what b is given: the top level and a's stay.
    queues[5] = queue("b2", "b", 1.5)
    again = divide(10, queues, carried=carried)
    assert divided == [None, "b"]
    assert again == divide(10, queues)
    # A recorder is told every step: nothing is carried for it.
    divided.clear()
    recorder = DivisionRecorder(1)
    recorder.resource("gpu", 10, 1.0)
    divide(10, queues, carried=carried, recorder=recorder)
    assert sorted(divided, key=str) == [None, "a", "b"]


def test_a_wrong_carried_level_raises_in_verify_mode() -> None:
    def queue(name: str, rank: int) -> QueueInfo:
        quota, unlimited, weight = Resources(2, 2, 2), Resources(-1, -1, -1), Resources(1, 1, 1)
        return QueueInfo(name, None, 1, rank, quota, unlimited, weight, request=Resources(4, 4, 4))

    tree = QueueTree([queue("a", 0), queue("b", 1)])
    carried: dict[str, LevelShares] = {}
    compute_fair_shares(tree, Resources(6, 6, 6), 1.0, carried=carried, verify=True)
    # Every input the same: the whole division is carried; a request moved: its levels are.
    for entry, request in (("cpu tree", 4.0), ("cpu", 5.0)):
        tree["a"].request = Resources(4, request, 4)
        compute_fair_shares(tree, Resources(6, 6, 6), 1.0, carried=carried, verify=True)
        inputs, shares = carried[entry][None]
        carried[entry][None] = (inputs, {**shares, "a": shares["a"] + 1})
        carried.pop("cpu tree" if entry == "cpu" else "cpu", None)
        with pytest.raises(CarriedMismatch, match="queue a: its cpu fair share"):
            compute_fair_shares(tree, Resources(6, 6, 6), 1.0, carried=carried, verify=True)


def as_tree(queues: list[QueueShareInput]) -> QueueTree:
    def same(value: float) -> Resources:
        return Resources(value, value, value)

    return QueueTree(
        [
            QueueInfo(
                q.name,
                q.parent,
                q.priority,
                q.creation_rank,
                same(q.deserved),
                same(q.limit),
                same(q.over_quota_weight),
                request=same(q.request),
                usage=same(q.usage),
            )
            for q in queues
        ]
    )


@settings(max_examples=150, deadline=None)
@given(st.data(), trees(), st.floats(0, 40))
def test_carried_fair_shares_are_the_full_ones(
    data: st.DataObject, queues: list[QueueShareInput], total: float
) -> None:
    carried: dict[str, LevelShares] = {}
    for _ in range(data.draw(st.integers(1, 6))):
        new_total, moves = data.draw(changes(len(queues)))
        total = total if new_total is None else new_total
        for index, field, value in moves:
            queues[index] = queues[index]._replace(**{field: value})
        tree, fresh = as_tree(queues), as_tree(queues)
        compute_fair_shares(tree, Resources(total, total, total), 1.0, carried=carried)
        compute_fair_shares(fresh, Resources(total, total, total), 1.0)
        for queue in tree:
            assert [v.hex() for v in queue.fair_share.values()] == [
                v.hex() for v in fresh[queue.name].fair_share.values()
            ]
