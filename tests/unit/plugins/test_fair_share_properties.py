"""Property tests of the fair-share division (kai-reference §5.2) over random queue trees of depth <= 3."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai_scheduler.plugins.proportion.division import QueueShareInput, divide

TOLERANCE = 1e-9
MAX_DEPTH = 3
MAX_QUEUES = 8

fair_share_settings = settings(max_examples=200, deadline=None)


@dataclass(frozen=True)
class Scenario:
    total: float
    queues: list[QueueShareInput]
    k_value: float
    unit: float

    def shares(self) -> dict[str, float]:
        return divide(self.total, self.queues, k_value=self.k_value, unit=self.unit)


# Mix whole numbers, halves (fractional GPUs) and arbitrary floats so that both the whole-unit rounding and
# the fractional-rest hand-out are exercised.
amounts = st.one_of(
    st.integers(0, 12).map(float),
    st.integers(0, 24).map(lambda halves: halves / 2),
    st.floats(0, 12, allow_nan=False, allow_infinity=False),
)
quotas = st.one_of(st.just(-1.0), amounts)
weights = st.one_of(st.just(0.0), st.sampled_from([0.5, 1.0, 2.0, 3.0, 5.0]), st.floats(0, 10))
positive_weights = st.one_of(st.sampled_from([0.5, 1.0, 2.0, 3.0, 5.0]), st.floats(0.01, 10))
usages = st.one_of(st.just(0.0), st.floats(0, 1))


@st.composite
def scenarios(
    draw: st.DrawFn,
    weight_strategy: st.SearchStrategy[float] = weights,
    limit_strategy: st.SearchStrategy[float] = quotas,
) -> Scenario:
    count = draw(st.integers(1, MAX_QUEUES))
    depths: list[int] = []
    queues: list[QueueShareInput] = []
    for index in range(count):
        possible_parents = [i for i in range(index) if depths[i] < MAX_DEPTH]
        parent = draw(st.none() | st.sampled_from(possible_parents)) if possible_parents else None
        depths.append(1 if parent is None else depths[parent] + 1)
        queues.append(
            QueueShareInput(
                name=f"q{index}",
                parent=None if parent is None else f"q{parent}",
                priority=draw(st.integers(1, 3)),
                creation_rank=draw(st.integers(0, 10)),
                deserved=draw(quotas),
                limit=draw(limit_strategy),
                over_quota_weight=draw(weight_strategy),
                request=draw(amounts),
                usage=draw(usages),
            )
        )
    total = draw(st.one_of(st.integers(0, 40).map(float), st.floats(0, 40)))
    k_value = draw(st.sampled_from([1.0, 0.0, 0.5, 2.0]))
    unit = draw(st.sampled_from([1.0, 1.0, 0.5, 0.25]))
    return Scenario(total, queues, k_value, unit)


# --- an independent view of the tree, for checking ---------------------------------------------------------


def children_of(queues: list[QueueShareInput]) -> dict[str | None, list[QueueShareInput]]:
    children: dict[str | None, list[QueueShareInput]] = {}
    for queue in queues:
        children.setdefault(queue.parent, []).append(queue)
    return children


def subtree_request(queue: QueueShareInput, children: dict[str | None, list[QueueShareInput]]) -> float:
    kids = children.get(queue.name)
    if not kids:
        return queue.request
    return sum(subtree_request(kid, children) for kid in kids)


def levels(scenario: Scenario, shares: dict[str, float]) -> Iterator[tuple[float, list[QueueShareInput]]]:
    """Yield (level total, siblings): the top level with the cluster total, then every parent's children."""
    children = children_of(scenario.queues)
    yield scenario.total, children.get(None, [])
    for queue in scenario.queues:
        if queue.name in children:
            yield shares[queue.name], children[queue.name]


def deserved_amount(queue: QueueShareInput, level_total: float, request: float) -> float:
    """§5.2 step 1: min(deserved (-1 => level total), request, limit (-1 => unlimited))."""
    deserved = level_total if queue.deserved == -1 else queue.deserved
    limit = math.inf if queue.limit == -1 else queue.limit
    return max(min(deserved, request, limit), 0.0)


def level_deserved(
    scenario: Scenario, level_total: float, siblings: list[QueueShareInput]
) -> dict[str, float]:
    children = children_of(scenario.queues)
    return {q.name: deserved_amount(q, level_total, subtree_request(q, children)) for q in siblings}


# --- properties -------------------------------------------------------------------------------------------


@fair_share_settings
@given(scenarios())
def test_levels_never_hand_out_more_than_their_total(scenario: Scenario) -> None:
    """(1) Σ shares of a level <= the level total (top level: cluster total; below: the parent's share).

    Exception required by §5.2 itself: when the deserved phase alone oversubscribes the level (Σ deserved >
    total, e.g. deserved -1 = whole total for several queues), KAI still gives every queue its deserved amount
    and skips the over-quota phase.  In that case we check exactly that instead.
    """
    shares = scenario.shares()
    for level_total, siblings in levels(scenario, shares):
        deserved = level_deserved(scenario, level_total, siblings)
        if sum(deserved.values()) <= level_total:
            assert sum(shares[q.name] for q in siblings) <= level_total + TOLERANCE
        else:
            # Float sums of deserved amounts (e.g. 4.001 built from parts) may differ in the last bit.
            assert {q.name: shares[q.name] for q in siblings} == pytest.approx(deserved, abs=TOLERANCE)


@fair_share_settings
@given(scenarios())
def test_no_queue_exceeds_its_limit_or_request(scenario: Scenario) -> None:
    """(2) share <= limit (when limit >= 0) and share <= request (parents: Σ of their children's)."""
    shares = scenario.shares()
    children = children_of(scenario.queues)
    for queue in scenario.queues:
        share = shares[queue.name]
        assert share >= 0
        assert share <= subtree_request(queue, children) + TOLERANCE
        if queue.limit >= 0:
            assert share <= queue.limit + TOLERANCE


@fair_share_settings
@given(scenarios())
def test_deserved_is_honoured_when_it_fits(scenario: Scenario) -> None:
    """(3) If Σ min(deserved, request, limit) fits in a level's total, everyone gets at least that."""
    shares = scenario.shares()
    for level_total, siblings in levels(scenario, shares):
        deserved = level_deserved(scenario, level_total, siblings)
        if sum(deserved.values()) <= level_total:
            for name, amount in deserved.items():
                assert shares[name] >= amount - TOLERANCE


@fair_share_settings
@given(scenarios(), st.data())
def test_more_weight_never_costs_more_than_one_unit(scenario: Scenario, data: st.DataObject) -> None:
    """(4) Raising one queue's over-quota weight, all else equal, never lowers its share by more than a unit.

    Strict monotonicity does NOT hold under KAI's round structure: the whole-unit rounding can hand a queue
    its last unit through the leftover phase at a lower weight while, at a higher weight, the rounds split
    exactly and end earlier.  Smallest known case (also pinned in test_fair_share_division.py): weights
    5/3/4/2, requests 1/5/4/3, deserved 0, T=11: q1 gets 5 at weight 3 but 4 at weight 4.  Random searches
    never found a loss above one unit.
    """
    index = data.draw(st.integers(0, len(scenario.queues) - 1))
    raised = data.draw(st.one_of(st.sampled_from([0.1, 1.0, 3.0, 10.0]), st.floats(0.01, 20)))
    queue = scenario.queues[index]
    heavier = queue._replace(over_quota_weight=max(queue.over_quota_weight, 0.0) + raised)
    before = scenario.shares()[queue.name]
    after = dataclasses.replace(scenario, queues=with_queue(scenario.queues, index, heavier)).shares()[
        queue.name
    ]
    assert after >= before - scenario.unit - TOLERANCE


@fair_share_settings
@given(scenarios(weight_strategy=positive_weights, limit_strategy=st.just(-1.0)))
def test_work_conserving_without_limits(scenario: Scenario) -> None:
    """(5) With positive weights and no limits, a level whose demand covers its total hands all of it out.

    The brief allows a one-unit gap; the implementation is exact (up to float noise), since rounds only stop
    with a remainder when every candidate was offered less than a unit, and the leftover pass then gives
    each candidate up to a unit.  We assert the stronger statement.
    """
    shares = scenario.shares()
    children = children_of(scenario.queues)
    for level_total, siblings in levels(scenario, shares):
        demand = sum(subtree_request(q, children) for q in siblings)
        if demand >= level_total:
            assert sum(shares[q.name] for q in siblings) >= level_total - TOLERANCE


@fair_share_settings
@given(scenarios(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(scenario: Scenario, rng: random.Random) -> None:
    shuffled = list(scenario.queues)
    rng.shuffle(shuffled)
    assert dataclasses.replace(scenario, queues=shuffled).shares() == scenario.shares()


def with_queue(queues: list[QueueShareInput], index: int, queue: QueueShareInput) -> list[QueueShareInput]:
    return [queue if i == index else q for i, q in enumerate(queues)]
